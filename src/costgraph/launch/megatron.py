"""A Megatron-LM launch script (or argument list) read as costgraph's options: :func:`read_megatron`.

The script is split into words by :mod:`costgraph.launch.shell` (never run); its command is the
one that calls ``pretrain_*.py`` (after ``torchrun``, ``python -m torch.distributed.run``, ...)
or, in an argument list, the words themselves. Megatron reads its arguments with argparse: the
last of an argument given twice wins, as here. Read into costgraph's terms:

* the model (:mod:`costgraph.launch.megatron_model`): the bundled family and its dimensions;
* the layout: ``--tensor-model-parallel-size`` → ``tp``, ``--pipeline-model-parallel-size`` →
  ``pp``, ``--num-layers-per-virtual-pipeline-stage`` N → ``virtual_stages`` = layers / (pp·N)
  (``--num-virtual-stages-per-pipeline-rank`` directly), ``--pipeline-model-parallel-layout``,
  ``--sequence-parallel`` → ``sp``, ``--context-parallel-size`` → ``cp``,
  ``--expert-model-parallel-size`` → ``ep``, ``--expert-tensor-parallel-size`` → ``etp``,
  ``--micro-batch-size`` → ``b``, ``--seq-length`` → ``s``, ``--global-batch-size`` →
  ``global_batch``, ``--recompute-granularity/-method/-num-layers/-modules`` → ``recompute*``,
  ``--use-distributed-optimizer`` → ``zero`` 1 (else 0), the precision policy
  (:func:`precision`), ``--decoder-first/last-pipeline-num-layers``,
  ``--account-for-embedding/loss-in-pipeline-split``, ``--fp8-dot-product-attention``,
  ``--no-fp8-wgrad``, ``--cross-entropy-loss-fusion`` → ``cross_entropy`` ``megatron-fused`` (with
  ``--cross-entropy-fusion-impl te``, which Megatron-LM refuses, refused), ``--moe-token-dispatcher-type``
  → ``ep_dispatcher`` (:func:`dispatcher`: alltoall → ``alltoall``; flex with the DeepEP backend →
  ``deepep``; Megatron's default allgather, and flex's other backends, timed as NCCL's all-to-all, noted);
* the devices: ``torchrun``'s ``--nproc_per_node`` × ``--nnodes`` → ``gpus`` when they hold the
  script's TP × PP × CP (a template that does not, such as Megatron's GPT-3 175B example with one
  node for 128 ranks, leaves ``--gpus`` to the command line, with a note).

Megatron's defaults for what the script leaves out are in ``megatron.toml`` (read by
:mod:`costgraph.datafiles`), with its ignored arguments (those that change no cost); any other
argument is listed as unknown, never taken.
"""

from __future__ import annotations

import re
from functools import cache

from .. import datafiles
from ..arguments import digits
from ..errors import CostgraphValueError
from ..datafiles import Field, Kind, Schema
from .result import Launch
from .shell import UNSET, unset_message, unset_names
from .text import located, quoted, whole

_DEFAULT_FIELDS = (Field("source", "text"), *(Field(k, "int", positive=True) for k in (
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
    "expert_model_parallel_size", "moe_router_topk", "num_query_groups", "moe_layer_freq")),
    *(Field(k, "text") for k in ("normalization", "position_embedding_type", "fp8_recipe")))
#: ``megatron.toml``: Megatron's defaults and its arguments that change no cost
MEGATRON_TOML = Schema("megatron.toml", __package__, records=(
    ("defaults", Kind("Megatron default", _DEFAULT_FIELDS)),
    ("ignored", Kind("ignored arguments", (Field("source", "text"), Field("names", "names"))))))

#: the arguments read as numbers (Megatron's attribute names, ``-`` as ``_``)
NUMBERS = {"num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
           "ffn_hidden_size", "vocab_size", "max_position_embeddings", "num_experts", "moe_router_topk",
           "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "q_lora_rank", "kv_lora_rank",
           "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim", "mtp_num_layers",
           "tensor_model_parallel_size", "pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage",
           "num_virtual_stages_per_pipeline_rank", "context_parallel_size", "expert_model_parallel_size",
           "expert_tensor_parallel_size", "micro_batch_size", "global_batch_size", "seq_length",
           "recompute_num_layers", "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
           "microbatch_group_size_per_virtual_pipeline_stage"}
#: the arguments read as text (one word, or several: ``--recompute-modules``)
TEXTS = {"normalization", "position_embedding_type", "moe_layer_freq", "pipeline_model_parallel_layout",
         "recompute_granularity", "recompute_method", "recompute_modules", "fp8_format", "fp8_recipe", "optimizer",
         "cross_entropy_fusion_impl", "moe_token_dispatcher_type", "moe_flex_dispatcher_backend"}
#: the switches read (present or not)
FLAGS = {"group_query_attention", "swiglu", "untie_embeddings_and_output_weights", "disable_bias_linear",
         "add_bias_linear", "add_qkv_bias", "qk_layernorm", "multi_latent_attention", "sequence_parallel",
         "use_distributed_optimizer", "bf16", "fp16", "fp8_param_gather", "grad_reduce_in_bf16",
         "recompute_activations", "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
         "fp8_dot_product_attention", "no_fp8_wgrad", "make_vocab_size_divisible_by", "cross_entropy_loss_fusion",
         "moe_enable_deepep"}
#: the launchers whose ``--nproc_per_node``/``--nnodes`` give the devices
_LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")
_SCRIPT = re.compile(r"(^|/)[A-Za-z0-9_]*\.py$")


@cache
def _table():
    data = datafiles.bundled(MEGATRON_TOML)
    return dict(data.records["defaults"].values), set(data.records["ignored"]["names"])


def defaults() -> dict:
    """Megatron's defaults of ``megatron.toml`` (``tensor_model_parallel_size`` ... ``fp8_recipe``)."""
    return {k: v for k, v in _table()[0].items() if k != "source"}


def read_megatron(path: str, text: str, script, gpus: int | None = None) -> Launch:
    """The :class:`Launch` of a Megatron-LM script ``text`` at ``path``, split into ``script``
    (:func:`costgraph.launch.shell.commands`); ``gpus``: the command line's ``--gpus``, if given.

    Raises
    ------
    CostgraphValueError
        No ``pretrain_*.py`` command (nor an argument list), a value that is not a whole number
        where Megatron takes one, a needed value left to a variable the file does not assign, or a
        model no bundled family has (located at the argument's line)."""
    from .megatron_model import read_model

    launcher, words = _command(script, path, text)
    launch = Launch("megatron", path)
    args = _arguments(words, launch, path, text)
    if script.branches:
        launch.notes.append(f"if/else at line {', '.join(map(str, script.branches[:4]))}: every branch read "
                            "(the file is never run)")
    a = {**defaults(), **{k: v for k, (v, _) in args.items()}}
    lines = {k: line for k, (_, line) in args.items()}
    read_model(a, lines, launch, path, text)
    _layout(a, lines, launch, path, text)
    _devices(launcher, a, launch, path, gpus)
    return launch


def _command(script, path: str, text: str):
    """``(launcher words, Megatron's words)`` of the script's ``pretrain_*.py`` command."""
    for words in reversed(script.commands):
        for k, (w, _) in enumerate(words):
            if _SCRIPT.search(w) and k + 1 < len(words) and words[k + 1][0].startswith("--"):
                return words[:k], words[k + 1:]
    for words in script.commands:   # an argument list: the words themselves
        if words and words[0][0].startswith("--"):
            return [], [w for c in script.commands for w in c]
    held = []   # a file of arguments held in variables (MODEL_ARGS="--num-layers 61 ..."), never launched
    for value in script.variables.values():
        items = value if isinstance(value, list) else [(value, 0)]
        words = [(w, line) for item, line in items for w in str(item).split()]
        if words and words[0][0].startswith("--"):
            held += [(w, line or _line_of(text, w)) for w, line in words]
    if held:
        return [], held
    raise CostgraphValueError(f"{path}: no Megatron-LM command found: no pretrain_*.py followed by its arguments",
                              hint="give the launch script (torchrun ... pretrain_gpt.py --num-layers ...) or its "
                                   "argument list")   # no line quoted: the file may be anything


def _line_of(text: str, word: str) -> int:
    """The line of the first ``word`` in ``text`` (a word read from a string variable)."""
    m = re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text)
    return text.count("\n", 0, m.start()) + 1 if m else 1


def _arguments(words: list, launch: Launch, path: str, text: str) -> dict:
    """Megatron's arguments in ``words``: attribute → ``(value, line)`` (the last given wins), the
    ignored and unknown ones recorded in ``launch``."""
    _, ignored = _table()
    out, i = {}, 0
    while i < len(words):
        word, line = words[i]
        j = i + 1
        while j < len(words) and not words[j][0].startswith("--"):
            j += 1
        values = [w for w, _ in words[i + 1:j]]
        name = word[2:].split("=", 1)[0] if word.startswith("--") else None
        if name is not None and "=" in word:
            values = [word.split("=", 1)[1]] + values
        key = name.replace("-", "_") if name else None
        if key in NUMBERS or key in TEXTS or key in FLAGS:
            out[key] = (_read(key, name, values, line, path, text), line)
        elif name in ignored:
            launch.ignored.append(f"--{name} ({path}:{line})")
        else:
            launch.unknown.append(f"{quoted(word)} ({path}:{line})")
        i = j
    return out


def _read(key: str, name: str, values: list, line: int, path: str, text: str):
    if key in FLAGS:
        return True
    if not values:
        raise located(f"--{name} takes a value", path, text, line, hint=f"write --{name} VALUE", word=f"--{name}")
    missing = [n for v in values for n in unset_names(v)]
    if missing:
        message, hint = unset_message(f"--{name}", missing[0])
        raise located(message, path, text, line, hint=hint, word=f"--{name}")
    if key in NUMBERS:
        return whole(values[0], f"--{name}", path, text, line)
    return list(values) if key == "recompute_modules" else values[0]


def precision(a: dict) -> tuple[str, str]:
    """The precision policy of Megatron's ``--bf16``/``--fp16``/``--fp8-format``/``--fp8-recipe``/
    ``--fp8-param-gather``/``--grad-reduce-in-bf16``, and the reason (policies.toml names each):
    FP8 (``--fp8-format``) by recipe: delayed → ``fp8-delayed``, tensorwise → ``fp8-current``,
    blockwise → ``fp8-blockwise``, mxfp8 → ``fp8-mxfp8``, with FP8 parameters
    (``--fp8-param-gather``) the ``-bridge`` policy (FP8 parameters, bf16 main gradients); bf16 or
    fp16 → ``megatron`` (fp32 main gradients, Megatron's default) or, with
    ``--grad-reduce-in-bf16``, ``mixed`` (16-bit gradients); neither → ``fp32``."""
    if a.get("fp8_format"):
        recipe = a["fp8_recipe"]
        base = {"delayed": "fp8-delayed", "tensorwise": "fp8-current", "blockwise": "fp8-blockwise",
                "mxfp8": "fp8-mxfp8"}.get(recipe)
        if base is None:
            return "", f"--fp8-recipe {quoted(recipe)}"
        if a.get("fp8_param_gather") and base != "fp8-blockwise":
            return base + "-bridge", f"--fp8-format {a['fp8_format']} --fp8-recipe {recipe} --fp8-param-gather"
        return base, f"--fp8-format {a['fp8_format']} --fp8-recipe {recipe}"
    if a.get("bf16") or a.get("fp16"):
        flag = "--bf16" if a.get("bf16") else "--fp16"
        return ("mixed", flag + " --grad-reduce-in-bf16") if a.get("grad_reduce_in_bf16") else ("megatron", flag)
    return "fp32", "neither --bf16 nor --fp16 (Megatron's default: fp32)"


def _layout(a: dict, lines: dict, launch: Launch, path: str, text: str) -> None:
    """The layout options of Megatron's arguments ``a`` into ``launch`` (module docstring)."""
    def where(*keys):
        line = next((lines[k] for k in keys if k in lines), None)
        return f"{path}:{line}" if line else "Megatron-LM's default"

    def put(dest, value, *keys, words=None):
        launch.set_value(dest, value, where(*keys), words or " ".join(
            f"--{k.replace('_', '-')}" + ("" if a.get(k) is True else " " + (" ".join(a[k]) if isinstance(a[k], list)
                                                                            else str(a[k]))) for k in keys if k in a))
    for dest, key in (("tp", "tensor_model_parallel_size"), ("pp", "pipeline_model_parallel_size"),
                      ("cp", "context_parallel_size"), ("ep", "expert_model_parallel_size")):
        put(dest, a[key], key)
    if "expert_tensor_parallel_size" in a:
        put("etp", a["expert_tensor_parallel_size"], "expert_tensor_parallel_size")
    sp = bool(a.get("sequence_parallel")) and a["tensor_model_parallel_size"] > 1
    put("sp", sp, "sequence_parallel", words="--sequence-parallel" if sp else "no --sequence-parallel")
    if a.get("sequence_parallel") and not sp:   # arguments.py l. 1433-1439
        launch.notes.append("--sequence-parallel with --tensor-model-parallel-size 1: Megatron-LM disables it")
    put("zero", 1 if a.get("use_distributed_optimizer") else 0, "use_distributed_optimizer",
        words="--use-distributed-optimizer" if a.get("use_distributed_optimizer") else "no --use-distributed-optimizer")
    if a.get("bf16") and a.get("fp16"):   # validate_args: "if args.fp16: assert not args.bf16" (arguments.py)
        raise located("--bf16 and --fp16 are both given: Megatron-LM asserts one at most", path, text,
                      max(lines["bf16"], lines["fp16"]), hint="keep one of --bf16 and --fp16", word="--fp16")
    policy, why = precision(a)
    if not policy:
        raise located(f"{why}: costgraph has no precision policy for it", path, text,
                      lines.get("fp8_recipe", 1), hint="costgraph train --help lists the policies (--precision)")
    launch.set_value("precision", policy, where("fp8_format", "bf16", "fp16"), why)
    if "global_batch_size" in a:
        put("global_batch", a["global_batch_size"], "global_batch_size")
    _virtual(a, lines, launch, path, text, put)
    _recompute(a, launch, put)
    for dest, key in (("first_stage_layers", "decoder_first_pipeline_num_layers"),
                      ("last_stage_layers", "decoder_last_pipeline_num_layers"),
                      ("vp_group", "microbatch_group_size_per_virtual_pipeline_stage"),
                      ("pipeline_layout", "pipeline_model_parallel_layout")):
        if key in a:
            put(dest, a[key], key)
    for dest, key, value in (("account_embedding", "account_for_embedding_in_pipeline_split", True),
                             ("account_loss", "account_for_loss_in_pipeline_split", True),
                             ("fp8_attention", "fp8_dot_product_attention", True),
                             ("fp8_wgrad", "no_fp8_wgrad", False)):
        if a.get(key):
            put(dest, value, key)
    if a.get("cross_entropy_loss_fusion"):   # fusions/fused_cross_entropy.py (costgraph.training.cross_entropy)
        if a.get("cross_entropy_fusion_impl", "native") != "native":   # arguments.py l. 1697-1702
            raise located(f"--cross-entropy-fusion-impl {a['cross_entropy_fusion_impl']} with "
                          "--cross-entropy-loss-fusion: Megatron-LM refuses it (Transformer Engine's cross entropy "
                          "is disabled there)", path, text, lines.get("cross_entropy_fusion_impl", 1),
                          hint="--cross-entropy-fusion-impl native, or leave out --cross-entropy-loss-fusion; a "
                               "Megatron-Bridge run with Transformer Engine's kernel: costgraph train --cross-entropy "
                               "te")
        put("cross_entropy", "megatron-fused", "cross_entropy_loss_fusion")
    _dispatcher(a, lines, launch, path, text, put)
    if "optimizer" in a:
        put("optimizer", a["optimizer"], "optimizer")
    if a.get("make_vocab_size_divisible_by"):
        launch.notes.append("--make-vocab-size-divisible-by: costgraph counts the vocabulary V unpadded")


#: Megatron's --moe-token-dispatcher-type values (Megatron-LM @ d98e8a64 transformer_config.py:
#: ``moe_token_dispatcher_type: Literal['allgather', 'alltoall', 'flex'] = "allgather"``) and flex's backends
#: (``moe_flex_dispatcher_backend: Literal['deepep', 'hybridep', 'ncclep'] = "deepep"``)
DISPATCHERS = ("allgather", "alltoall", "flex")
FLEX_BACKENDS = ("deepep", "hybridep", "ncclep")


def dispatcher(a: dict) -> tuple[str, str | None]:
    """``(ep_dispatcher, note)`` of Megatron's arguments ``a`` (:data:`costgraph.choices.EP_DISPATCHER`):
    ``--moe-token-dispatcher-type alltoall`` → ``alltoall`` (MoEAlltoAllTokenDispatcher: NCCL's all-to-all);
    ``flex`` with ``--moe-flex-dispatcher-backend deepep`` (its default) or ``--moe-enable-deepep``
    (transformer_config.py __post_init__ sets the backend to deepep) → ``deepep``; flex's ``hybridep`` and
    ``ncclep`` backends and ``allgather`` (Megatron's default, MoEAllGatherTokenDispatcher: every token
    all-gathered across the EP × TP group, its reduce-scatter back) have no model here: ``alltoall`` (NCCL's
    all-to-all at ``--link-rate``) is assumed and the note says so."""
    kind = a.get("moe_token_dispatcher_type", "allgather")
    if kind == "alltoall":
        return "alltoall", None
    if kind == "flex":
        backend = "deepep" if a.get("moe_enable_deepep") else a.get("moe_flex_dispatcher_backend", "deepep")
        if backend == "deepep":
            return "deepep", None
        return "alltoall", (f"--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend {backend}: costgraph "
                            "has no model of its kernels; the EP dispatch and combine timed as NCCL's all-to-all "
                            "(--ep-dispatcher alltoall), assumed")
    given = "moe_token_dispatcher_type" in a
    return "alltoall", ((f"--moe-token-dispatcher-type allgather" if given else
                         "no --moe-token-dispatcher-type: Megatron-LM's default allgather")
                        + " (every token all-gathered across the EP group, reduce-scattered back) is not "
                          "modelled; the EP dispatch and combine timed as NCCL's all-to-all (--ep-dispatcher "
                          "alltoall), assumed")


def _dispatcher(a, lines, launch, path, text, put) -> None:
    """``ep_dispatcher`` of ``--moe-token-dispatcher-type`` (:func:`dispatcher`) on a MoE (``--num-experts``);
    a value Megatron takes none of refused at its line."""
    for key, allowed in (("moe_token_dispatcher_type", DISPATCHERS), ("moe_flex_dispatcher_backend", FLEX_BACKENDS)):
        if key in a and a[key] not in allowed:
            flag = "--" + key.replace("_", "-")
            raise located(f"{flag} {quoted(a[key])}: Megatron-LM takes {', '.join(allowed)}", path, text,
                          lines.get(key, 1), hint=f"{flag} " + " or ".join(allowed) + " (Megatron-LM @ d98e8a64 "
                          "transformer_config.py)", word=flag)
    if a.get("num_experts") is None:   # a dense model: Megatron builds no dispatcher
        if "moe_token_dispatcher_type" in a:
            launch.notes.append("--moe-token-dispatcher-type without --num-experts: a dense model has no EP "
                                "dispatch (not read)")
        return
    value, note = dispatcher(a)
    keys = [k for k in ("moe_token_dispatcher_type", "moe_flex_dispatcher_backend", "moe_enable_deepep") if k in a]
    if note is None:
        put("ep_dispatcher", value, *keys)
    elif a.get("expert_model_parallel_size", 1) > 1:   # the EP exchange is timed: say what was assumed
        launch.notes.append(note)


def _virtual(a, lines, launch, path, text, put) -> None:
    """``virtual_stages`` and the interleaved schedule of ``--num-layers-per-virtual-pipeline-stage``."""
    if "num_virtual_stages_per_pipeline_rank" in a:
        v = a["num_virtual_stages_per_pipeline_rank"]
        put("virtual_stages", v, "num_virtual_stages_per_pipeline_rank")
    elif "num_layers_per_virtual_pipeline_stage" in a:
        n, pp, per = a["num_layers"], a["pipeline_model_parallel_size"], a["num_layers_per_virtual_pipeline_stage"]
        if n % (pp * per):
            raise located(f"--num-layers {n} is not a multiple of --pipeline-model-parallel-size {pp} × "
                          f"--num-layers-per-virtual-pipeline-stage {per}", path, text,
                          lines["num_layers_per_virtual_pipeline_stage"], hint="Megatron-LM refuses it too")
        v = n // (pp * per)
        put("virtual_stages", v, "num_layers_per_virtual_pipeline_stage", "num_layers", "pipeline_model_parallel_size")
    else:
        return
    if v > 1:
        launch.set_value("schedule", "interleaved", launch.origins["virtual_stages"].where,
                         "virtual pipeline stages: Megatron's interleaved 1F1B")


def _recompute(a, launch: Launch, put) -> None:
    """``recompute`` and its details from ``--recompute-granularity`` (``--recompute-activations``: selective)."""
    gran = a.get("recompute_granularity") or ("selective" if a.get("recompute_activations") else None)
    if gran is None:
        put("recompute", "none", "recompute_granularity", words="no --recompute-granularity (Megatron's default)")
        return
    put("recompute", gran, "recompute_granularity", "recompute_activations")
    for dest in ("recompute_method", "recompute_num_layers", "recompute_modules"):
        if dest in a:
            put(dest, a[dest], dest)


def _devices(launcher: list, a: dict, launch: Launch, path: str, gpus: int | None) -> None:
    """``gpus`` from torchrun's ``--nproc_per_node`` × ``--nnodes`` when they hold TP × PP × CP."""
    words = [w for w, _ in launcher]
    if not any(w.endswith(name) for w in words for name in _LAUNCHERS):
        return
    found = {}
    for k, w in enumerate(words[:-1]):
        key = w.lstrip("-").replace("-", "_")
        if key in ("nproc_per_node", "nnodes") and digits(words[k + 1]) and len(words[k + 1]) <= 9:
            found[key] = (int(words[k + 1]), launcher[k][1])
    if "nproc_per_node" not in found:
        return
    n = found["nproc_per_node"][0] * found.get("nnodes", (1, 0))[0]
    tp, pp = a["tensor_model_parallel_size"], a["pipeline_model_parallel_size"]
    model = tp * pp * a["context_parallel_size"]
    # the expert grid too: EP × ETP (ETP defaults to TP) × PP ranks divide the world (Megatron-LM's
    # RankGenerator of the experts); the Mixtral template's one node of 8 holds PP 4 but not EP 8 × PP 4
    experts = a["expert_model_parallel_size"] * a.get("expert_tensor_parallel_size", tp) * pp
    text = f"torchrun --nproc_per_node {found['nproc_per_node'][0]} --nnodes {found.get('nnodes', (1,))[0]}"
    if n % model == 0 and (n % experts == 0 or gpus is not None):
        launch.set_value("gpus", n, f"{path}:{found['nproc_per_node'][1]}", text)
        launch.weak.add("gpus")   # a launcher's node count is the template's: --gpus replaces it
    elif gpus is None:
        grid = f"TP × PP × CP = {model}" if n % model else f"EP × ETP × PP = {experts}"
        launch.notes.append(f"{text} ({n} devices) cannot hold {grid}: the devices are the command line's (--gpus)")


__all__ = ["read_megatron", "precision", "defaults", "MEGATRON_TOML", "UNSET"]
