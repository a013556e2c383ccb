"""A torchtitan job TOML read as costgraph's options: :func:`read_torchtitan`.

Read with :mod:`tomllib` (nothing evaluated), as torchtitan's ``JobConfig`` reads it
(torchtitan @ 238fa99 ``torchtitan/config/job_config.py``; defaults for what the file leaves out in
``torchtitan.toml``):

* ``[model] name`` + ``flavor`` → a bundled model and configuration (``torchtitan.toml``:
  ``llama3`` 8B/70B/405B, ``deepseek_v3`` 16B/671B); ``converters`` with ``float8`` (or
  ``quantize.linear.float8``) → the ``fp8-current`` policy (torchao's tensorwise dynamic scaling);
* ``[training] local_batch_size`` → ``b`` (with PP: ``pipeline_parallel_microbatch_size``, and
  ``micro_batches`` = local / micro, unless the global batch gives them), ``seq_len`` → ``s``,
  ``global_batch_size`` (when not −1) → ``global_batch`` (m = B / (b·d)), ``mixed_precision_param``
  bfloat16 → ``mixed`` (FSDP2's bf16 compute, fp32
  sharded parameters and gradients reduced in fp32: 16 bytes a parameter with Adam), float32 → ``fp32``;
* ``[parallelism]``: ``tensor_parallel_degree`` → ``tp`` (with sequence parallelism: torchtitan's TP
  plan shards the norms' sequence), ``pipeline_parallel_degree`` → ``pp``, ``context_parallel_degree``
  → ``cp``, ``expert_parallel_degree`` → ``ep``, ``expert_tensor_parallel_degree`` → ``etp``,
  ``data_parallel_shard_degree`` (−1: the devices left, from ``--gpus``) > 1 → ``zero`` 3 (FSDP),
  with ``data_parallel_replicate_degree`` > 1 → ``hsdp`` = the shard degree; ``gpus`` = their product;
  ``pipeline_parallel_schedule`` Interleaved1F1B → ``interleaved``, GPipe → ``gpipe``;
* ``[activation_checkpoint] mode`` none/full → ``none``/``full``; selective with
  ``selective_ac_option = "op"`` → ``torchtitan-op``, an integer N → ``torchtitan-layer`` every N;
* ``[optimizer] name`` → ``optimizer`` (AdamW → ``adamw``).

The other sections (job, metrics, checkpoint, ...) and keys change no cost: listed as ignored.
"""

from __future__ import annotations

import re
import tomllib
from functools import cache

from .. import datafiles
from ..arguments import digits
from ..datafiles import Field, Kind, Schema
from .result import Launch, Origin
from .text import located, quoted, whole

_FLAVOR = Kind("torchtitan flavor", (Field("model", "text"), Field("config", "text", required=False),
                                     Field("source", "text"), Field("set", "table", required=False)))
_DEFAULTS = Kind("torchtitan default", (
    Field("source", "text"), Field("local_batch_size", positive=True), Field("seq_len", positive=True),
    Field("pipeline_parallel_microbatch_size", positive=True), Field("mode", "text"),
    Field("selective_ac_option", "text"), Field("mixed_precision_param", "text")))
#: ``torchtitan.toml``: flavors by torchtitan model name, and torchtitan's defaults
TORCHTITAN_TOML = Schema("torchtitan.toml", __package__, groups=(("llama3", _FLAVOR), ("deepseek_v3", _FLAVOR)),
                         records=(("defaults", _DEFAULTS),))

#: sections that change no cost
_IGNORED_SECTIONS = {"job", "profiling", "metrics", "lr_scheduler", "checkpoint", "comm", "validation", "compile",
                     "fault_tolerance", "experimental", "memory_estimation", "debug", "float8", "quantize", "mx"}
#: keys of the read sections that change no cost
_IGNORED_KEYS = {"model": {"hf_assets_path", "tokenizer_path", "print_after_conversion"},
                 "training": {"dataset", "dataset_path", "max_norm", "steps", "gc_freq", "gc_debug", "seed",
                              "deterministic", "dtype", "mixed_precision_reduce", "dataloader"},
                 "parallelism": {"disable_loss_parallel", "enable_async_tensor_parallel",
                                 "fsdp_reshard_after_forward", "context_parallel_rotate_method",
                                 "context_parallel_load_balancer", "expert_parallel_comm_backend",
                                 "pipeline_parallel_expert_parallel_overlap", "pipeline_parallel_schedule_csv"},
                 "activation_checkpoint": {"per_op_sac_force_recompute_mm_shapes_by_fqns", "early_stop",
                                           "preserve_rng_state", "determinism_check", "debug"},
                 "optimizer": {"lr", "eps", "weight_decay", "implementation", "beta1", "beta2"}}
_KNOWN = {"model": {"name", "flavor", "converters"},
          "training": {"local_batch_size", "global_batch_size", "seq_len", "mixed_precision_param"},
          "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
                          "pipeline_parallel_degree", "context_parallel_degree", "expert_parallel_degree",
                          "expert_tensor_parallel_degree", "pipeline_parallel_microbatch_size",
                          "pipeline_parallel_schedule"},
          "activation_checkpoint": {"mode", "selective_ac_option"},
          "optimizer": {"name"}}
_SCHEDULES = {"1F1B": "1f1b", "Interleaved1F1B": "interleaved", "GPipe": "gpipe", "ZBVZeroBubble": "zb-h1"}


@cache
def _table():
    return datafiles.bundled(TORCHTITAN_TOML)


class _File:
    """The parsed job file with each key's line, for values and messages."""

    def __init__(self, path: str, text: str, data: dict):
        self.path, self.text, self.data = path, text, data
        # each table header's and each key's first line, found in one pass: a file of many tables or
        # keys (200,000 in 4 MB) took a search of the whole text per one, past a minute
        self._lines: dict[tuple, int] = {}
        section = None
        for n, row in enumerate(text.split("\n"), start=1):
            head = re.match(r"[ \t]*\[[ \t]*([^\[\]\n]+?)[ \t]*\]", row)
            if head:
                section = head.group(1)
                self._lines.setdefault((section,), n)
                continue
            key = re.match(r"[ \t]*([A-Za-z0-9_-]+)[ \t]*=", row)
            if key and section is not None:
                self._lines.setdefault((section, key.group(1)), n)

    def line(self, section: str, key: str | None = None) -> int:
        """The 1-based line of ``[section]`` (with ``key``: of its ``key =``, else of the header), 1 if absent."""
        at = self._lines.get((section,))
        if at is None:
            return 1
        return at if key is None else self._lines.get((section, key), at)

    def where(self, section: str, key: str) -> str:
        return f"{self.path}:{self.line(section, key)}" if key in self.data.get(section, {}) else "torchtitan's default"

    def get(self, section: str, key: str, default=None):
        return self.data.get(section, {}).get(key, default)

    def degree(self, key: str, default: int = 1) -> int:
        v = self.get("parallelism", key, default)
        return v if v == -1 else whole(v, f"[parallelism] {key}", self.path, self.text, self.line("parallelism", key))


def read_torchtitan(path: str, text: str, gpus: int | None = None) -> Launch:
    """The :class:`Launch` of a torchtitan job TOML ``text`` at ``path`` (module docstring);
    ``gpus``: the command line's ``--gpus`` (resolves ``data_parallel_shard_degree = -1``).

    Raises
    ------
    CostgraphValueError
        Invalid TOML (located), an unknown model name or flavor, a degree that is not a positive whole
        number, ``-1`` without ``--gpus`` or not dividing it, an activation checkpoint mode costgraph
        has no policy for (``memory_budget``)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"line (\d+), column (\d+)", str(e))
        raise located("invalid TOML: " + re.sub(r" \(at line.*", "", str(e).split("\n")[0])[:80], path, text,
                      int(m.group(1)) if m else 1, int(m.group(2)) if m else 1,
                      hint="a torchtitan job file: [model], [training], [parallelism] tables") from None
    except (RecursionError, ValueError):
        raise located("invalid TOML: nested too deeply or a number too long", path, text, 1,
                      hint="a torchtitan job file: [model], [training], [parallelism] tables") from None
    f, launch = _File(path, text, data), Launch("torchtitan", path)
    _sections(f, launch)
    _model(f, launch)
    _parallelism(f, launch, gpus)
    _checkpointing(f, launch)
    name = f.get("optimizer", "name")
    if name is not None:
        launch.set_value("optimizer", str(name).lower(), f.where("optimizer", "name"), f"[optimizer] name = {quoted(name)}")
    return launch


def _sections(f: _File, launch: Launch) -> None:
    for section, table in f.data.items():
        line = f.line(section)
        if section in _IGNORED_SECTIONS:
            launch.ignored.append(f"[{section}] ({f.path}:{line})")
        elif section not in _KNOWN or not isinstance(table, dict):
            launch.unknown.append(f"[{quoted(section)}] ({f.path}:{line})")
        else:
            for key in table:
                if key in _IGNORED_KEYS.get(section, ()):
                    launch.ignored.append(f"[{section}] {key} ({f.path}:{f.line(section, key)})")
                elif key not in _KNOWN[section]:
                    launch.unknown.append(f"[{section}] {quoted(key)} ({f.path}:{f.line(section, key)})")


def _model(f: _File, launch: Launch) -> None:
    """The bundled model of ``[model] name`` and ``flavor``; FP8 of ``converters``; precision; b and s."""
    name, flavor = f.get("model", "name", "llama3"), f.get("model", "flavor")
    flavors = _table().groups.get(name) if isinstance(name, str) else None
    entry = flavors.get(flavor) if flavors is not None and isinstance(flavor, str) else None
    if entry is None:
        known = ", ".join(f"{g} {fl}" for g, fls in _table().groups.items() for fl in fls)
        raise located(f"[model] name = {quoted(name)}, flavor = {quoted(flavor)}: no bundled configuration",
                      f.path, f.text, f.line("model", "flavor"), hint=f"known: {known}; or give MODEL and --set")
    where, words = f.where("model", "flavor"), f"[model] name = {name}, flavor = {flavor}"
    launch.model, launch.config = entry["model"], entry.get("config")
    launch.origins["model"] = Origin(where, words)
    launch.notes.append(f"{words}: model {entry['model']}" + (f" --config {entry['config']}" if entry.get("config")
                                                              else "") + f" ({entry['source'].split(':')[0]})")
    for k, v in (entry.get("set") or {}).items():
        launch.set_dim(k, v, where, words)
    conv = f.get("model", "converters", []) or []
    fp8 = any(c in ("float8", "quantize.linear.float8") for c in conv if isinstance(c, str)) \
        or f.get("float8", "enable_float8_linear") is True   # torchtitan before converters (2024)
    param = f.get("training", "mixed_precision_param", _table().records["defaults"]["mixed_precision_param"])
    policy = "fp8-current" if fp8 else {"bfloat16": "mixed", "float32": "fp32"}.get(param)
    if policy is None:
        raise located(f"[training] mixed_precision_param = {quoted(param)}: torchtitan takes bfloat16 or float32",
                      f.path, f.text, f.line("training", "mixed_precision_param"),
                      hint='mixed_precision_param = "bfloat16" (torchtitan\'s default) or "float32"')
    launch.set_value("precision", policy, f.where("model", "converters") if fp8 else
                     f.where("training", "mixed_precision_param"),
                     f"[model] converters = {conv}" if fp8 else f"mixed_precision_param = {param}")
    s = f.get("training", "seq_len", _table().records["defaults"]["seq_len"])
    launch.set_dim("s", whole(s, "[training] seq_len", f.path, f.text, f.line("training", "seq_len")),
                   f.where("training", "seq_len"), f"seq_len = {s}")


def _parallelism(f: _File, launch: Launch, gpus: int | None) -> None:
    """Degrees, FSDP/HSDP, devices, micro-batches and the batch (module docstring)."""
    deg = {k: f.degree(k) for k in ("data_parallel_replicate_degree", "tensor_parallel_degree",
                                    "pipeline_parallel_degree", "context_parallel_degree",
                                    "expert_parallel_degree", "expert_tensor_parallel_degree")}
    shard = f.degree("data_parallel_shard_degree", -1)
    rep, tp, pp, cp = (deg[k] for k in ("data_parallel_replicate_degree", "tensor_parallel_degree",
                                        "pipeline_parallel_degree", "context_parallel_degree"))
    where = f.where("parallelism", "data_parallel_shard_degree")
    if shard == -1:
        if gpus is None:
            raise located("data_parallel_shard_degree = -1 takes the devices left: give --gpus", f.path, f.text,
                          f.line("parallelism", "data_parallel_shard_degree"), hint="e.g. --gpus 64")
        if gpus % (rep * tp * pp * cp):
            raise located(f"--gpus {gpus} is not a multiple of replicate × TP × PP × CP = {rep * tp * pp * cp}",
                          f.path, f.text, f.line("parallelism", "data_parallel_shard_degree"),
                          hint=f"a multiple of {rep * tp * pp * cp} devices: the -1 shard degree takes what is "
                               "left (torchtitan's ParallelDims)")
        shard = gpus // (rep * tp * pp * cp)
        launch.notes.append(f"data_parallel_shard_degree = -1: {shard} (--gpus {gpus})")
    for dest, key in (("tp", "tensor_parallel_degree"), ("pp", "pipeline_parallel_degree"),
                      ("cp", "context_parallel_degree"), ("ep", "expert_parallel_degree")):
        launch.set_value(dest, deg[key], f.where("parallelism", key), f"{key} = {deg[key]}")
    if deg["expert_tensor_parallel_degree"] != 1:
        launch.set_value("etp", deg["expert_tensor_parallel_degree"],
                         f.where("parallelism", "expert_tensor_parallel_degree"),
                         f"expert_tensor_parallel_degree = {deg['expert_tensor_parallel_degree']}")
    launch.set_value("sp", tp > 1, f.where("parallelism", "tensor_parallel_degree"),
                     f"tensor_parallel_degree = {tp} (torchtitan's TP plan shards the sequence of the norms)")
    launch.set_value("gpus", rep * shard * tp * pp * cp, where, f"replicate {rep} × shard {shard} × TP {tp} × "
                                                                f"PP {pp} × CP {cp}")
    launch.set_value("zero", 3 if shard > 1 else 0, where, f"data_parallel_shard_degree = {shard} (FSDP2)")
    _conventions(launch, shard)
    if shard > 1 and rep > 1:
        launch.set_value("hsdp", shard, f.where("parallelism", "data_parallel_replicate_degree"),
                         f"data_parallel_replicate_degree = {rep} (HSDP)")
    sched = f.get("parallelism", "pipeline_parallel_schedule")
    if sched is not None and pp > 1:
        if sched not in _SCHEDULES:
            raise located(f"pipeline_parallel_schedule = {quoted(sched)}: costgraph has 1F1B, Interleaved1F1B, "
                          "GPipe, ZBVZeroBubble", f.path, f.text, f.line("parallelism", "pipeline_parallel_schedule"),
                          hint='one of those, e.g. pipeline_parallel_schedule = "1F1B"')
        launch.set_value("schedule", _SCHEDULES[sched], f.where("parallelism", "pipeline_parallel_schedule"),
                         f"pipeline_parallel_schedule = {sched}")
    _batch(f, launch, pp, rep * shard)


def _batch(f: _File, launch: Launch, pp: int, dp: int) -> None:
    d = _table().records["defaults"]
    local = f.get("training", "local_batch_size", d["local_batch_size"])
    local = whole(local, "[training] local_batch_size", f.path, f.text, f.line("training", "local_batch_size"))
    where = f.where("training", "local_batch_size")
    if pp > 1:
        micro = whole(f.get("parallelism", "pipeline_parallel_microbatch_size", d["pipeline_parallel_microbatch_size"]),
                      "pipeline_parallel_microbatch_size", f.path, f.text,
                      f.line("parallelism", "pipeline_parallel_microbatch_size"))
        if local % micro:
            raise located(f"local_batch_size {local} is not a multiple of pipeline_parallel_microbatch_size {micro}",
                          f.path, f.text, f.line("training", "local_batch_size"),
                          hint=f"a local_batch_size that is a multiple of {micro}, or a microbatch size that divides "
                               f"{local}")
        launch.set_dim("b", micro, f.where("parallelism", "pipeline_parallel_microbatch_size"),
                       f"pipeline_parallel_microbatch_size = {micro}")
    else:
        launch.set_dim("b", local, where, f"local_batch_size = {local}")
    g = f.get("training", "global_batch_size", -1)
    if g != -1:   # m = B / (b·d): the accumulation steps and, with PP, local / micro micro-batches each
        g = whole(g, "[training] global_batch_size", f.path, f.text, f.line("training", "global_batch_size"))
        if g % (local * dp):   # torchtitan @ 238fa99 train.py (Trainer.__init__, "verify batch sizes") asserts it
            low, step = g - g % (local * dp), local * dp
            raise located(f"[training] global_batch_size = {g} is not a multiple of local_batch_size × data-parallel "
                          f"degree = {local} × {dp} = {step}: torchtitan asserts it", f.path, f.text,
                          f.line("training", "global_batch_size"), word="global_batch_size",
                          hint=f"global_batch_size = {' or '.join(map(str, ([low] if low else []) + [low + step]))} "
                               "(a whole number of accumulation steps), or -1 (one step of local_batch_size per "
                               "data-parallel rank)")
        launch.set_value("global_batch", g, f.where("training", "global_batch_size"), f"global_batch_size = {g}")
    elif pp > 1:   # one step of local_batch_size: local / micro micro-batches (both given were refused)
        launch.set_value("micro_batches", local // micro, where, f"local_batch_size = {local} / microbatch {micro}")


def _conventions(launch: Launch, shard: int) -> None:
    """torchtitan's own ways, as bench/published_layouts.toml's torchtitan rows name them: weak (a
    flag given on the command line wins, noted). FSDP2 keeps the root module gathered (torchtitan
    parallelize_llama.py: fully_shard(model) last); the loss is F.cross_entropy on fp32-upcast logits
    (torchtitan @ 9dec370 train.py loss_fn: ``F.cross_entropy(pred.flatten(0, 1).float(), labels)``);
    FSDP2 prefetch with TP and PP exposed (:data:`costgraph.choices.OVERLAP` torchtitan). The attention
    kernel is not set: SDPA runs FlashAttention-2 on Hopper but cuDNN first on sm_100 (pytorch/torchtitan#1196),
    which the file does not say."""
    default = "torchtitan's default"
    if shard > 1:
        launch.set_value("zero3_gathered", "fsdp2", default, "FSDP2: fully_shard(model) keeps the root module gathered")
    launch.set_value("cross_entropy", "pytorch", default, "loss_fn: F.cross_entropy(pred.float(), labels)")
    launch.set_value("overlap", "torchtitan", default, "FSDP2 prefetch; TP and PP exposed")
    launch.weak.update({"zero3_gathered", "cross_entropy", "overlap"} & set(launch.values))


def _checkpointing(f: _File, launch: Launch) -> None:
    d = _table().records["defaults"]
    mode = f.get("activation_checkpoint", "mode", d["mode"])
    option = str(f.get("activation_checkpoint", "selective_ac_option", d["selective_ac_option"]))
    where, words = f.where("activation_checkpoint", "mode"), f"[activation_checkpoint] mode = {quoted(mode)}"
    if mode in ("none", "full"):
        launch.set_value("recompute", mode, where, words)
    elif mode == "selective" and option == "op":
        launch.set_value("recompute", "torchtitan-op", where, words + ", selective_ac_option = op")
    elif mode == "selective" and digits(option) and 0 < len(option) <= 6 and int(option) > 0:
        launch.set_value("recompute", "torchtitan-layer", where, words + f", selective_ac_option = {option}")
        launch.set_value("recompute_frequency", int(option), f.where("activation_checkpoint", "selective_ac_option"),
                         f"selective_ac_option = {option}")
    else:
        raise located(f"{words}, selective_ac_option = {quoted(option)}: costgraph has none, full, selective with "
                      "op or every N-th block", f.path, f.text, f.line("activation_checkpoint", "mode"),
                      hint='selective_ac_option = "op", or a whole number N in the ASCII digits 0-9 ("2": every 2nd '
                           'block)')
