"""Arguments and loading shared by ``costgraph report`` and ``costgraph plot``
(not a subcommand: the leading ``_`` keeps it out of
:func:`costgraph.commands.names`).

* the training layout of ``costgraph train`` (``--gpus --tp --pp --cp --ep --etp --sp --zero
  --hsdp --recompute --attention --precision --optimizer --micro-batches --schedule
  --virtual-stages --memory --no-loss``), turned into a
  :class:`~costgraph.parallel.layout.Layout` by :func:`train_layout`, the same
  function ``costgraph train`` uses;
* the inference setting of ``costgraph infer`` (``--hardware --prompt --generate --batch
  --weights --kv``), analysed by :func:`costgraph.inference.infer`;
* ``--over NAME=VALUES``: a sweep of one dimension (``s=512,1024,2048`` or
  ``s=512:8192:x2``, both ends included).

Light at import (argparse only).
"""

from __future__ import annotations

from .. import choices
from ..choices import add_option
from ..errors import CostgraphValueError
from ..option_fields import add_arguments
from ..train_options import TrainOptions

#: The training options and their defaults: any one given (not at its default) asks for the
#: training section of a report.
TRAIN_DEFAULTS = {"gpus": None, "pp": 1, "cp": 1, "ep": 1, "etp": None, "sp": False,
                  "zero": choices.ZERO_STAGE.default, "hsdp": None, "recompute": choices.RECOMPUTE.default,
                  "attention": choices.ATTENTION.default, "precision": choices.DEFAULT_POLICY,
                  "optimizer": choices.DEFAULT_OPTIMIZER, "micro_batches": None,
                  "schedule": choices.SCHEDULE.default, "virtual_stages": 1, "memory": None, "no_loss": False}

# the recompute details: given, they ask for the training section too
TRAIN_DEFAULTS.update({"recompute_modules": None, "recompute_num_layers": None, "recompute_method": None,
                       "recompute_frequency": None})
TRAIN_DEFAULTS.update({"first_stage_layers": None, "last_stage_layers": None, "account_embedding": False,
                       "account_loss": False, "vp_group": None,
                       "schedule_accounting": choices.SCHEDULE_ACCOUNTING.default, "pipeline_layout": None})
# FP8 options and the recompute FLOP count (costgraph.training.fp8_options, .recompute_count)
TRAIN_DEFAULTS.update({"fp8_attention": choices.DEFAULT_FP8_ATTENTION, "fp8_wgrad": choices.DEFAULT_FP8_WGRAD,
                       "recompute_count": choices.RECOMPUTE_COUNT.default})

#: Most points a sweep may have (a plot with more bars is unreadable anyway).
MAX_POINTS = 64


def train_arguments(p, with_train_flag: bool = False) -> None:
    """The layout options of ``costgraph train`` (``--tp`` is also the inference TP degree)."""
    if with_train_flag:
        p.add_argument("--train", action="store_true",
                       help="add the training-memory section with the default layout (one device) "
                            "even when no layout option is given")
    p.add_argument("--gpus", type=int, help="devices in all: gpus = tp × pp × cp × dp (without it: train keeps dp "
                                               "as the symbol N_d; report and plot take dp = 1)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree t (training and inference)")
    p.add_argument("--pp", type=int, default=1, help="pipeline stages p")
    p.add_argument("--cp", type=int, default=1, help="context-parallel degree c")
    p.add_argument("--ep", type=int, default=1, help="expert-parallel degree e")
    p.add_argument("--etp", type=int, default=None, help="expert tensor parallelism: 1 (default) or the TP degree")
    p.add_argument("--sp", action="store_true", help="sequence parallelism (with --tp)")
    add_option(p, choices.ZERO_STAGE, "--zero", help="ZeRO stage (3 = FSDP)")
    p.add_argument("--hsdp", type=int, help="HSDP: shard within groups of this many devices")
    add_option(p, choices.RECOMPUTE, "--recompute")
    add_option(p, choices.ATTENTION, "--attention")
    p.add_argument("--precision", default=choices.DEFAULT_POLICY, help="precision policy: fp32, bf16, mixed (default), megatron, "
                                                        "mixed-fp32-grads (activations bf16, fp32 under fp32); "
                                                        "FP8 (Transformer Engine): fp8-delayed, fp8-current, fp8-blockwise, fp8-mxfp8")
    p.add_argument("--optimizer", default=choices.DEFAULT_OPTIMIZER, help="adam (default), adamw, sgd, lion, adam-8bit, adafactor, muon, ...")
    p.add_argument("--micro-batches", type=int, help="micro-batches per step m (default: pp)")
    add_option(p, choices.SCHEDULE, "--schedule")
    p.add_argument("--virtual-stages", type=int, default=1, help="model chunks per device (interleaved)")
    add_arguments(p, TrainOptions, "memory", "memory")   # declared once (costgraph.train_options)
    p.add_argument("--no-loss", action="store_true", help="leave out the fp32 logits of the loss")
    add_arguments(p, TrainOptions, "reserve", "reserve")
    # expert placement (costgraph.parallel.ranks, costgraph.parallel.ep_time)
    p.add_argument("--rank-order", default="tp-cp-ep-dp-pp",
                   help="rank order, first fastest (Megatron's default tp-cp-ep-dp-pp; tp-cp-ep-pp-dp is its "
                        "--use-tp-pp-dp-mapping): which groups stay inside a scale-up domain")
    p.add_argument("--domain-ranks", type=int, help="consecutive ranks one scale-up domain holds (default: the "
                                                    "largest power of two ≤ the preset's domain: 64 of an NVL72)")
    add_option(p, choices.EP_OVERLAP, "--ep-overlap")
    add_option(p, choices.OVERLAP, "--overlap", help="how communication overlaps computation (costgraph.training.overlap): " + choices.OVERLAP.help())
    p.add_argument("--route-nodes", type=int, help="device-limited routing: a token's experts on at most M "
                                                   "scale-up domains (DeepSeek-V3: 4)")
    add_option(p, choices.FP8_TRANSPOSE, "--fp8-transpose",
               help="FP8 policies (fp8-delayed, fp8-current, ...): the FP8 weight's transpose buffer")
    p.add_argument("--fp8-dot-product-attention", action="store_true", dest="fp8_attention",
                   help="FP8 policies: Transformer Engine's FP8 dot-product attention (fp8_dpa): the attention "
                        "core's products at the FP8 peak, Q, K, V (and O) saved in FP8; needs --attention flash")
    p.add_argument("--no-fp8-wgrad", action="store_false", dest="fp8_wgrad",
                   help="FP8 policies: the weight-gradient GEMMs in BF16 (Megatron-LM --no-fp8-wgrad; "
                        "fp8-delayed only)")
    add_option(p, choices.RECOMPUTE_COUNT, "--recompute-count")
    # the train command's LoRA/QLoRA options are not offered here; train_layout reads them
    p.set_defaults(lora=None, lora_targets=list(choices.DEFAULT_LORA_TARGETS), quantize=None)
    # recomputation in detail (costgraph.engine.recompute)
    p.add_argument("--recompute-modules", nargs="+", metavar="MODULE",
                   help="Megatron --recompute-modules under --recompute selective: core_attn (default), mlp, moe, "
                        "moe_act, layernorm, mla_up_proj, shared_experts")
    p.add_argument("--recompute-num-layers", type=int, metavar="N",
                   help="--recompute full: layers per checkpointed run (uniform) or checkpointed layers per "
                        "stage (block); default 1")
    p.add_argument("--recompute-method", choices=("uniform", "block"),
                   help="--recompute full: Megatron's uniform (default) or block")
    p.add_argument("--recompute-frequency", type=int, metavar="N",
                   help="--recompute torchtitan-layer: every N-th block checkpointed (default 2)")
    _pipeline_arguments(p)


def lora_arguments(p) -> None:
    """``--lora R``, ``--lora-targets`` and ``--quantize`` (QLoRA) of ``costgraph train`` and ``costgraph fit``
    (:func:`train_layout` reads them)."""
    p.add_argument("--lora", type=int, metavar="R", help="LoRA adapters of rank R; the base is frozen")
    p.add_argument("--lora-targets", nargs="+", default=list(choices.DEFAULT_LORA_TARGETS), metavar="NAME",
                   help="linears to adapt: node names, path globs, or all-linear (default q_proj v_proj)")
    p.add_argument("--quantize", choices=("nf4", "nf4-double", "int8"),
                   help="QLoRA: the frozen base's linear weights quantized (bitsandbytes layouts)")


def check_lora(args) -> None:
    """``--lora-targets`` without ``--lora`` is a mistake (exit 2)."""
    if args.lora_targets != list(choices.DEFAULT_LORA_TARGETS) and args.lora is None:
        raise CostgraphValueError("--lora-targets names where LoRA adapters go: it needs --lora R",
                                  hint="add --lora R, e.g. --lora 8")


def _pipeline_arguments(p) -> None:
    """Megatron-LM's pipeline split and schedule options (issue 16 items 1-2), under Megatron's flag names."""
    p.add_argument("--decoder-first-pipeline-num-layers", type=int, dest="first_stage_layers",
                   help="layers of the first pipeline stage (the others share the rest evenly)")
    p.add_argument("--decoder-last-pipeline-num-layers", type=int, dest="last_stage_layers",
                   help="layers of the last pipeline stage (the others share the rest evenly)")
    p.add_argument("--account-for-embedding-in-pipeline-split", action="store_true", dest="account_embedding",
                   help="count the embedding as a layer in the split (the first stage builds one fewer)")
    p.add_argument("--account-for-loss-in-pipeline-split", action="store_true", dest="account_loss",
                   help="count the loss as a layer in the split (the last stage builds one fewer)")
    p.add_argument("--microbatch-group-size-per-virtual-pipeline-stage", type=int, dest="vp_group",
                   help="interleaved: micro-batches run per model chunk in a row, g (default: pp)")
    add_option(p, choices.SCHEDULE_ACCOUNTING, "--schedule-accounting")
    p.add_argument("--pipeline-layout", dest="pipeline_layout", metavar="LAYOUT",
                   help="Megatron-LM's --pipeline-model-parallel-layout: each stage's layers, e.g. "
                        "Et*4|(t*4|)*14tmL (E embedding, t layer, m MTP layer, L loss, | ends a stage, x*n and "
                        "(...)*n repeat); sets --pp (one stage per rank) or, with --pp, the virtual stages")
    # CPU/NVMe offload (costgraph.training.offload; DeepSpeed's offload_optimizer / offload_param)
    add_option(p, choices.OFFLOAD_DEVICE, "--offload-optimizer",
               help="ZeRO-Offload: gradients, fp32 master and optimizer states (and the step) off the device: "
                    "none (default), cpu or nvme; needs --zero 2 or 3")
    add_option(p, choices.OFFLOAD_DEVICE, "--offload-params",
               help="ZeRO-Infinity: the 16-bit parameter shards off the device (the gathered unit stays): "
                    "none (default), cpu or nvme; needs --zero 3")
    p.add_argument("--offload-activations", default=None, metavar="F",
                   help="activation offload (Transformer Engine's cpu_offloading): the fraction F of the layers' "
                        "activations kept for backward that wait in host memory (1: all; e.g. 0.5)")


def infer_arguments(p, required: bool = False) -> None:
    """``--prompt --generate --batch --weights --kv`` of ``costgraph infer`` (``--hardware`` is separate)."""
    p.add_argument("--prompt", type=int, help="inference: prompt tokens per sequence P")
    p.add_argument("--generate", type=int, help="inference: generated tokens per sequence G")
    p.add_argument("--batch", type=int, default=1, help="inference: concurrent sequences b (default 1)")
    p.add_argument("--weights", default=choices.DEFAULT_WEIGHTS, help="inference weight dtype: bf16 (default), fp16, fp8, int8, int4")
    p.add_argument("--kv", default=choices.DEFAULT_KV, help="inference KV cache dtype: bf16 (default), fp16, fp8, int8")


def efficiency_profile_argument(p) -> None:
    """``--efficiency-profile FILE`` of ``train``, ``plan`` and ``fit`` (:mod:`costgraph.training.calibration`)."""
    add_arguments(p, TrainOptions, "efficiency_profile", "efficiency_profile")


def train_given(args) -> bool:
    """Whether ``args`` ask for training memory: ``--train``, or a layout option off its default."""
    return bool(getattr(args, "train", False)) or getattr(args, "tp", 1) != 1 or any(
        getattr(args, k) != v for k, v in TRAIN_DEFAULTS.items())


def infer_given(args) -> bool:
    """Whether ``args`` ask for the inference analysis (``--prompt`` and ``--generate``).

    Raises
    ------
    CostgraphValueError
        Only one of the two, or either without ``--hardware``."""
    if args.prompt is None and args.generate is None:
        return False
    if args.prompt is None or args.generate is None:
        raise CostgraphValueError("the inference analysis needs both --prompt and --generate",
                                  hint="e.g. --hardware h100-sxm --prompt 512 --generate 128")
    if args.hardware is None:
        raise CostgraphValueError("the inference analysis needs --hardware (peak FLOP/s and HBM bandwidth)",
                                  hint="costgraph hardware lists the presets")
    return True


def load(args):
    """``(model, values or None)`` for the model, ``--config`` and ``--set`` of ``args``
    (:func:`costgraph.commands.common.load_any`, as ``costgraph train``)."""
    from .common import load_any, settings

    dims, options = settings(args.set)
    return load_any(args, dims, options)


def capacity(args):
    """Device memory in bytes: ``--memory``, else the ``--hardware`` preset's, else None."""
    if getattr(args, "memory", None) is not None:
        from ..training.fit import memory_size

        return memory_size(args.memory)[0]   # floored to whole bytes, as --kv-memory
    if getattr(args, "hardware", None) is not None:
        from ..hardware import preset

        return preset(args.hardware).memory_bytes
    return None


def train_layout(args, micro_batches=None):
    """The :class:`~costgraph.parallel.layout.Layout` of ``costgraph train``'s layout options in
    ``args`` (``tp pp cp ep etp gpus sp zero schedule virtual_stages recompute attention precision
    optimizer hsdp no_loss lora lora_targets quantize``); ``micro_batches``: m, None for the
    default (p). Shared with ``costgraph report`` and ``costgraph plot``."""
    from ..parallel.layout import Layout

    pol = args.precision
    layout = Layout(t=args.tp, p=args.pp, c=args.cp, e=args.ep, etp=args.etp, gpus=args.gpus, sp=args.sp,
                  zero=args.zero, m=micro_batches, schedule=args.schedule, v=args.virtual_stages,
                  recompute=args.recompute, attention=args.attention, policy=pol, optimizer=args.optimizer,
                  precision="fp32" if pol == "fp32" else "bf16", hsdp=args.hsdp, loss=not args.no_loss,
                  lora_rank=args.lora, quantization=args.quantize,
                  lora_targets=args.lora_targets[0] if args.lora_targets == ["all-linear"] else tuple(args.lora_targets),
                  **_recompute_fields(args), **_pipeline_fields(args), **_expert_placement(args),
                  fp8_transpose=getattr(args, "fp8_transpose", choices.FP8_TRANSPOSE.default),
                  fp8_attention=getattr(args, "fp8_attention", choices.DEFAULT_FP8_ATTENTION),
                  fp8_wgrad=getattr(args, "fp8_wgrad", choices.DEFAULT_FP8_WGRAD),
                  recompute_count=getattr(args, "recompute_count", choices.RECOMPUTE_COUNT.default))
    return _offload(layout, args)


def _recompute_fields(args) -> dict:
    """The Layout's ``recompute_*`` fields from ``--recompute-modules --recompute-num-layers
    --recompute-method --recompute-frequency`` (absent from a namespace: the defaults)."""
    mods = getattr(args, "recompute_modules", None)
    return {"recompute_modules": None if mods is None else tuple(mods),
            "recompute_num_layers": getattr(args, "recompute_num_layers", None),
            "recompute_method": getattr(args, "recompute_method", None),
            "recompute_frequency": getattr(args, "recompute_frequency", None)}


def _pipeline_fields(args) -> dict:
    """The Layout's pipeline split and schedule fields from ``args`` (absent: their defaults)."""
    names = ("vp_group", "first_stage_layers", "last_stage_layers", "account_embedding", "account_loss",
             "schedule_accounting", "pipeline_layout")
    return {n: getattr(args, n) for n in names if hasattr(args, n)}


def _expert_placement(args) -> dict:
    """The Layout's expert-placement fields from ``args`` (absent ones keep their defaults)."""
    names = {"rank_order": "rank_order", "domain_ranks": "domain_ranks", "ep_overlap": "ep_overlap",
             "route_nodes": "route_nodes", "overlap": "overlap"}
    return {f: getattr(args, a) for f, a in names.items() if getattr(args, a, None) is not None}


def _offload(layout, args):
    """``layout`` with the ``--offload-*`` options of ``args`` (CPU/NVMe offload)."""
    if getattr(args, "offload_optimizer", "none") != "none" or getattr(args, "offload_params", "none") != "none" \
            or getattr(args, "offload_activations", None) is not None:   # CPU/NVMe offload
        import dataclasses

        from ..arguments import rational

        f = getattr(args, "offload_activations", None)
        layout = dataclasses.replace(layout, offload_optimizer=args.offload_optimizer,
                                     offload_params=args.offload_params,
                                     offload_activations=False if f is None else rational(f, "--offload-activations"))
    return layout


def training(args, model, values):
    """The :class:`~costgraph.training.memory.TrainingMemory` (model scope) of the layout options,
    checked against ``values`` as ``costgraph train`` checks it. Returns ``(layout, result)``.
    Without ``--gpus`` the data-parallel degree is 1 (``costgraph train`` leaves it a symbol,
    ``N_d``, which a report or plot could not put a number on)."""
    if args.gpus is None:
        pp = args.pp
        if getattr(args, "pipeline_layout", None) is not None and pp == 1:   # the layout's ranks (Layout.filled)
            from ..parallel.pipeline_layout import parse_pipeline_layout

            n, v = len(parse_pipeline_layout(args.pipeline_layout).stages), args.virtual_stages
            pp = n // v if v > 1 and n % v == 0 else n
        args.gpus = args.tp * pp * args.cp
    layout = train_layout(args, args.micro_batches)
    if values is not None:
        from ..training.validity import check_layout

        check_layout(model.graph, layout.filled(), values)
    from ..training.memory import training_memory

    return layout, training_memory(model.graph, layout)


def inference_model(model_arg: str, config, dims: dict, options: dict, profile: str = "korthikanti"):
    """``(inference model, values)`` for ``costgraph infer`` and the reports' inference section: a
    bundled name or ``.cg`` file loaded by :func:`costgraph.inference.load` with the configuration's
    options, or a ``config.json`` (its options its own); ``b`` and ``s`` left to the prompt and batch.

    Raises CostgraphValueError for options or ``--config`` given with a config.json."""
    from ..errors import CostgraphValueError
    from ..inference import load, load_hf_config

    if model_arg.endswith(".json"):
        if options or config:
            raise CostgraphValueError("options and --config come from the config.json; --set takes dimensions here")
        hf = load_hf_config(model_arg, profile=profile)
        # s: max_position_embeddings (the runtime's rotary table, inference/runtime_weights.py), as a
        # bundled configuration's s; the prompt and batch replace s and b in the analysis
        model, given = hf.model, {**{k: v for k, v in hf.values.items() if k != "b"}, **dims}
    else:
        model, given = load(model_arg, options=options, config=config, profile=profile), dims
    return model, model.values(config, {k: v for k, v in given.items() if k not in ("b", "s") or k not in dims})


def inference(args):
    """:func:`costgraph.inference.infer` for the inference options, as ``costgraph infer`` runs it
    (the model loaded by :func:`costgraph.inference.load`, b and s replaced by ``--batch``,
    ``--prompt`` and ``--generate``): ``(inference model, InferenceReport)``."""
    from ..inference import infer
    from .common import settings

    dims, options = settings(args.set)
    model, values = inference_model(args.model, args.config, dims, options, profile=args.profile)
    rep = infer(model, hardware=args.hardware, prompt=args.prompt, generate=args.generate, batch=args.batch,
                values=values, t=args.tp, weights=args.weights, kv=args.kv, convention=args.convention,
                causal=args.causal)
    return model, rep


def parse_over(text: str) -> tuple[str, list[int]]:
    """``--over`` of ``plot`` and ``report``: ``s=512,1024,2048`` → ``("s", [512, 1024, 2048])``;
    ``s=512:8192:x2`` (×2 from 512 up to 8192) and ``b=1:8:+1`` (steps of 1), ends included. The one
    grammar of ``sweep``'s ``--over`` (:func:`costgraph.export.sweep.parse_axis`): ``_`` between
    digits is a separator (``1_024`` is 1024), a value listed twice is refused; at most
    :data:`MAX_POINTS` points (a plot shows a few dozen bars).

    Raises
    ------
    CostgraphValueError
        Text outside the grammar, a value not a positive whole number, a range that ends before it
        starts or does not grow, a value twice, or more than :data:`MAX_POINTS` points."""
    from ..export.sweep import axis_length, parse_axis

    text = text if isinstance(text, str) else ""
    if axis_length(text) > MAX_POINTS:
        raise CostgraphValueError(f"--over {text[:40]!r} has more than {MAX_POINTS} points",
                                  hint="a plot shows a few dozen bars at most; use costgraph sweep for tables")
    axis = parse_axis(text, MAX_POINTS)
    return axis.name, list(axis.values)
