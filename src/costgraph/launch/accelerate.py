"""An accelerate config YAML (FSDP or DeepSpeed) read as costgraph's options: :func:`read_accelerate`.

Read with ``yaml.safe_load`` (PyYAML, the ``yaml`` extra; no object construction, nothing run), as
``accelerate launch --config_file`` reads it (huggingface/accelerate ``commands/config/cluster.py``
and ``utils/dataclasses.py``):

* ``num_processes`` → ``gpus`` (all processes of all machines);
* ``mixed_precision`` bf16/fp16 → ``mixed`` (FSDP: sharded fp32 parameters, bf16 compute; with the
  DeepSpeed plugin ``mixed-fp32-grads``, as :mod:`costgraph.launch.deepspeed`), ``no`` → ``fp32`` (fp8
  is refused: give ``--precision``);
* ``distributed_type: FSDP``: ``fsdp_config.fsdp_sharding_strategy`` FULL_SHARD (or 1) → ``zero`` 3,
  SHARD_GRAD_OP (2) → 2, NO_SHARD (3) → 0, HYBRID_SHARD (4) → 3 with ``hsdp`` = processes per machine,
  HYBRID_SHARD_ZERO2 (5) → 2 with ``hsdp``; FSDP2's ``fsdp_reshard_after_forward`` true/false → 3/2;
  ``fsdp_offload_params: true`` → parameters and optimizer offloaded to CPU;
* ``distributed_type: DEEPSPEED``: ``deepspeed_config.zero_stage``, ``offload_optimizer_device``,
  ``offload_param_device``, ``gradient_accumulation_steps`` (a ``deepspeed_config_file`` is not
  followed: give that file to ``--launch`` itself);
* ``MULTI_GPU`` → ``zero`` 0 (DDP).

The model is the command line's. Other keys change no cost: listed as ignored, or unknown.
"""

from __future__ import annotations

from ..optional import need
from .result import Launch
from .text import line_finder, located, quoted, whole

_IGNORED = {"compute_environment", "debug", "downcast_bf16", "machine_rank", "main_process_ip", "main_process_port",
            "main_training_function", "rdzv_backend", "same_network", "tpu_env", "tpu_use_cluster",
            "tpu_use_sudo", "use_cpu", "gpu_ids", "enable_cpu_affinity", "dynamo_config", "num_machines"}
_SHARDING = {"FULL_SHARD": (3, False), "1": (3, False), "SHARD_GRAD_OP": (2, False), "2": (2, False),
             "NO_SHARD": (0, False), "3": (0, False), "HYBRID_SHARD": (3, True), "4": (3, True),
             "HYBRID_SHARD_ZERO2": (2, True), "5": (2, True)}


def read_accelerate(path: str, text: str) -> Launch:
    """The :class:`Launch` of an accelerate config ``text`` at ``path`` (module docstring).

    Raises
    ------
    CostgraphValueError
        Invalid YAML (located), not a mapping, an unknown sharding strategy, fp8 mixed precision, or a
        process count that is not a positive whole number; MissingExtra without PyYAML."""
    yaml = need("yaml", "yaml", "reading an accelerate config (--launch FILE.yaml)")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise located(f"invalid YAML: {quoted(getattr(e, 'problem', None) or 'cannot parse')}", path, text,
                      mark.line + 1 if mark else 1, mark.column + 1 if mark else 1,
                      hint="an accelerate config: key: value lines (accelerate config writes one)") from None
    except RecursionError:
        raise located("invalid YAML: nested too deeply", path, text, 1,
                      hint="an accelerate config: key: value lines (accelerate config writes one)") from None
    if not isinstance(data, dict):
        raise located("an accelerate config is a mapping of settings", path, text, 1,
                      hint="key: value lines, such as distributed_type: FSDP (accelerate config writes one)")
    launch = Launch("accelerate", path)

    line = line_finder(text, r"(?m)^[ \t]*([^\s:#][^:\n]*?)[ \t]*:")   # a key's first line (nested keys too)

    def where(key):
        return f"{path}:{line(key)}"
    known = {"distributed_type", "mixed_precision", "num_processes", "fsdp_config", "deepspeed_config"}
    for key in data:
        if key in _IGNORED:
            launch.ignored.append(f"{key} ({path}:{line(str(key))})")
        elif key not in known:
            launch.unknown.append(f"{quoted(key)} ({path}:{line(str(key))})")
    n = data.get("num_processes")
    if n is not None:
        launch.set_value("gpus", whole(n, "num_processes", path, text, line("num_processes")), where("num_processes"),
                         f"num_processes: {n}")
    mp = str(data.get("mixed_precision", "no"))
    if mp not in ("no", "bf16", "fp16"):
        raise located(f"mixed_precision: {quoted(mp)}: give the policy with --precision", path, text,
                      line("mixed_precision"), hint="costgraph train --help lists the precision policies")
    launch.set_value("precision", "fp32" if mp == "no" else "mixed",
                     where("mixed_precision") if "mixed_precision" in data else "accelerate's default",
                     f"mixed_precision: {mp}")
    kind = str(data.get("distributed_type", "NO"))
    if kind == "DEEPSPEED" and mp != "no":   # DeepSpeed keeps an fp32 copy of the gradient partition
        launch.values["precision"] = "mixed-fp32-grads"
    if kind == "FSDP":
        _fsdp(data.get("fsdp_config") or {}, data, launch, path, text, line, where)
    elif kind == "DEEPSPEED":
        _deepspeed(data.get("deepspeed_config") or {}, launch, path, text, line, where)
    elif kind in ("MULTI_GPU", "NO"):
        launch.set_value("zero", 0, where("distributed_type"), f"distributed_type: {kind}")
    else:
        launch.unknown.append(f"distributed_type: {quoted(kind)} ({path}:{line('distributed_type')})")
    return launch


def _fsdp(cfg, data, launch: Launch, path: str, text: str, line, where) -> None:
    if not isinstance(cfg, dict):
        raise located("fsdp_config is a mapping", path, text, line("fsdp_config"),
                      hint="indented key: value lines under fsdp_config:, such as fsdp_sharding_strategy: FULL_SHARD")
    if "fsdp_sharding_strategy" in cfg:
        strategy = str(cfg["fsdp_sharding_strategy"])
        if strategy not in _SHARDING:
            raise located(f"fsdp_sharding_strategy: {quoted(strategy)}: accelerate has FULL_SHARD, SHARD_GRAD_OP, "
                          "NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2", path, text, line("fsdp_sharding_strategy"),
                          hint="one of those names, e.g. fsdp_sharding_strategy: FULL_SHARD")
        stage, hybrid = _SHARDING[strategy]
        words = f"fsdp_sharding_strategy: {strategy}"
    else:
        reshard = cfg.get("fsdp_reshard_after_forward", True)
        stage, hybrid, words = (3 if reshard in (True, "FULL_SHARD") else 2), False, \
            f"fsdp_reshard_after_forward: {reshard}"
    key = "fsdp_sharding_strategy" if "fsdp_sharding_strategy" in cfg else "fsdp_reshard_after_forward"
    launch.set_value("zero", stage, where(key) if key in cfg else "accelerate's default", words)
    if hybrid:
        n, m = data.get("num_processes"), data.get("num_machines", 1)
        if isinstance(n, int) and isinstance(m, int) and m > 0 and n % m == 0:
            launch.set_value("hsdp", n // m, where("num_machines"), f"{words}: shards within a machine")
    if cfg.get("fsdp_offload_params") is True:
        launch.set_value("offload_optimizer", "cpu", where("fsdp_offload_params"), "fsdp_offload_params: true")
        if stage == 3:
            launch.set_value("offload_params", "cpu", where("fsdp_offload_params"), "fsdp_offload_params: true")
    if cfg.get("fsdp_activation_checkpointing") is True:
        launch.set_value("recompute", "full", where("fsdp_activation_checkpointing"),
                         "fsdp_activation_checkpointing: true (each block checkpointed)")
    for k in cfg:
        if k not in ("fsdp_sharding_strategy", "fsdp_reshard_after_forward", "fsdp_offload_params",
                     "fsdp_activation_checkpointing"):
            launch.ignored.append(f"fsdp_config.{quoted(k)} ({path}:{line(str(k))})")


def _deepspeed(cfg, launch: Launch, path: str, text: str, line, where) -> None:
    if not isinstance(cfg, dict):
        raise located("deepspeed_config is a mapping", path, text, line("deepspeed_config"),
                      hint="indented key: value lines under deepspeed_config:, such as zero_stage: 3")
    if "deepspeed_config_file" in cfg:
        launch.notes.append("deepspeed_config_file: not followed; give that file to --launch")
    stage = cfg.get("zero_stage", 0)
    if isinstance(stage, bool) or stage not in (0, 1, 2, 3):
        raise located(f"zero_stage: {quoted(stage)}: DeepSpeed has stages 0 to 3", path, text, line("zero_stage"),
                      hint="zero_stage: 0, 1, 2 or 3")
    launch.set_value("zero", stage, where("zero_stage"), f"zero_stage: {stage}")
    for dest, key in (("offload_optimizer", "offload_optimizer_device"), ("offload_params", "offload_param_device")):
        if key in cfg:
            device = str(cfg[key])
            if device not in ("none", "cpu", "nvme"):
                raise located(f"{key}: {quoted(device)}: none, cpu or nvme", path, text, line(key),
                              hint=f"{key}: none, cpu or nvme")
            launch.set_value(dest, device, where(key), f"{key}: {device}")
    if "gradient_accumulation_steps" in cfg:
        gas = whole(cfg["gradient_accumulation_steps"], "gradient_accumulation_steps", path, text,
                    line("gradient_accumulation_steps"))
        launch.set_value("micro_batches", gas, where("gradient_accumulation_steps"),
                         f"gradient_accumulation_steps: {gas}")
