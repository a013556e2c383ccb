"""A DeepSpeed config JSON read as costgraph's options: :func:`read_deepspeed`.

Read as a ``config.json`` is (:func:`costgraph.language.hf_config.parse_json`: located errors,
bounded depth and numbers), then as DeepSpeed reads it (deepspeedai/DeepSpeed @ edaa722
``deepspeed/runtime/config.py``, ``deepspeed/runtime/zero/config.py``,
``deepspeed/runtime/zero/offload_config.py``):

* ``zero_optimization.stage`` → ``zero`` (0 when absent: DeepSpeed's default);
  ``offload_optimizer.device`` / ``offload_param.device`` (``none``, ``cpu``, ``nvme``) →
  ``offload_optimizer`` / ``offload_params``; the legacy ``cpu_offload: true`` → optimizer offload to CPU;
* ``train_micro_batch_size_per_gpu`` → ``b``; ``gradient_accumulation_steps`` → ``micro_batches``;
  ``train_batch_size`` → ``global_batch`` (train_batch_size = micro-batch × accumulation × data
  parallel, DeepSpeed's ``_set_batch_related_parameters``; given without the micro-batch, the
  micro-batch is derived from it and ``--gpus``);
* ``bf16.enabled`` / ``fp16.enabled`` → ``mixed-fp32-grads`` (16-bit parameters and gradients, the
  fp32 master copy and an fp32 copy of the gradient partition, fp32 Adam moments: 20 bytes a parameter,
  as DeepSpeed's ``stage_1_and_2.py``/``stage3.py`` keep them and its ZeRO estimators count them,
  policies.toml); neither → ``fp32``; both refused (as DeepSpeed refuses them);
* ``optimizer.type`` → ``optimizer`` (``AdamW`` → ``adamw``).

The model is the command line's (a DeepSpeed config names none). A value ``"auto"`` (filled by the
Hugging Face Trainer at run time) is not read: noted. Other keys change no cost: listed as ignored,
or unknown.
"""

from __future__ import annotations

from .result import Launch
from .text import line_finder, located, quoted, whole

#: top-level keys that change no cost
_IGNORED = {"steps_per_print", "gradient_clipping", "scheduler", "wall_clock_breakdown", "prescale_gradients",
            "gradient_predivide_factor", "sparse_gradients", "dump_state", "tensorboard", "wandb", "csv_monitor",
            "flops_profiler", "comms_logger", "communication_data_type", "seq_parallel_communication_data_type",
            "activation_checkpointing", "aio", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer",
            "amp", "data_efficiency", "compression_training", "checkpoint", "elasticity", "autotuning",
            "memory_breakdown", "timers", "gradient_accumulation_dtype", "fp8"}
_READ = {"zero_optimization", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size",
         "bf16", "fp16", "optimizer"}


def read_deepspeed(path: str, text: str, gpus: int | None = None) -> Launch:
    """The :class:`Launch` of a DeepSpeed config ``text`` at ``path`` (module docstring); ``gpus``:
    the command line's ``--gpus`` (to derive the micro-batch from ``train_batch_size``).

    Raises
    ------
    CostgraphValueError
        Invalid JSON (located), not an object, a ZeRO stage outside 0-3, an offload device outside
        none/cpu/nvme, a batch size that is not a positive whole number."""
    from ..language.hf_config import parse_json

    data = parse_json(text, path)
    if not isinstance(data, dict):
        raise located("a DeepSpeed config is one JSON object", path, text, 1, hint='{"zero_optimization": ...}')
    launch = Launch("deepspeed", path)

    line = line_finder(text, r'"([^"\\\n]*)"\s*:')   # a key's first "key": (nested keys too)

    def where(key):
        return f"{path}:{line(key)}"
    for key in data:
        if key in _IGNORED:
            launch.ignored.append(f"{key} ({path}:{line(key)})")
        elif key not in _READ:
            launch.unknown.append(f"{quoted(key)} ({path}:{line(key)})")
    if "activation_checkpointing" in data:
        launch.notes.append("activation_checkpointing: DeepSpeed checkpoints what the model code wraps; give "
                            "--recompute for it")
    _zero(data.get("zero_optimization") or {}, launch, path, text, where, line)
    _batch(data, launch, path, text, gpus, where, line)
    _precision(data, launch, path, text, where, line)
    opt = data.get("optimizer")
    if isinstance(opt, dict) and isinstance(opt.get("type"), str):
        launch.set_value("optimizer", opt["type"].lower(), where("optimizer"), f'"type": {quoted(opt["type"])}')
    return launch


def _precision(data: dict, launch: Launch, path: str, text: str, where, line) -> None:
    """``bf16``/``fp16`` ``enabled`` → ``precision`` (module docstring); ``"auto"`` not read (noted); both
    enabled refused, as DeepSpeed's ``DeepSpeedConfig`` asserts ("bfloat16 and fp16 modes cannot be
    simultaneously enabled", deepspeed/runtime/config.py @ edaa722)."""
    enabled = {k: data[k].get("enabled") for k in ("bf16", "fp16") if isinstance(data.get(k), dict)}
    auto = [k for k, v in enabled.items() if v == "auto"]
    if auto:
        launch.notes.append(f'{auto[0]}.enabled "auto": filled by the Hugging Face Trainer at run time; not read '
                            "(give --precision)")
        return
    on = [k for k, v in enabled.items() if v is True]
    if len(on) == 2:
        raise located("bf16 and fp16 are both enabled; DeepSpeed refuses the two together", path, text, line("fp16"),
                      hint='keep one: "bf16": {"enabled": true} or "fp16": {"enabled": true}')
    launch.set_value("precision", "mixed-fp32-grads" if on else "fp32", where(on[0]) if on else "DeepSpeed's default",
                     f'"{on[0]}": {{"enabled": true}}' if on else "neither bf16 nor fp16 enabled")


def _zero(z, launch: Launch, path: str, text: str, where, line) -> None:
    if not isinstance(z, dict):
        raise located("zero_optimization is an object", path, text, line("zero_optimization"),
                      hint='e.g. "zero_optimization": {"stage": 3}')
    stage = z.get("stage", 0)
    if isinstance(stage, bool) or stage not in (0, 1, 2, 3):
        raise located(f"zero_optimization.stage {quoted(stage)}: DeepSpeed has stages 0 to 3", path, text,
                      line("stage"), hint='a whole number 0, 1, 2 or 3, e.g. "stage": 3')
    launch.set_value("zero", stage, where("stage") if "stage" in z else "DeepSpeed's default",
                     f'"stage": {stage}')
    for dest, key in (("offload_optimizer", "offload_optimizer"), ("offload_params", "offload_param")):
        block = z.get(key)
        if block is None:
            continue
        device = block.get("device", "none") if isinstance(block, dict) else None
        if device not in ("none", "cpu", "nvme"):
            raise located(f"{key}.device {quoted(device)}: DeepSpeed takes none, cpu or nvme", path, text, line(key),
                          hint=f'e.g. "{key}": {{"device": "cpu"}}')
        launch.set_value(dest, device, where(key), f'"{key}": {{"device": "{device}"}}')
    if z.get("cpu_offload") is True and "offload_optimizer" not in launch.values:
        launch.set_value("offload_optimizer", "cpu", where("cpu_offload"), '"cpu_offload": true (legacy)')
    for key in z:
        if key not in ("stage", "offload_optimizer", "offload_param", "cpu_offload"):
            launch.ignored.append(f"zero_optimization.{quoted(key)} ({path}:{line(key)})")


def _batch(data: dict, launch: Launch, path: str, text: str, gpus, where, line) -> None:
    def read(key):
        v = data.get(key)
        if v == "auto":
            launch.notes.append(f'{key} "auto": filled by the Hugging Face Trainer at run time; not read')
            return None
        return None if v is None else whole(v, key, path, text, line(key))
    micro, gas, total = (read(k) for k in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                            "train_batch_size"))
    if micro is None and total is not None and gpus is not None:
        if total % ((gas or 1) * gpus):
            raise located(f"train_batch_size {total} is not a multiple of gradient_accumulation_steps {gas or 1} × "
                          f"--gpus {gpus}", path, text, line("train_batch_size"),
                          hint=f"a train_batch_size that is a multiple of {(gas or 1) * gpus}, or other --gpus "
                               "(DeepSpeed asserts train_batch_size = micro-batch × accumulation × data-parallel size)")
        micro = total // ((gas or 1) * gpus)
        launch.notes.append(f"micro-batch {micro} = train_batch_size {total} / ({gas or 1} × --gpus {gpus})")
    if None not in (micro, gas, total) and (total % (micro * gas) or (gpus is not None and total != micro * gas * gpus)):
        # DeepSpeed's _batch_assertion (deepspeedai/DeepSpeed deepspeed/runtime/config.py): "train_batch_size is
        # not equal to micro_batch_per_gpu * gradient_acc_step * world_size" (trial6: the total was dropped unread)
        world = f"--gpus {gpus}" if gpus is not None else "any number of devices"
        raise located(f"train_batch_size {total} is not train_micro_batch_size_per_gpu {micro} × "
                      f"gradient_accumulation_steps {gas} × {world}, as DeepSpeed asserts", path, text,
                      line("train_batch_size"), hint="give two of the three (DeepSpeed derives the third)")
    if micro is not None:
        launch.set_dim("b", micro, where("train_micro_batch_size_per_gpu") if "train_micro_batch_size_per_gpu" in data
                       else where("train_batch_size"), f"train_micro_batch_size_per_gpu = {micro}")
    if gas is not None:
        launch.set_value("micro_batches", gas, where("gradient_accumulation_steps"),
                         f"gradient_accumulation_steps = {gas}")
    elif total is not None:
        launch.set_value("global_batch", total, where("train_batch_size"), f"train_batch_size = {total}")
