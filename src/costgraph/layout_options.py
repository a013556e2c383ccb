"""The layout's options, declared once (issue 31 item 1; issue 27 item 2): :class:`LayoutOptions`.

Each field of :class:`LayoutOptions` is one setting of a parallel layout — a degree (``t``, ``p``,
``c``, ``e``, ...), the ZeRO stage, recomputation, the pipeline schedule and split, overlap, FP8 and
offload settings — declared with :func:`~costgraph.option_fields.option`: its field name is the keyword
of :class:`costgraph.parallel.layout.Layout` (which *is* these fields, with the checks of
:meth:`Layout.filled`) and of :meth:`costgraph.Model.train`; its metadata the ``costgraph train``
flag (``dest``: the parsed line's name, ``tp`` for ``t``), help line, choices (from
:mod:`costgraph.choices`), default, unit and, where the planner searches it, its **search domain**
(:class:`~costgraph.option_fields.Domain`: a domain function of :mod:`costgraph.options` by name, its
kind, why its other values are not searched by default, a variant's group and requirements). Generated
from these fields: the layout arguments of ``train``, ``fit``, ``report``, ``plot`` and ``calibrate``
(``commands/_analysis.train_arguments``, in ``--help``'s order: the fields' order), the Layout's keyword
check (an unknown one refused with a did-you-mean hint), the schemas' ``$defs/layout`` and the
planner's search space (:func:`costgraph.options.search_options`).

The LoRA settings (``lora_rank``, ``lora_targets``, ``quantization``: ``--lora``, ``--lora-targets``,
``--quantize``) are of group ``lora``: ``train`` and ``fit`` take them (``commands/_analysis.lora_arguments``),
``report`` and ``plot`` do not; ``lora_dropout`` is the API's only; ``d``, ``precision`` (the activations'
bytes, from the policy) and ``tp_replicated`` are derived (:meth:`Layout.filled`) and API only.

>>> LayoutOptions(t=2).p
1

Light at import (the standard library and :mod:`costgraph.choices`): the CLI builds ``--help`` from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import choices
from .option_fields import Domain, given_fields, keywords_checked, option, specs

#: the variant's requirements of each offload device (DeepSpeed: offload_optimizer needs ZeRO 2 or 3,
#: offload_param ZeRO 3; costgraph.training.offload)
_OFFLOAD_OPTIMIZER = {"group": "offload", "requires": {"cpu": {"zero": (2, 3)}, "nvme": {"zero": (2, 3)}}}
_OFFLOAD_PARAMS = {"group": "offload", "requires": {"cpu": {"zero": (3,)}, "nvme": {"zero": (3,)}}}
#: Megatron-LM's activation offload (megatron/core/transformer/transformer_config.py __post_init__: "Currently there
#: is no support for Pipeline parallelism with CPU offloading", "CPU offloading does not work when activation
#: recomputation is enabled"): p = 1 and no recomputation; a group of its own (one value, one derivation)
_OFFLOAD_ACTIVATIONS = {"group": "activation offload", "requires": {"0.5": {"p": (1,), "recompute": ("none",)}}}


def _degree(flag, help, unit, domain, dest):
    return option(flag, help, default=1, unit=unit, type=int, dest=dest, domain=Domain("degree", domain))


@keywords_checked()
@dataclass
class LayoutOptions:
    """The settings of a parallel layout, in ``costgraph train --help``'s order (module docstring);
    :class:`costgraph.parallel.layout.Layout` documents each."""

    gpus: int | None = option("--gpus", "devices in all: gpus = tp × pp × cp × dp (without it: train keeps dp as "
                                        "the symbol N_d; report and plot take dp = 1)", default=None, unit="devices",
                              type=int)
    t: object = _degree("--tp", "tensor-parallel degree t (training and inference)", "devices", "tensor_degrees", "tp")
    p: object = _degree("--pp", "pipeline stages p", "stages", "pipeline_degrees", "pp")
    c: object = _degree("--cp", "context-parallel degree c", "devices", "context_degrees", "cp")
    e: object = _degree("--ep", "expert-parallel degree e", "devices", "expert_degrees", "ep")
    etp: object = option("--etp", "expert tensor parallelism: 1 (default) or the TP degree", default=None, type=int)
    sp: bool = option("--sp", "sequence parallelism (with --tp)", default=False, action="store_true",
                      domain=Domain("option", "sequence_parallel"))
    zero: int = option("--zero", "ZeRO stage (3 = FSDP)", choices=choices.ZERO_STAGE,
                       domain=Domain("option", "zero_stages"))
    hsdp: object = option("--hsdp", "HSDP: shard within groups of this many devices", default=None, unit="devices",
                          type=int)
    recompute: str = option("--recompute", choices=choices.RECOMPUTE, domain=Domain("option", "recompute_policies"))
    attention: str = option("--attention", choices=choices.ATTENTION)
    policy: str = option("--precision", "precision policy: fp32, bf16, mixed (default), megatron, mixed-fp32-grads "
                                        "(activations bf16, fp32 under fp32); FP8 (Transformer Engine): fp8-delayed, "
                                        "fp8-current, fp8-blockwise, fp8-mxfp8", default=choices.DEFAULT_POLICY,
                         dest="precision",
                         domain=Domain("variant", "fp8_policies", "the given --precision only; --allow-fp8 searches "
                                       "the FP8 policies", {"group": "precision"}))
    optimizer: str = option("--optimizer", "adam (default), adamw, sgd, lion, adam-8bit, adafactor, muon, ...",
                            default=choices.DEFAULT_OPTIMIZER)
    m: object = option("--micro-batches", "micro-batches per step m (default: pp)", default=None,
                       unit="micro-batches", type=int, dest="micro_batches")
    schedule: str = option("--schedule", choices=choices.SCHEDULE, domain=Domain("split", "schedules"))
    v: int = option("--virtual-stages", "model chunks per device (interleaved)", default=1, unit="model chunks",
                    type=int, dest="virtual_stages", domain=Domain("split", "virtual_stages"))
    loss: bool = option("--no-loss", "leave out the loss: the buffers of the logits' shape that --cross-entropy holds "
                        "at its peak (megatron: fp32 softmax + 16-bit gradient)", default=True, action="store_false")
    # the cross-entropy implementation: its bytes held (the loss's peak) and moved (its step time), one convention
    # (costgraph.training.cross_entropy)
    cross_entropy: str = option("--cross-entropy", "the cross-entropy implementation over the logits: what it holds at "
                                "the loss's peak on the last stage and what its kernels move (the step time): "
                                + choices.CROSS_ENTROPY.help(), choices=choices.CROSS_ENTROPY, given=True, label="loss")
    # expert placement (costgraph.parallel.ranks, costgraph.parallel.ep_time)
    rank_order: str = option("--rank-order", "rank order, first fastest (Megatron's default tp-cp-ep-dp-pp; "
                                             "tp-cp-ep-pp-dp is its --use-tp-pp-dp-mapping): which groups stay inside "
                                             "a scale-up domain", default="tp-cp-ep-dp-pp")
    domain_ranks: int | None = option("--domain-ranks", "consecutive ranks one scale-up domain holds (default: the "
                                                        "largest power of two ≤ the preset's domain: 64 of an NVL72)",
                                      default=None, unit="ranks", type=int)
    link_rate: str = option("--link-rate", "the bandwidth collectives are timed at over NVLink and the NICs "
                            "(costgraph.parallel.placement.link): " + choices.LINK_RATE.help(),
                            choices=choices.LINK_RATE, given=True, label="links at", named="always")
    ep_overlap: str = option("--ep-overlap", choices=choices.EP_OVERLAP, domain=Domain(
        "variant", "ep_overlaps", "the default (none) only; --exhaustive searches them",
        {"group": "experts", "requires": {"megatron": {"recompute": ("none", "selective"),
                                                       "schedule": ("interleaved",)},
                                          # DualPipe's overlap runs only inside its schedule, p > 1 (ep_time.check_overlap)
                                          "dualpipe": {"schedule": ("dualpipe",), "pipelined": (True,)}}}))
    # no search domain (as link_rate): the software the cluster runs, which plan passes to every row
    # (PlanOptions.ep_dispatcher, plan's JSON ep_dispatcher), never searched
    ep_dispatcher: str = option("--ep-dispatcher", "the kernels of the EP token dispatch and combine "
                                "(costgraph.parallel.ep_time): " + choices.EP_DISPATCHER.help(),
                                choices=choices.EP_DISPATCHER, given=True, label="EP dispatch")
    overlap: str = option("--overlap", "how communication overlaps computation (costgraph.training.overlap): "
                          + choices.OVERLAP.help(), choices=choices.OVERLAP)
    route_nodes: int | None = option("--route-nodes", "device-limited routing: a token's experts on at most M "
                                                      "scale-up domains (DeepSeek-V3: 4)", default=None,
                                     unit="scale-up domains", type=int, domain=Domain(
                                         "variant", "route_nodes", "unconfined only; --exhaustive searches them",
                                         {"group": "experts"}))
    attention_kernel: str = option("--attention-kernel", "the fused attention kernel of a flash core (the per-kernel "
                                   "time model's curve in training/kernels.toml): " + choices.ATTENTION_KERNEL.help(),
                                   choices=choices.ATTENTION_KERNEL, given=True, label="attention kernel")
    # no search domain (as ep_dispatcher): the software the cluster runs; all_gather is never faster than the ring
    # under the overlap rules (the same bytes, exposed), so the planner would never rank it above p2p
    cp_comm_type: str = option("--cp-comm-type", "how CP exchanges K and V (Megatron's --cp-comm-type): "
                               + choices.CP_COMM_TYPE.help(), choices=choices.CP_COMM_TYPE, given=True, label="CP")
    # no search domain (as attention_kernel): a convention of the time model, which plan passes to every row
    gemm_rate: str = option("--gemm-rate", "which GEMM rate the per-kernel time model uses (training/kernels.toml: "
                            "kernel_table.rated): " + choices.GEMM_RATE.help(), choices=choices.GEMM_RATE,
                            given=True, label="GEMM rate", named="always")
    # no search domain (as gemm_rate): a convention of the time model, which plan passes to every row
    overlap_contention: str = option("--overlap-contention", "how a collective hidden behind computation slows it "
                                     "(costgraph.training.contention; training/contention.toml): "
                                     + choices.OVERLAP_CONTENTION.help(), choices=choices.OVERLAP_CONTENTION,
                                     given=True, label="contention", named="always")
    # no search domain (as cp_comm_type): the framework's FSDP, which plan passes to each row it applies to (ZeRO 3:
    # given_where_applies; torchtitan's FSDP2 keeps the root module gathered, costgraph.launch.torchtitan), never searched
    zero3_gathered: str = option("--zero3-gathered", "ZeRO-3 / FSDP: the full parameters held beside the shards: "
                                 + choices.ZERO3_GATHERED.help(), choices=choices.ZERO3_GATHERED, given=True,
                                 label="ZeRO-3 gathered")
    fp8_transpose: str = option("--fp8-transpose", "FP8 policies (fp8-delayed, fp8-current, ...): the FP8 weight's "
                                                   "transpose buffer", choices=choices.FP8_TRANSPOSE)
    fp8_attention: bool = option("--fp8-dot-product-attention", "FP8 policies: Transformer Engine's FP8 dot-product "
                                 "attention (fp8_dpa): the attention core's products at the FP8 peak, Q, K, V (and O) "
                                 "saved in FP8; needs --attention flash", default=choices.DEFAULT_FP8_ATTENTION,
                                 action="store_true")
    fp8_wgrad: bool = option("--no-fp8-wgrad", "FP8 policies: the weight-gradient GEMMs in BF16 (Megatron-LM "
                                               "--no-fp8-wgrad; fp8-delayed only)", default=choices.DEFAULT_FP8_WGRAD,
                             action="store_false")
    recompute_count: str = option("--recompute-count", choices=choices.RECOMPUTE_COUNT)
    # recomputation in detail (costgraph.engine.recompute)
    recompute_modules: tuple | None = option(
        "--recompute-modules", "Megatron --recompute-modules under --recompute selective: core_attn (default), mlp, "
        "moe, moe_act, layernorm, mla_up_proj, shared_experts", default=None, nargs="+", metavar="MODULE",
        domain=Domain("variant", "recompute_modules", "the default module set of each policy only; --exhaustive "
                      "searches every set", {"group": "recompute", "requires": {"recompute": ("selective",)}}))
    recompute_num_layers: int | None = option("--recompute-num-layers", "--recompute full: layers per checkpointed "
                                              "run (uniform) or checkpointed layers per stage (block); default 1",
                                              default=None, unit="layers", type=int, metavar="N")
    recompute_method: str | None = option(
        "--recompute-method", "--recompute full: Megatron's uniform (default) or block", default=None,
        choices=("uniform", "block"),
        domain=Domain("variant", "recompute_layers", "every layer only; --exhaustive searches block and uniform N, N "
                      "a power of two", {"group": "recompute", "requires": {"recompute": ("full",)}},
                      key="recompute_layers", flag="--recompute-method, --recompute-num-layers"))
    recompute_frequency: int | None = option("--recompute-frequency", "--recompute torchtitan-layer: every N-th "
                                             "block checkpointed (default 2)", default=None, type=int, metavar="N")
    # Megatron-LM's pipeline split and schedule options (issue 16 items 1-2), under Megatron's flag names
    first_stage_layers: object = option(
        "--decoder-first-pipeline-num-layers", "layers of the first pipeline stage (the others share the rest evenly)",
        default=None, unit="layers", type=int,
        domain=Domain("split", "uneven_splits", key="split",
                      flag="--decoder-first/last-pipeline-num-layers, --account-for-*"))
    last_stage_layers: object = option("--decoder-last-pipeline-num-layers", "layers of the last pipeline stage (the "
                                       "others share the rest evenly)", default=None, unit="layers", type=int)
    account_embedding: bool = option("--account-for-embedding-in-pipeline-split", "count the embedding as a layer in "
                                     "the split (the first stage builds one fewer)", default=False,
                                     action="store_true")
    account_loss: bool = option("--account-for-loss-in-pipeline-split", "count the loss as a layer in the split (the "
                                "last stage builds one fewer)", default=False, action="store_true")
    vp_group: object = option("--microbatch-group-size-per-virtual-pipeline-stage", "interleaved: micro-batches run "
                              "per model chunk in a row, g (default: pp)", default=None, unit="micro-batches",
                              type=int)
    schedule_accounting: str = option("--schedule-accounting", choices=choices.SCHEDULE_ACCOUNTING)
    pipeline_layout: str | None = option(
        "--pipeline-layout", "Megatron-LM's --pipeline-model-parallel-layout: each stage's layers, e.g. "
        "Et*4|(t*4|)*14tmL (E embedding, t layer, m MTP layer, L loss, | ends a stage, x*n and (...)*n repeat); "
        "sets --pp (one stage per rank) or, with --pp, the virtual stages", default=None, metavar="LAYOUT",
        domain=Domain("split", "chunk_layouts"))
    # CPU/NVMe offload (costgraph.training.offload; DeepSpeed's offload_optimizer / offload_param)
    offload_optimizer: str = option(
        "--offload-optimizer", "ZeRO-Offload: gradients, fp32 master and optimizer states (and the step) off the "
        "device: none (default), cpu or nvme; needs --zero 2 or 3", choices=choices.OFFLOAD_DEVICE,
        domain=Domain("variant", "offload_devices", "never offloaded; --allow-offload searches it", _OFFLOAD_OPTIMIZER))
    offload_params: str = option(
        "--offload-params", "ZeRO-Infinity: the 16-bit parameter shards off the device (the gathered unit stays): "
        "none (default), cpu or nvme; needs --zero 3", choices=choices.OFFLOAD_DEVICE,
        domain=Domain("variant", "offload_devices", "never offloaded; --allow-offload searches it", _OFFLOAD_PARAMS))
    offload_activations: object = option(
        "--offload-activations", "activation offload (Transformer Engine's cpu_offloading): the fraction F of the "
        "layers' activations kept for backward that wait in host memory (1: all; e.g. 0.5)", default=False,
        cli_default=None, unit="fraction", metavar="F",
        domain=Domain("variant", "offload_fractions", "never offloaded; --allow-offload searches half the layers",
                      _OFFLOAD_ACTIVATIONS))
    # LoRA / QLoRA (costgraph.training.lora): flags of train and fit only (group "lora": not report's, plot's)
    lora_rank: object = option("--lora", "LoRA adapters of rank R; the base is frozen", default=None, type=int,
                               metavar="R", dest="lora", group="lora")
    lora_targets: object = option("--lora-targets", "linears to adapt: node names, path globs, or all-linear (default "
                                  + " ".join(choices.DEFAULT_LORA_TARGETS) + ")", default=choices.DEFAULT_LORA_TARGETS,
                                  cli_default=list(choices.DEFAULT_LORA_TARGETS), nargs="+", metavar="NAME",
                                  group="lora")
    lora_dropout: bool = option(None, "LoRA dropout (its mask kept for backward)", default=False)
    quantization: str | None = option("--quantize", "QLoRA: the frozen base's linear weights quantized (bitsandbytes "
                                                    "layouts)", default=None, choices=choices.QUANTIZATION,
                                      dest="quantize", group="lora")
    # API only: the settings filled() derives
    d: object = option(None, "data-parallel degree (derived: gpus / (t·p·c), else the symbol N_d)", default=None)
    precision: str | None = option(None, "activation bytes: bf16, fp16, fp32 (None: derived from the policy by "
                                   "Layout.filled(), choices.activation_precision: fp32 under fp32, else bf16)",
                                   default=None)
    tp_replicated: tuple = option(None, "head-count dimensions with fewer heads than t (derived from the values)",
                                  default=())


#: the settings plan takes as given and passes to every row, its check command and ``--compare`` (never searched: the
#: software the cluster runs and the time model's conventions), in declaration order: from the fields' ``given``
GIVEN = given_fields(LayoutOptions)


def given_settings(given: dict) -> dict:
    """Each setting of :data:`GIVEN`: the value ``given`` names, else its declared default.

    Raises
    ------
    TypeError
        A keyword that is no such setting (as a misspelt keyword argument of :func:`plan` is)."""
    unknown = sorted(set(given) - set(GIVEN))
    if unknown:
        raise TypeError(f"plan() got an unexpected keyword argument {unknown[0]!r}")
    fields = specs(LayoutOptions)
    return {k: given[k] if given.get(k) is not None else fields[k][0].default for k in GIVEN}


def given_phrases(given: dict) -> dict[str, str]:
    """How a report names each setting of :data:`GIVEN` at the value ``given`` names (else its default), from its
    declaration (:class:`~costgraph.option_fields.Spec`'s ``label``, ``flag``, ``named``): ``links at --link-rate nccl
    (default)``; a setting named only away from its default (``named="changed"``) is left out at it. In
    :data:`GIVEN`'s order; plan's header (:mod:`costgraph.export.plan_report`) places them."""
    fields = specs(LayoutOptions)
    out = {}
    for k, v in given_settings(given).items():
        spec, default = fields[k][1], fields[k][0].default
        if v != default or spec.named == "always":
            out[k] = f"{spec.label} {spec.flag} {v}" + (" (default)" if v == default else "")
    return out


def given_where_applies(kw: dict) -> dict:
    """``kw`` (a :class:`~costgraph.parallel.layout.Layout`'s keywords) with each setting of :data:`GIVEN` that
    applies only with others (:attr:`costgraph.choices.Choice.applies`: ``zero3_gathered`` at ZeRO 3,
    ``attention_kernel`` with a flash core) back at ``auto`` where ``kw``'s own fields (else their declared
    defaults) do not meet it: plan passes the framework's setting to the rows it applies to, as train takes it
    there, and refuses it elsewhere (``--zero3-gathered fsdp2 applies only with --zero 3``)."""
    fields = specs(LayoutOptions)
    out = dict(kw)
    for name in GIVEN:
        choice = fields[name][1].choices
        if not isinstance(choice, choices.Choice) or not choice.applies or out.get(name, "auto") == "auto":
            continue
        if not all(out.get(f, fields[f][0].default) in vals for f, vals in choice.applies):
            out[name] = "auto"
    return out
