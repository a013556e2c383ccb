"""Every named choice of an analysis and its default, written once.

A *choice* is a setting whose values are a fixed list of names: the FLOP
convention, the causal-mask count, the activation profile, the pipeline
schedule, the recomputation policy, the attention kernel, the ZeRO stage,
the activation precision. Each is declared here once, with its values, its
default and a one-line meaning per value. Everything else reads it:

* :class:`costgraph.parallel.layout.Layout` (its field defaults and checks),
* the analyses that validate a name (:mod:`costgraph.engine.activations`,
  :mod:`costgraph.parallel.pipeline`, :mod:`costgraph.engine.totals`, the planner),
* every subcommand's ``argparse`` options, through :func:`add_option`,
* the JSON Schemas' ``enum``\\ s (``tests/test_choices.py`` checks that each
  schema property named after a choice lists exactly its values).

Settings whose names come from a data table (precision *policies*,
optimizers, weight and KV dtypes, hardware presets) are not fixed lists:
their names live in their tables (``policies.toml``, ``optimizers.toml``,
``dtypes.toml``, ``hardware.toml``); only their defaults are written here.

This module imports nothing of costgraph's and not SymPy: the CLI reads it to
build ``--help`` without loading the engine.

>>> SCHEDULE.values
('1f1b', 'interleaved', 'gpipe', 'zb-h1', 'dualpipe')
>>> SCHEDULE.default
'1f1b'
>>> ZERO_STAGE.check(4)
Traceback (most recent call last):
...
ValueError: unknown ZeRO stage 4; one of: 0, 1, 2, 3
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Choice:
    """A named setting: ``name`` (as the field of a layout or the key of a
    JSON document), ``what`` (how an error names it), ``meanings`` (value →
    one-line meaning, in the order options list them) and ``default``.

    A setting that applies only with others (the attention kernel: a flash core; what ZeRO-3 holds
    gathered: ZeRO 3) has the value ``auto`` as its default, the value ``auto`` stands for where it
    applies (``auto``) and ``applies``: ``((field, values), ...)``, the other settings it needs. A
    value given where it cannot apply is refused (:meth:`costgraph.parallel.layout.Layout.filled`),
    ``auto`` never: a value at its default is told from one given."""

    name: str
    what: str
    meanings: tuple[tuple[object, str], ...]
    default: object
    auto: object = None
    applies: tuple[tuple[str, tuple], ...] = ()

    def __post_init__(self):
        if self.default not in self.values:   # a mistake in this file, not the user's
            raise AssertionError(f"default {self.default!r} of {self.name} is not one of {self.values}")
        if self.auto is not None and (self.default != "auto" or self.auto not in self.values):
            raise AssertionError(f"{self.name}: auto stands for one of its values, and is the default")

    def applies_to(self, settings) -> bool:
        """Whether the setting applies to ``settings`` (an object with the fields ``applies`` names)."""
        return all(getattr(settings, f) in values for f, values in self.applies)

    def resolve(self, value, settings) -> object:
        """``value``, or for ``auto`` the value it stands for where the setting applies to ``settings``
        (None where it does not)."""
        if value != "auto" or self.auto is None:
            return value
        return self.auto if self.applies_to(settings) else None

    @property
    def values(self) -> tuple:
        """The allowed values, in order."""
        return tuple(v for v, _ in self.meanings)

    def meaning(self, value) -> str:
        """The one-line meaning of ``value``."""
        return dict(self.meanings)[value]

    def check(self, value) -> object:
        """``value`` if it is allowed; else ``ValueError`` naming the choices
        (the analyses turn it into their located error)."""
        if isinstance(value, bool) or value not in self.values:
            raise ValueError(f"unknown {self.what} {value!r}; one of: " + ", ".join(map(str, self.values)))
        return value

    def hint(self) -> str:
        """``one of: a, b, c`` for an error message's hint."""
        return "one of: " + ", ".join(map(str, self.values))

    def help(self) -> str:
        """An option's help text: each value with its meaning, the default marked."""
        parts = [f"{v} ({m}{'; default' if v == self.default else ''})" for v, m in self.meanings]
        return "; ".join(parts)


CONVENTION = Choice("convention", "FLOP convention", (
    ("matmul", "matrix products only, 2 FLOPs per multiply-add: Megatron-LM, PaLM, FlopCounterMode"),
    ("all", "also norms, softmax, activations and elementwise ops"),
), "matmul")

CAUSAL = Choice("causal", "causal count", (
    ("full", "attention products over the full s x s square"),
    ("half", "the kept (query, key) pairs as an area, s^2/2"),
    ("exact", "whole kept pairs, s(s+1)/2"),
), "full")

PROFILE = Choice("profile", "activation profile", (
    ("korthikanti", "what is kept for backward per Korthikanti et al. 2022"),
    ("pytorch", "what PyTorch autograd keeps in Hugging Face's eager implementations"),
), "korthikanti")

PRECISION = Choice("precision", "precision", (
    ("bf16", "activations 2 bytes per element"),
    ("fp16", "activations 2 bytes per element"),
    ("fp32", "activations 4 bytes per element"),
), "bf16")


def activation_precision(policy: str) -> str:
    """The activations' :data:`PRECISION` that a precision policy runs (the one rule, applied by
    :meth:`costgraph.parallel.layout.Layout.filled` where the layout leaves ``precision`` unset, for the CLI
    and the API alike): ``fp32`` under the ``fp32`` policy (everything in 4 bytes); otherwise ``bf16``, the
    16-bit activations of mixed precision (Micikevicius et al. 2018; Megatron-LM's ``--bf16``), FP8 policies
    included (Transformer Engine keeps the activations saved for backward in BF16 unless FP8 is asked)."""
    return "fp32" if policy == "fp32" else PRECISION.default


SCHEDULE = Choice("schedule", "pipeline schedule", (
    ("1f1b", "one forward, one backward (PipeDream-Flush, Megatron-LM's default)"),
    ("interleaved", "Megatron-LM's interleaved 1F1B with v model chunks per device"),
    ("gpipe", "all forwards, then all backwards"),
    ("zb-h1", "zero bubble H1: 1F1B's memory, a third of its bubble (Qi et al. 2023)"),
    ("dualpipe", "DeepSeek-V3's bidirectional pipeline: two stages a device, p + 1 in flight"),
), "1f1b")

SCHEDULE_ACCOUNTING = Choice("schedule_accounting", "pipeline in-flight accounting", (
    ("megatron-schedule", "each stage's warm-up + 1 of Megatron-LM's schedules.py (get_pp_rank_microbatches)"),
    ("korthikanti", "interleaved: the first stage × (1 + (p−1)/(p·v)), later as 1F1B (Korthikanti 2022 §4.2.3)"),
), "megatron-schedule")

RECOMPUTE = Choice("recompute", "recompute policy", (
    ("none", "keep every activation"),
    ("selective", "recompute the attention core (Korthikanti et al. 2022 §4.2)"),
    ("full", "keep each layer's input only, recompute the layer"),
    ("selective-korthikanti", "selective's memory, Korthikanti et al. 2022's FLOPs (re-run QKᵀ→softmax→dropout only)"),
    ("torchtitan-op", "torchtitan per-op SAC: keep the save-list outputs but every second matmul's"),
    ("torchtitan-layer", "torchtitan: every n-th block fully checkpointed (--recompute-frequency n)"),
), "none")
#: How the hardware FLOPs count what a recompute policy re-runs (``--recompute-count``;
#: :func:`costgraph.training.compute.training_flops`). ``korthikanti-eq8`` is Korthikanti et al. 2022
#: App. A Eq. 8 (arXiv 2205.05198): hardware FLOPs with selective recomputation 72BLsh²(1 + s/3h + V/12hL)
#: against the model FLOPs 72BLsh²(1 + s/6h + V/12hL) (Eq. 7): the difference, 12BLs²h, is the whole
#: forward + backward of the attention core's two products (QKᵀ and probs·V) once more.
RECOMPUTE_COUNT = Choice("recompute_count", "recompute FLOP count", (
    ("rerun", "the forward FLOPs of what the policy re-runs, each op once"),
    ("korthikanti-eq8", "Korthikanti et al. 2022 Eq. 8: a re-run attention core counted as its forward + backward "
                        "(QKᵀ and probs·V)"),
), "rerun")
#: the recompute policies of the calculator page (``costgraph web``: Megatron-LM's three granularities)
RECOMPUTE_SEARCHED = ("none", "selective", "full")
#: the recompute policies the planner tries on every layout (``options.recompute_policies``; in this order
#: its ties are broken): Megatron-LM's three and torchtitan's per-op SAC (``activation_checkpoint.mode =
#: "selective"``, ``selective_ac_option = "op"``, what torchtitan's llama3 train configs set: @ 9dec370
#: train_configs/llama3_8b.toml; ``_apply_op_sac`` @ 1f029641), a policy of its own memory and time (the
#: outputs of its save list kept, every second matmul's excepted, the rest of the block re-run).
#: ``selective-korthikanti`` is a FLOP-count convention of ``selective``; ``torchtitan-layer`` is ``full`` on
#: every n-th block (neither searched).
RECOMPUTE_PLANNED = RECOMPUTE_SEARCHED + ("torchtitan-op",)
#: the policies a framework runs, by plan's ``--overlap`` convention (the framework whose overlap it applies):
#: Megatron-LM's ``--recompute-granularity`` (none, selective, full); torchtitan's ``activation_checkpoint.mode``
#: (none, full, selective = per-op SAC); without a framework (``--overlap none``) all of :data:`RECOMPUTE_PLANNED`
RECOMPUTE_BY_OVERLAP = {"megatron": RECOMPUTE_SEARCHED, "torchtitan": ("none", "full", "torchtitan-op")}

#: The attention kernel. Two declared defaults: training layouts (``train``, ``plan``, ``report``,
#: ``plot``, ``Model.train``/``Model.plan``, :class:`~costgraph.parallel.layout.Layout`) default to the
#: fused kernel practitioners run (PyTorch ``scaled_dot_product_attention``, FlashAttention-2; the
#: default of Megatron-LM's TransformerEngine/flash backends and torchtitan), ``ATTENTION.default``;
#: ``derive``'s activation closed form stays Korthikanti et al. 2022's (``34bsh + 5bs²a`` per layer:
#: eager), :data:`DERIVE_ATTENTION`.
ATTENTION = Choice("attention", "attention kernel", (
    ("eager", "the s x s scores and probabilities are kept"),
    ("flash", "a fused kernel: only the output and the log-sum-exp are kept"),
), "flash")
#: the attention kernel of ``derive``'s activation memory (Korthikanti's closed form is eager's)
DERIVE_ATTENTION = "eager"

ZERO_STAGE = Choice("zero", "ZeRO stage", (
    (0, "no sharding: plain data parallelism"),
    (1, "optimizer states sharded (Megatron's distributed optimizer)"),
    (2, "optimizer states and gradients sharded"),
    (3, "parameters too (FSDP FULL_SHARD)"),
), 0)

#: the dtypes a hardware preset may give a dense peak for (``peak_flops_<dtype>`` in
#: ``hardware.toml``); the default is the peak training and inference time at
PEAK_DTYPE = Choice("compute", "dtype of the peak", (
    ("bf16", "dense BF16 tensor-core peak"),
    ("fp16", "dense FP16 tensor-core peak"),
    ("fp8", "dense FP8 tensor-core peak"),
    ("tf32", "dense TF32 tensor-core peak"),
    ("fp32", "FP32 (non-tensor-core) peak"),
), "bf16")

#: every fixed-list choice, by name
CHOICES: dict[str, Choice] = {c.name: c for c in (CONVENTION, CAUSAL, PROFILE, PRECISION, SCHEDULE, RECOMPUTE,
                                                   ATTENTION, ZERO_STAGE)}
CHOICES[SCHEDULE_ACCOUNTING.name] = SCHEDULE_ACCOUNTING
CHOICES[RECOMPUTE_COUNT.name] = RECOMPUTE_COUNT

# Defaults of settings whose names live in data tables (see the module docstring).
#: the training precision policy (``policies.toml``)
DEFAULT_POLICY = "mixed"
#: the optimizer (``optimizers.toml``)
DEFAULT_OPTIMIZER = "adam"
#: inference weight and KV cache dtypes (``inference/dtypes.toml``)
DEFAULT_WEIGHTS = "bf16"
DEFAULT_KV = "bf16"
#: llama.cpp's default KV cache type (``--cache-type-k/-v``): f16 (ggml-org/llama.cpp common/common.h,
#: ``common_params``: ``cache_type_k = GGML_TYPE_F16``, ``cache_type_v = GGML_TYPE_F16``); ``infer --runtime
#: llamacpp`` without ``--kv``
LLAMACPP_DEFAULT_KV = "fp16"
#: the fraction of the peak the compute kernels reach in the step-time model
DEFAULT_EFFICIENCY = "0.5"
#: the memory a fit verdict keeps free on each device (``--reserve``): a fraction of the device memory
#: (or a size, ``8GB``). The allocator and runtime hold memory the model's tensors do not: PyTorch's
#: caching allocator keeps blocks reserved but unallocated (fragmentation; torchtitan logs
#: ``max_reserved`` beside ``max_active`` for it, torchtitan/components/metrics.py DeviceMemoryMonitor),
#: the CUDA context, cuBLAS workspaces and NCCL buffers take memory outside it. 10% is the margin
#: practitioners leave (vLLM's ``gpu_memory_utilization`` default 0.9 is the same rule); an assumption,
#: shown in every verdict, ``--reserve 0`` for none. ``train`` and ``fit`` default to
#: :data:`RUNTIME_RESERVE` instead; this flat rule is ``--reserve 0.1`` there, and ``plan``'s default.
DEFAULT_RESERVE = "0.1"
#: the default reserve of ``train`` and ``fit`` (``--reserve runtime``): the named parts a process holds
#: besides the model's tensors — the CUDA context of the GPU class, PyTorch's cuBLAS and cuBLASLt
#: workspaces, NCCL's buffers of each parallel group — from ``runtime_memory.toml``
#: (:mod:`costgraph.runtime_memory`), on the device memory CUDA reports where the table gives it
RUNTIME_RESERVE = "runtime"
#: the name of the data-parallel degree when no device count is given (the
#: ZeRO paper's N_d; not ``d``, which Llama-style models use for the head size)
DP_SYMBOL = "N_d"
#: the linears LoRA adapts by default (PEFT's default for Llama: q_proj, v_proj)
DEFAULT_LORA_TARGETS = ("q_proj", "v_proj")
#: the QLoRA schemes of the frozen base (``--quantize``): the tables of costgraph/training/quantization.toml
#: (bitsandbytes' layouts), kept here so the parser stays light (tests/training check they agree)
QUANTIZATION = ("nf4", "nf4-double", "int8")
#: the LoRA rank ``costgraph fit`` proposes when nothing else fits: PEFT's ``LoraConfig`` default
#: (peft/tuners/lora/config.py: ``r: int = field(default=8, ...)``)
FIT_LORA_RANK = 8
#: the QLoRA base ``costgraph fit`` proposes: NF4 (Dettmers et al. 2023, QLoRA; bitsandbytes ``nf4``)
FIT_QLORA = "nf4"

#: how the expert-parallel all-to-all overlaps computation (costgraph.parallel.ep_time)
EP_OVERLAP = Choice("ep_overlap", "EP all-to-all overlap", (
    ("none", "all of it exposed (Megatron's overlap_moe_expert_parallel_comm = False)"),
    ("megatron", "Megatron's combined 1F1B: one micro-batch's forward beside another's backward"),
    ("dualpipe", "DeepSeek's DualPipe: every forward and backward chunk pair overlapped"),
), "none")
CHOICES[EP_OVERLAP.name] = EP_OVERLAP

#: how communication overlaps computation (costgraph.training.overlap): the rules each framework runs.
#: The default is what the Megatron-Bridge/NeMo performance recipes turn on (Megatron-Bridge @ 067f987d,
#: src/megatron/bridge/training/comm_overlap.py: overlap_grad_reduce, overlap_param_gather with DP > 1,
#: overlap_p2p_comm with interleaving, tp_comm_overlap in the performance recipes); EP follows --ep-overlap.
OVERLAP = Choice("overlap", "communication overlap", (
    ("megatron", "Megatron-Core as the performance recipes run it: TP overlap (userbuffers, with SP), gradient "
                 "reduce and parameter gather by bucket, ZeRO-3 prefetch, overlapped PP sends (interleaved), CP ring"),
    ("torchtitan", "torchtitan: FSDP2 prefetch of the next block, DDP's bucketed gradient reduce, CP ring; "
                   "TP and PP exposed"),
    ("none", "every collective exposed (Megatron-LM without the overlap flags)"),
), "megatron")
CHOICES[OVERLAP.name] = OVERLAP

#: the bandwidth a collective is timed at over a link (costgraph.parallel.placement.link). The default is what
#: NCCL reaches: nccl-tests' bus bandwidth (NCCL src/graph/topo.h: SM90_NVLINK_BW 20.6 GB/s per NVLink4 link,
#: 370.8 of H100's 450 GB/s; NET_BW 12.0 per 100 Gbit, 48 of a 400 Gb/s NIC's 50; nccl-tests#212, #290), the
#: presets' scale_up_busbw / scale_out_busbw in hardware.toml; line is the vendors' line rates, what the Scaling
#: Book (gpus.md) and Calculon (its network bandwidth, with an efficiency of 1 unless given) time links at.
#: The EP all-to-all (NCCL's, Megatron's alltoall dispatcher) runs at the same busbw: nccl-tests#212 (370 GB/s the
#: busbw of every non-allreduce collective on H100), #267 (an all-to-all runs at one NIC, 48-49 GB/s on CX-7 NDR).
LINK_RATE = Choice("link_rate", "link bandwidth convention", (
    ("nccl", "the bus bandwidth NCCL reaches (nccl-tests busbw: 370.8 of NVLink4's 450 GB/s, 48 of a 400 Gb/s "
             "NIC's 50), where the preset gives it"),
    ("line", "the vendors' line rates (the Scaling Book, Calculon)"),
), "nccl")
CHOICES[LINK_RATE.name] = LINK_RATE

#: which kernels run the EP token dispatch and combine (costgraph.parallel.ep_time): Megatron-LM's
#: --moe-token-dispatcher-type alltoall (MoEAlltoAllTokenDispatcher: NCCL's all-to-all, at --link-rate) or flex with
#: --moe-flex-dispatcher-backend deepep (Megatron-LM @ d98e8a64 transformer_config.py: moe_flex_dispatcher_backend,
#: default "deepep"): DeepEP's kernels at what DeepEP measured on the preset (hardware.toml deepep_scale_up_bw,
#: deepep_scale_out_bw: deepseek-ai/DeepEP README on H800), else NCCL's figures, said so. Megatron's own default,
#: allgather, is not modelled.
EP_DISPATCHER = Choice("ep_dispatcher", "EP token dispatcher", (
    ("alltoall", "NCCL's all-to-all (Megatron --moe-token-dispatcher-type alltoall) at --link-rate"),
    ("deepep", "DeepEP's kernels (Megatron flex, backend deepep) at DeepEP's measured bandwidths where the preset "
               "has them (hardware.toml), else NCCL's, said so"),
), "alltoall")
CHOICES[EP_DISPATCHER.name] = EP_DISPATCHER

#: how context parallelism exchanges K and V (costgraph.parallel.communication, costgraph.training.overlap):
#: Megatron-LM @ d98e8a64 transformer_config.py ``cp_comm_type`` ("p2p" or "all_gather", the value Transformer
#: Engine reads; arguments.py --cp-comm-type default ["p2p"]): "p2p" exchanges KV chunks in a ring, async and
#: overlapped with the attention; "all_gather" gathers the whole K/V before the attention, "not async, and cannot be
#: overlapped" (TE @ d0067d0d context_parallel.py AttnFuncWithCPAndKVAllGather: "KV all-gather between CP ranks is
#: exposed", after the Llama 3 report, arXiv 2407.21783 §3.3.2). Ulysses' a2a and the hierarchical a2a+p2p are not
#: modelled.
CP_COMM_TYPE = Choice("cp_comm_type", "CP communication", (
    ("p2p", "K/V chunks passed round a ring beside the attention (TE AttnFuncWithCPAndKVP2P; Megatron's default)"),
    ("all_gather", "K and V all-gathered before the attention forward and again in the backward, dK and dV "
                   "reduce-scattered after it, all exposed (TE AttnFuncWithCPAndKVAllGather; Llama 3 §3.3.2)"),
), "p2p")
CHOICES[CP_COMM_TYPE.name] = CP_COMM_TYPE

#: which fused attention kernel runs the flash core (costgraph.training.kernel_time; the curves in
#: training/kernels.toml). The default is what Megatron-Core runs through Transformer Engine: TE @ d0067d0d
#: transformer_engine/pytorch/attention/dot_product_attention/utils.py::get_attention_backend disables
#: FlashAttention "to give FusedAttention preference on Hopper+" (cuDNN's fused attention) whenever both are
#: eligible. PyTorch's scaled_dot_product_attention runs its FlashAttention-2 first (pytorch/pytorch#138522,
#: 2024-10-21, in 2.5.1 and later: cuDNN attention opt-in), which torchtitan keeps on Hopper (pytorch/torchtitan#1196:
#: cuDNN first only on compute capability 10.0).
ATTENTION_KERNEL = Choice("attention_kernel", "attention kernel", (
    ("auto", "with --attention flash, cudnn (what Transformer Engine runs on Hopper and later); none under eager"),
    ("cudnn", "cuDNN's fused attention (Transformer Engine's FusedAttention: Megatron-Core, NeMo, Megatron-Bridge)"),
    ("fa3", "FlashAttention-3 (flash_attn_interface, Hopper)"),
    ("fa2", "FlashAttention-2 as PyTorch's scaled_dot_product_attention runs it (torchtitan, Hugging Face on Hopper)"),
), "auto", auto="cudnn", applies=(("attention", ("flash",)),))
CHOICES[ATTENTION_KERNEL.name] = ATTENTION_KERNEL

#: which GEMM rate the per-kernel step time uses (costgraph.training.kernel_table.rated; the points in
#: training/kernels.toml): ``isolated``, the tables' GEMM curves as measured shape by shape (XLA's GEMM tables,
#: DeepGEMM's README); ``sustained``, their saturated efficiency scaled by the table's gemm_sustained_derate, fitted
#: to a GEMM benchmark that runs each shape on random data after 10,000 warm-up calls at unlocked clocks (Azure's
#: AI-benchmarking-guide, superbench's cublaslt_gemm). The default is sustained: a training run holds the GPU busy
#: for hours, at the clocks its power draw allows.
GEMM_RATE = Choice("gemm_rate", "GEMM rate", (
    ("sustained", "the GEMM curves' saturated efficiency scaled by the table's gemm_sustained_derate (a GEMM "
                  "benchmark on random data after 10,000 warm-up calls, clocks unlocked; what a training run holds)"),
    ("isolated", "the GEMM curves as the tables measure each shape (XLA's GEMM tables, DeepGEMM's README)"),
), "sustained")
CHOICES[GEMM_RATE.name] = GEMM_RATE

#: how a hidden collective slows the compute beside it (costgraph.training.contention; training/contention.toml, each
#: number beside its source): ``sm-share``, the SMs its kernels hold (NCCL's channels, DeepEP's SMs), n/N per hidden
#: second; ``measured``, a slowdown measured with overlap against without (arXiv 2507.03114); ``none``, nothing. The
#: default is sm-share: practitioners' runs launch those kernels (NVIDIA forum 337991: an H100 GEMM nearly doubled).
OVERLAP_CONTENTION = Choice("overlap_contention", "overlap contention", (
    ("sm-share", "the compute beside a hidden collective loses the SMs its kernels hold (NCCL's channels, DeepEP's "
                 "SMs; training/contention.toml): n/N of each hidden second"),
    ("measured", "the compute beside a hidden collective runs at the slowdown measured with overlap against "
                 "without (training/contention.toml: arXiv 2507.03114, 0.189 on average)"),
    ("none", "a hidden collective costs the compute nothing"),
), "sm-share")
CHOICES[OVERLAP_CONTENTION.name] = OVERLAP_CONTENTION


def add_option(parser, choice: Choice, flag: str | None = None, *, help: str | None = None, **kwargs) -> None:
    """Add ``--NAME`` for ``choice`` to an ``argparse`` parser: its values as
    ``choices``, its default, and ``help`` (default: each value's meaning).
    The ZeRO stage is parsed as an integer."""
    if isinstance(choice.default, int):
        kwargs.setdefault("type", int)
    parser.add_argument(flag or f"--{choice.name}", choices=choice.values, default=choice.default,
                        help=help if help is not None else choice.help(), **kwargs)


#: ZeRO-3 / FSDP: the full parameters held beside the device's shards (costgraph.training.states)
#:   largest: one unit in flight, the largest of the root module's (the weights outside any layer:
#:     embeddings, final norm, head) and one layer's (the count before this convention);
#:   fsdp2: PyTorch FSDP2 keeps the root module's parameters gathered from the forward through the
#:     backward (torch/distributed/fsdp/_fully_shard/_fsdp_state.py, FSDPState._lazy_init: "For the
#:     root, do not reshard after forward"), beside the layer being computed: the root unit + the
#:     largest layer unit (torchtitan wraps each block and then the root, parallelize_llama.py).
ZERO3_GATHERED = Choice("zero3_gathered", "ZeRO-3 gathered parameters", (
    ("auto", "at --zero 3, largest; nothing gathered below ZeRO 3"),
    ("largest", "one unit in flight: the larger of the root module's and a layer's"),
    ("fsdp2", "FSDP2 (torchtitan): the root module's parameters stay gathered, plus one layer's"),
), "auto", auto="largest", applies=(("zero", (3,)),))
#: the cross-entropy over the logits: one convention per implementation, each with the bytes it holds at the
#: loss's peak (training memory, costgraph.training.memory) and the bytes its kernels move (the step time's
#: loss row, costgraph.training.step_kernels); the numbers and their sources in training/cross_entropy.toml
#: (costgraph.training.cross_entropy).
#:   megatron (the default): Megatron-LM @ d98e8a64 tensor_parallel/cross_entropy.py, what Megatron-LM runs by
#:     default (model_parallel_config.py ``cross_entropy_loss_fusion: bool = False``, the flag
#:     ``--cross-entropy-loss-fusion`` that megatron/training/arguments.py generates from TransformerConfig's fields
#:     through ArgumentGroupFactory: off unless given);
#:   megatron-fused: its ``--cross-entropy-loss-fusion`` (fusions/fused_cross_entropy.py, native impl);
#:   te: Transformer Engine's Triton kernels (TE @ v2.17 transformer_engine/pytorch/triton/cross_entropy.py), what
#:     Megatron-Bridge's performance recipes run (Megatron-Bridge @ 067f987 perf_recipes/_common.py
#:     _benchmark_common(cross_entropy_impl="te"), gpt_provider.py ``cross_entropy_loss_fusion: bool = True``)
#:     in every NeMo container through 26.06 (TE before 2.18);
#:   te-fp32grad: the same kernels from TE 2.18 (#3193), the gradient in fp32;
#:   pytorch: ``F.cross_entropy(pred.float(), labels)`` (torchtitan @ 9dec370 train.py ``loss_fn``; NeMo AutoModel's
#:     MaskedCrossEntropy with its default ``fp32_upcast: True``, Automodel @ 809f199 loss/masked_ce.py);
#:   pytorch-bf16: ``F.cross_entropy`` on the 16-bit logits, no upcast (AutoModel's ``loss_fn.fp32_upcast: false``,
#:     every MoE recipe of Automodel @ 809f199 examples/llm_benchmark/): log_softmax's output saved in bf16;
#:   logits: the fp32 logits held only, timed as megatron: the count before these conventions (the default
#:     until issue 31; 2 B a logit less than megatron at the loss's peak).
CROSS_ENTROPY = Choice("cross_entropy", "cross-entropy implementation", (
    ("megatron", "Megatron-LM's vocab-parallel cross-entropy, unfused (its default): the fp32 softmax in place + "
                 "the bf16 gradient held; a kernel per PyTorch operation"),
    ("megatron-fused", "Megatron-LM's --cross-entropy-loss-fusion (fused_cross_entropy.py): held as megatron; "
                       "its jit-fused steps"),
    ("te", "Transformer Engine's Triton cross-entropy before TE 2.18 (Megatron-Bridge's performance recipes: "
           "--cross-entropy-fusion-impl te): the gradient written over the bf16 logits, held alone; two passes"),
    ("te-fp32grad", "Transformer Engine's Triton cross-entropy from TE 2.18: an fp32 gradient buffer + its bf16 "
                    "cast held; two passes"),
    ("pytorch", "F.cross_entropy on fp32-upcast logits (torchtitan): log-softmax, its gradient in and out held; "
                "PyTorch's log_softmax and nll_loss kernels"),
    ("pytorch-bf16", "F.cross_entropy on the bf16 logits, no upcast (AutoModel's fp32_upcast: false): "
                     "log-softmax, its gradient in and out held in bf16; the same kernels in bf16"),
    ("logits", "the fp32 logits held only (no backward transient), timed as megatron"),
), "megatron")
CHOICES[CROSS_ENTROPY.name] = CROSS_ENTROPY

#: FP8 policies (costgraph.training.fp8): where the column-wise copy of an FP8 weight lives under
#: per-tensor scaling (Transformer Engine @ d0067d0d, float8_tensor.py inner_tensor_specs)
#: ``auto``: as TE decides it on the device (``utils.py::is_non_tn_fp8_gemm_supported``: compute capability
#: in [10.0, 12.0) or ≥ 13.0), from the hardware preset's ``compute_capability``; ``separate`` without one
FP8_TRANSPOSE = Choice("fp8_transpose", "FP8 weight transpose", (
    ("auto", "from the hardware preset, as Transformer Engine decides: shared on sm_100-sm_11x and sm_13x+ "
             "(B200, GB200, B300, GB300), separate elsewhere and without a preset"),
    ("separate", "a separate transposed FP8 buffer (Hopper, Ada, sm_120: FP8 GEMMs take TN layouts only)"),
    ("shared", "one buffer serves both (Blackwell data-centre GPUs: non-TN FP8 GEMMs)"),
), "auto")
#: FP8 policies (costgraph.training.fp8_options): Transformer Engine's FP8 dot-product attention
#: (the recipes' ``fp8_dpa``, TE @ d0067d0d common/recipe/__init__.py, default False; Megatron-LM @ d98e8a64
#: ``TransformerConfig.fp8_dot_product_attention = False``) and FP8 weight-gradient GEMMs (Megatron-LM
#: ``TransformerConfig.fp8_wgrad = True``, ``--no-fp8-wgrad`` turns it off)
DEFAULT_FP8_ATTENTION = False
DEFAULT_FP8_WGRAD = True
#: where ZeRO-Offload / ZeRO-Infinity put the optimizer states or the parameters
#: (DeepSpeed's ``offload_optimizer.device`` / ``offload_param.device``:
#: ``deepspeed/runtime/zero/offload_config.py::OffloadDeviceEnum``)
OFFLOAD_DEVICE = Choice("offload", "offload device", (
    ("none", "kept on the device"),
    ("cpu", "host memory (ZeRO-Offload; ZeRO-Infinity's CPU offload)"),
    ("nvme", "NVMe storage (ZeRO-Infinity)"),
), "none")

# --- serving capacity as vLLM reports it (costgraph infer; costgraph.inference.capacity) ---
#: the share of device memory a vLLM instance requests, ``--gpu-memory-utilization``
#: (vllm @ c1d86421 ``vllm/config/cache.py``: ``CacheConfig.gpu_memory_utilization = 0.9``).
#: ``costgraph infer --reserve`` is the same setting written as the share kept free:
#: reserve = 1 − utilization, its default 0.1 (give either; both only when they agree).
GPU_MEMORY_UTILIZATION = "0.9"
#: the memory vLLM's profile run sees outside PyTorch's allocator (``non_torch_increase`` of
#: ``Worker.determine_available_memory``, vllm @ 35d5cda1: cuBLAS/NCCL workspaces), which vLLM
#: measures at start-up; for vLLM the figure logged on the device's preset (``runtime_memory.toml``,
#: :func:`costgraph.runtime_memory.vllm_non_torch`), this one where no log of the device is there and
#: for SGLang and TensorRT-LLM: 0.35 GiB, as logged for Llama-3.1-8B on one RTX 3090
#: (https://github.com/vllm-project/vllm/issues/10517: ``non_torch_memory=0.35GiB``). CUDA graphs are captured after the KV cache is sized and are
#: not subtracted at that commit: they come out of the 1 − utilization headroom.
NON_TORCH_MEMORY = "0.35GiB"

# --- a device's memory capacity (costgraph.runtime_memory.device_memory: infer, fit, train, the page) ---
#: which figure of a preset is the device's memory: what CUDA reports (``torch.cuda.mem_get_info``'s total,
#: which vLLM logs as ``total_gpu_memory``, SGLang and PyTorch's allocator see: 79.22 GiB on an H100 SXM,
#: vllm PR #10511) or the vendor's printed figure (``hardware.toml`` ``memory_bytes``: 80 GB = 80·10^9 B)
MEMORY_CONVENTION = Choice("memory_convention", "device memory convention", (
    ("cuda", "the total CUDA reports (runtime_memory.toml [visible.NAME]), as runtimes size their memory; "
             "the printed figure where no entry gives it"),
    ("nominal", "the vendor's printed figure (hardware.toml memory_bytes)"),
), "cuda")
CHOICES[MEMORY_CONVENTION.name] = MEMORY_CONVENTION

# --- serving runtimes (costgraph infer --runtime; costgraph.inference.runtimes) ---
#: whose start-up figures ``costgraph infer`` prints for the KV cache: each runtime sizes it its own way
#: (costgraph/inference/runtimes.py names the source of each rule)
RUNTIME = Choice("runtime", "serving runtime", (
    ("vllm", "vLLM V1: total x gpu_memory_utilization - (weights + profiled activation peak + non-torch)"),
    ("sglang", "SGLang: max_total_num_tokens from mem_fraction_static (model_runner.profile_max_num_token)"),
    ("trtllm", "TensorRT-LLM: free_gpu_memory_fraction of the memory free after loading (KvCacheConfig)"),
    ("llamacpp", "llama.cpp: n_ctx cells of the --kv type (f16, q8_0, q4_0) per layer"),
), "vllm")
CHOICES[RUNTIME.name] = RUNTIME
#: SGLang's default ``mem_fraction_static`` when none is given (costgraph.inference.runtimes.sglang_fraction):
#: since sgl-project/sglang PR #10975 (2025-10, ``server_args.py::ServerArgs._handle_gpu_memory_settings``)
#: from the GPU's memory, before it a table by TP degree
SGLANG_FRACTION = Choice("sglang_fraction", "SGLang's default mem_fraction_static", (
    ("gpu-memory", "(GPU memory - reserved) / GPU memory, reserved = 512 MB + 1.5 MB x chunked_prefill_size + "
                   "2 MB x cuda_graph_max_bs + tp/8 GB (both by the GPU's memory), at least 10 GB above 60 GB "
                   "(SGLang since PR #10975)"),
    ("tp", "0.88 at TP 1, 0.87 at 2, 0.85 at 4, 0.81 at 8, 0.79 at 16 (SGLang 0.4, early 2025)"),
), "gpu-memory")
CHOICES[SGLANG_FRACTION.name] = SGLANG_FRACTION
#: which vLLM engine's start-up figures ``costgraph infer`` reproduces (costgraph.inference.runtime_weights):
#: V1 is vLLM's default engine since v0.8 (2025); V0 as of vllm v0.6.4 (late 2024), whose attention layers kept
#: their KV scales as Python floats (``self._k_scale = 1.0``) where later versions hold fp32 tensors on the GPU
VLLM_ENGINE = Choice("vllm_engine", "vLLM engine", (
    ("v1", "vLLM V1 (the default engine since v0.8): each attention layer holds 7 fp32 scalars on the GPU "
           "(k/v/q/prob scales, q/k/v ranges: vllm attention/layer.py)"),
    ("v0", "vLLM V0 as of v0.6.4 (late 2024): KV scales as Python floats, nothing beside the parameters"),
), "v1")
CHOICES[VLLM_ENGINE.name] = VLLM_ENGINE
