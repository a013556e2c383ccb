"""The options of ``costgraph train`` and ``costgraph plan``, declared once (issue 31 item 1).

:class:`TrainOptions` and :class:`PlanOptions` are frozen dataclasses, one field per option: the
field's name is the keyword of :meth:`costgraph.Model.train` / :meth:`costgraph.Model.plan` (and of
:func:`costgraph.training.api.train`, :func:`costgraph.training.planning.plan_layouts`) and the JSON
name; its :func:`~costgraph.option_fields.option` metadata the flag, help line, choices (from
:mod:`costgraph.choices`), default, unit and value check. The commands' ``argparse`` arguments, the
API's keyword check, the value checks and the schemas' ``$defs/options`` are generated from these
fields (:mod:`costgraph.option_fields`). The layout's own options (``--tp``, ``--zero``, ...) are the
fields of :class:`costgraph.layout_options.LayoutOptions` (the :class:`~costgraph.parallel.layout.Layout`'s),
declared there with their flags and the planner's search domains. An unknown keyword
(``TrainOptions(gpuz=8)``) is refused with a did-you-mean hint, the layout's names among the hints.

>>> TrainOptions(mfu="0.45").mfu
'0.45'
>>> PlanOptions(gpus=8, hardware="h100-sxm", global_batch=64).top
10

Light at import (the standard library and :mod:`costgraph.choices`).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import choices
from .layout_options import LayoutOptions
from .option_fields import keywords_checked, like, option

#: the help of ``--efficiency-profile`` (train, plan, fit: :func:`costgraph.commands._analysis.efficiency_profile_argument`)
EFFICIENCY_PROFILE_HELP = ("a calibration profile (costgraph calibrate ... -o FILE) fitted on --hardware: its factors "
                           "multiply the step time's parts, its memory reserve is the fit verdict's")
#: the help of train's ``--memory`` (shared by fit, report and plot through ``train_arguments``)
MEMORY_HELP = ("device memory: 80GB (10^9 B), 80GiB (2^30 B) or bytes (default: the --hardware preset's); adds the "
               "fit verdict and the largest b and s that fit")
#: the help of train's ``--reserve``
RESERVE_HELP = ("memory the fit verdict keeps free on each device: runtime (default: the CUDA context, cuBLAS "
                "workspaces and NCCL buffers, named, on the memory CUDA reports), a fraction of it "
                f"({choices.DEFAULT_RESERVE}) or a size (8GB)")

#: the help of train's and plan's ``--memory-convention`` (fit's: :mod:`costgraph.fit_options`)
MEMORY_CONVENTION_HELP = ("which figure of the --hardware preset is the device memory of the fit verdict (every "
                          "--reserve form): " + choices.MEMORY_CONVENTION.help())


def _memory_convention():
    # default None (read as cuda): a convention given with --memory is refused, whichever (runtime_memory.device_memory)
    return option("--memory-convention", MEMORY_CONVENTION_HELP, choices=choices.MEMORY_CONVENTION, check="choice",
                  default=None, optional=True)


def _efficiency_profile():
    return option("--efficiency-profile", EFFICIENCY_PROFILE_HELP, default=None, metavar="FILE")


@keywords_checked(also=lambda: LayoutOptions, where="a setting of the layout, not of {cls}: Model.train(..., {name}=...) or "
                                       "costgraph.parallel.layout.Layout({name}=...)")
@dataclass(frozen=True)
class TrainOptions:
    """The options of ``costgraph train`` beside its layout (:func:`costgraph.training.api.train`
    documents each; ``--help`` shows the fields in this order). Numbers may be ints, floats (read by
    their decimal digits) or text such as ``"2e12"``; ``memory``: bytes or a size (``"80GB"``)."""

    hardware: object = option("--hardware", "a hardware preset (costgraph hardware lists them): peak FLOP/s and "
                                            "device memory", default=None)
    peak: object = option("--peak", "peak FLOP/s per device (instead of a preset's dense BF16 peak, or without one), "
                                    "e.g. 989.4e12; FP8 policies take the preset's FP8 peak for their linears",
                          default=None, unit="FLOP/s", check="positive")
    mfu: object = option("--mfu", "assumed model FLOPs utilization, e.g. 0.45: gives step time and training time",
                         default=None, unit="fraction")
    achieved: object = option("--achieved", "achieved (hardware) FLOP/s per device, e.g. 140e12 (Narayanan §5.1)",
                              default=None, unit="FLOP/s", check="positive")
    tokens: object = option("--tokens", "training tokens D, e.g. 300e9: days, GPU-hours, PF-days", default=None,
                            unit="tokens", check="positive")
    price: object = option("--price", "price per GPU-hour (any currency), e.g. 2.5", default=None,
                           unit="currency per GPU-hour", check="positive")
    global_batch: object = option("--global-batch", "sequences per step: sets m = B / (b·d)", default=None,
                                  unit="sequences", check="whole", type=int)
    efficiency: object = option(
        "--efficiency", "a flat fraction of each peak every compute kernel reaches in the step time (default: the "
        f"per-kernel time model on a preset with a kernel table, else {choices.DEFAULT_EFFICIENCY} with a peak; one "
        "rate: --mfu, --achieved or --efficiency)", default=None, unit="fraction")
    efficiency_profile: object = _efficiency_profile()
    convention: str = option("--convention", "FLOP convention: matmul (matrix products only; default) or all",
                             choices=choices.CONVENTION, check="choice")
    causal: str = option("--causal", "attention FLOPs over the full s×s square (default), the causal mask's kept "
                                     "pairs as an area (half) or whole pairs (exact)",
                         choices=choices.CAUSAL, check="choice")
    router: bool = option("--no-router", "leave out MoE router FLOPs (as Megatron-LM)", default=True, check="flag",
                          action="store_false")
    megatron: bool = option("--megatron", "also show Megatron-LM's theoretical_memory_usage.py estimate beside "
                                          "costgraph's first stage", default=False, check="flag", action="store_true")
    scope: str = option("--scope", None, default="model", choices=("model", "layer"))
    rate_covers: object = option("--rate-covers", "what --mfu/--achieved cover: step (default: whole steps, bubble "
                                                  "and communication inside, as PaLM and Narayanan measure them) or "
                                                  "compute (kernels; bubble and communication added)",
                                 default=None, choices=("step", "compute"))
    memory: object = option("--memory", MEMORY_HELP, default=None, unit="bytes", check="size")
    reserve: object = option("--reserve", RESERVE_HELP, default=None, unit="fraction or bytes")
    memory_convention: str = _memory_convention()


@keywords_checked()
@dataclass(frozen=True)
class PlanOptions:
    """The options of ``costgraph plan`` (:func:`costgraph.training.planning.plan_layouts` documents
    each; ``--help`` shows the fields in this order): ``gpus``, ``hardware`` and ``global_batch`` have no
    default; ``command`` (the ``costgraph train`` words of the result's check command) is the API's only."""

    gpus: int = option("--gpus", "devices in all", unit="devices", check="whole", type=int, required=True)
    hardware: object = option("--hardware", "a hardware preset (costgraph hardware)", required=True)
    global_batch: int = option("--global-batch", "sequences per step", unit="sequences", check="whole", type=int,
                               required=True)
    tokens: object = option("--tokens", "training tokens D: days to train for the best layouts", default=None,
                            unit="tokens", check="positive")
    efficiency: object = option("--efficiency", "a flat fraction of the peak every compute kernel reaches (default: "
                                                "the per-kernel time model on a preset with a kernel table, else "
                                                f"{choices.DEFAULT_EFFICIENCY})", default=None, unit="fraction")
    memory: object = option("--memory", "device memory instead of the preset's (80GB, 80GiB)", default=None,
                            unit="bytes", check="size")
    memory_convention: str = _memory_convention()
    # the layout's options (costgraph.layout_options: flag, choices, default declared there), plan's help
    precision: str = like(LayoutOptions, "policy", help=f"precision policy (default {choices.DEFAULT_POLICY})")
    optimizer: str = like(LayoutOptions, "optimizer", help=f"optimizer (default {choices.DEFAULT_OPTIMIZER}; costgraph "
                                                            "train --help lists them)")
    attention: str = like(LayoutOptions, "attention", check="choice")
    overlap: str = like(LayoutOptions, "overlap", check="choice", optional=True)
    cross_entropy: str = like(LayoutOptions, "cross_entropy", check="choice")
    link_rate: str = like(LayoutOptions, "link_rate", check="choice")
    ep_dispatcher: str = like(LayoutOptions, "ep_dispatcher", check="choice")
    # the framework's attention kernel, given as train takes it and never searched (as link_rate): torchtitan's
    # F.scaled_dot_product_attention runs FlashAttention-2 (fa2) on Hopper (choices.ATTENTION_KERNEL)
    attention_kernel: str = like(LayoutOptions, "attention_kernel", check="choice")
    # how CP exchanges K and V (Megatron's --cp-comm-type), given as train takes it and never searched
    cp_comm_type: str = like(LayoutOptions, "cp_comm_type", check="choice")
    # the time model's GEMM rate (choices.GEMM_RATE), passed to every row as attention_kernel, never searched
    gemm_rate: str = like(LayoutOptions, "gemm_rate", check="choice")
    # the compute's slowdown beside hidden collectives (choices.OVERLAP_CONTENTION), passed to every row, never searched
    overlap_contention: str = like(LayoutOptions, "overlap_contention", check="choice")
    # the framework's FSDP: the full parameters it holds beside the shards, passed to every ZeRO-3 row
    # (layout_options.given_where_applies) as train takes it, never searched: torchtitan's FSDP2 keeps the root gathered
    zero3_gathered: str = like(LayoutOptions, "zero3_gathered", check="choice")
    pipeline_layout: object = like(
        LayoutOptions, "pipeline_layout", help="only layouts with this Megatron-LM --pipeline-model-parallel-layout "
        "(e.g. Et*4|(t*4|)*14tmL): pp and the virtual stages from its stages, as costgraph train takes it")
    allow_fp8: bool = option("--allow-fp8", "search the FP8 precision policies too (a preset with an FP8 peak)",
                             default=False, check="flag", action="store_true")
    allow_offload: bool = option("--allow-offload", "search optimizer and parameter offload (CPU, NVMe) and "
                                 "activation offload (half the layers) too",
                                 default=False, check="flag", action="store_true")
    exhaustive: bool = option("--exhaustive", "search Megatron's recompute modules, method and layer counts, and a "
                                              "MoE's --ep-overlap and --route-nodes too (each value derives its own "
                                              "closed forms: slower)", default=False, check="flag",
                                              action="store_true")
    compare: object = option("--compare", "a layout in costgraph train's flags (\"--tp 4 --pp 8 --virtual-stages 5 "
                                          "--zero 1 --sp --set b=1\"): where it ranks and its step's parts against "
                                          "the first row's (costgraph.training.plan_compare)", default=None,
                             metavar="FLAGS")
    top: int = option("--top", "how many layouts to show (default 10)", default=10, unit="layouts", check="whole",
                      type=int)
    reserve: object = option("--reserve", "memory kept free on each device: a fraction of it (0.1) or a size (8GB); "
                                          f"default {choices.DEFAULT_RESERVE}", default=None,
                             unit="fraction or bytes")
    efficiency_profile: object = _efficiency_profile()
    command: object = option(None, "the costgraph train words naming the model in the result's check command "
                                   "(default: its name and values as --set)", default=None)
