"""The typed parts of a :class:`~costgraph.training.result.TrainingResult`: the settings beside the layout
(:class:`TrainingSettings`), the fit verdict (:class:`FitVerdict`), the compute sections (:class:`TrainingCompute`:
its FLOPs :class:`TrainingFlops`, time :class:`TrainingTime`, step :class:`StepParts`, communication kind →
:class:`CollectiveCost`, LoRA :class:`LoraCompute`, the per-kernel model's :class:`ComputeByClass` and
:class:`UserbuffersSMs`, an efficiency profile's :class:`Calibrated`), the fit verdict's :class:`FitChange` s, CPU/NVMe offload (:class:`TrainingOffload`:
:class:`OffloadSettings`, :class:`OffloadSeconds`) and ``--megatron``'s :class:`MegatronBeside` (each side a
:class:`MemoryEstimate`).

Each is a dataclass whose fields are :func:`costgraph.result_fields.quantity` fields carrying their unit
(``bytes``, ``s``, ``FLOP``, ``B/s``, ``SMs``, ``parameters``; ``""`` for a count, ratio or text) and label; each is also read as the
mapping it replaces (:class:`costgraph.result_fields.Part`: ``r.fits["fits"]``, ``"time" in r.compute``,
``{**r.settings}``), whose keys are the fields present. The JSON and text renderers
(:mod:`costgraph.export.training_report`, :mod:`costgraph.export.offload_report`) read the fields; the JSON names
are the field names. Built where the result is built (:func:`costgraph.training.api.train`,
:func:`~costgraph.training.api.training_fits`, :func:`~costgraph.training.api.compute_section`,
:func:`costgraph.training.compute.compute_summary`, :func:`costgraph.training.offload.offload_section`,
:func:`costgraph.training.lora_flops.lora_compute`, :func:`costgraph.training.steptime.step_time`,
:func:`costgraph.training.calibration_profile.calibrated`, :func:`costgraph.training.megatron.megatron_beside`).

Light at import: the standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..result_fields import Part, quantity


@dataclass
class TrainingSettings(Part):
    """The settings beside the layout that ``plan`` in the JSON of ``costgraph train`` names (every key
    always present, None where unset)."""

    profile: str = quantity(label="activation memory profile (korthikanti, pytorch)")
    dropout: bool = quantity(label="dropout masks kept")
    memory: int | None = quantity("bytes", label="device memory", default=None)
    lora: int | None = quantity(label="LoRA rank", default=None)
    lora_targets: list | None = quantity(label="LoRA targets", default=None)
    quantization: str | None = quantity(label="the frozen base's weight dtype (QLoRA)", default=None)


@dataclass
class FitChange(Part):
    """One change that the fit verdict tried (:func:`costgraph.training.fit.fit_changes`, and ``costgraph fit``'s
    further steps, :func:`costgraph.training.fit_further.further_steps`): its words, the command-line options that
    make it, the most-loaded device's peak under it (bytes, exact, rounded up), whether that fits; ``host_bytes``:
    with CPU offload, the host memory of one node under it (bytes, :func:`~costgraph.training.fit_further.host_per_node`;
    else None, and no key), which must fit a node too."""

    change: str = quantity(label="the change")
    options: str = quantity(label="the options that make it")
    peak_bytes: int = quantity("bytes", label="peak of the most-loaded device")
    fits: bool = quantity(label="it fits")
    host_bytes: int | None = quantity("bytes", label="host memory of one node after the change (CPU offload)",
                                      omit_none=True, default=None)


@dataclass
class FitVerdict(Part):
    """The fit verdict of ``costgraph train`` (:func:`costgraph.training.api.training_fits`) for the
    most-loaded device: the capacity less the reserve against its peak. ``largest_b``/``largest_s`` are keys
    only for the sizes searched (``searched``: the model's free ``b`` and ``s`` at model scope); a searched
    size is None when 1 does not fit. ``changes``: what would make it fit (:func:`costgraph.training.fit.fit_changes`,
    a list of :class:`FitChange`), only when it does not fit."""

    capacity_bytes: int = quantity("bytes", label="device memory")
    reserve_bytes: int = quantity("bytes", label="reserve kept free")
    fits: bool = quantity(label="the most-loaded device fits")
    headroom_bytes: int = quantity("bytes", label="headroom (capacity − reserve − peak)")
    reserve_from: str = quantity(label="where the reserve comes from")
    reserve_parts: list | None = quantity(label="the runtime reserve's parts (costgraph.runtime_memory.Part: "
                                                "name, bytes, source)", omit_none=True, default=None)
    capacity_from: str | None = quantity(label="where the capacity comes from", omit_none=True, default=None)
    largest_b: int | None = quantity("sequences", label="largest micro-batch b that fits", default=None)
    largest_s: int | None = quantity("tokens", label="longest sequence s that fits", default=None)
    changes: list | None = quantity(label="what would make it fit, one change at a time (FitChange each)",
                                    omit_none=True, default=None)
    searched: tuple = quantity(json=None, label="the sizes searched (largest_b, largest_s)", default=())

    def present(self, name: str) -> bool:
        if name in ("largest_b", "largest_s"):
            return name[-1] in self.searched
        return super().present(name)


@dataclass
class TrainingFlops(Part):
    """The ``flops`` section of ``costgraph train`` (:func:`costgraph.training.compute.compute_summary`): FLOPs
    of one iteration (the global batch, ``B = b·m·d`` sequences), per token and per device, and the rules of
    thumb per token (Kaplan et al. 2020) beside them; SymPy expressions. ``six_n_active`` only for a mixture of
    experts (it differs from ``six_n``), ``four_n`` only with LoRA (a frozen base's forward and input
    gradients)."""

    model_per_iteration: object = quantity("FLOP", label="model FLOPs per iteration")
    hardware_per_iteration: object = quantity("FLOP", label="hardware FLOPs per iteration")
    per_token: object = quantity("FLOP/token", label="model FLOPs per token")
    model_per_device: object = quantity("FLOP", label="model FLOPs per device")
    hardware_per_device: object = quantity("FLOP", label="hardware FLOPs per device")
    six_n: object = quantity("FLOP/token", label="6N per token (rule of thumb)")
    eight_n: object = quantity("FLOP/token", label="8N per token (with full recompute)")
    six_n_non_embedding: object = quantity("FLOP/token", label="6N, non-embedding N")
    six_n_active: object = quantity("FLOP/token", label="6N, active parameters (MoE)", omit_none=True, default=None)
    four_n: object = quantity("FLOP/token", label="4N per token (frozen base: forward + input gradients)",
                              omit_none=True, default=None)
    per_token_minus_six_n: object = quantity("FLOP/token", label="exact per token − 6N", default=None)


@dataclass
class TrainingTime(Part):
    """The ``time`` section of ``costgraph train`` (:func:`costgraph.training.rate.time_from_step`,
    :func:`costgraph.training.compute.training_time`): the step's seconds, and with ``--tokens D`` the
    steps (``D / (B s)``), the training time, GPU-hours, PF-days (10¹⁵ FLOP/s × 1 day of model FLOPs)
    and, with ``--price``, the cost (price × GPU-hours); SymPy expressions."""

    step_seconds: object = quantity("s", label="step time (s)")
    steps: object = quantity(label="steps", omit_none=True, default=None)
    train_seconds: object = quantity("s", label="training time (s)", omit_none=True, default=None)
    train_days: object = quantity("days", label="training time (days)", omit_none=True, default=None)
    gpu_hours: object = quantity("GPU-hours", label="GPU-hours", omit_none=True, default=None)
    pf_days: object = quantity("PF-days", label="PF-days (model FLOPs)", omit_none=True, default=None)
    cost: object = quantity(label="cost (price × GPU-hours)", omit_none=True, default=None)


@dataclass
class StepParts(Part):
    """The ``step`` section of ``costgraph train``: the parts of the one step time
    (:func:`costgraph.training.steptime.step_time`), seconds (SymPy). ``optimizer`` with the per-kernel
    model (:mod:`costgraph.training.step_kernels`); ``offload`` and ``offload_serial`` with CPU/NVMe offload
    on a preset that publishes its host link (:func:`costgraph.training.offload.offload_step_seconds`)."""

    compute: object = quantity("s", label="compute")
    bubble: object = quantity("s", label="pipeline bubble")
    communication_exposed: object = quantity("s", label="exposed communication")
    communication_overlapped: object = quantity("s", label="communication hidden behind the computation")
    contention: object = quantity("s", label="compute slowed by the hidden communication (--overlap-contention)",
                                  default=0)
    optimizer: object = quantity("s", label="optimizer step", omit_none=True, default=None)
    offload: object = quantity("s", label="host link (offload), beside the computation", omit_none=True,
                               default=None)
    offload_serial: object = quantity("s", label="CPU optimizer step and partition back, in series",
                                      omit_none=True, default=None)
    total: object = quantity("s", label="step time", default=None)


@dataclass
class CollectiveCost(Part):
    """One collective kind of the ``communication`` section of ``costgraph train`` (kind → this): the bytes
    each device sends per step (ring algorithms, :func:`costgraph.parallel.communication.communication`),
    the collective and its group; with a hardware preset its seconds, of which ``exposed`` add to the step
    and ``hidden`` run behind the computation under ``overlap_rule`` (:mod:`costgraph.training.overlap`)."""

    bytes: object = quantity("bytes", label="bytes sent per device per step")
    seconds: object = quantity("s", label="seconds", omit_none=True, default=None)
    exposed: object = quantity("s", label="exposed seconds", omit_none=True, default=None)
    hidden: object = quantity("s", label="hidden seconds", omit_none=True, default=None)
    overlap_rule: str | None = quantity(label="overlap rule", omit_none=True, default=None)
    op: str = quantity(label="collective", default="")
    group: object = quantity(label="group (devices)", default=None)


@dataclass
class LoraCompute(Part):
    """The ``lora`` section of ``costgraph train`` with LoRA on (:func:`costgraph.training.lora_flops.lora_compute`):
    what is trained and how its FLOPs are counted (the conventions named: :mod:`costgraph.training.lora_flops`).
    ``quantization`` and ``dequantization`` only for QLoRA (a quantized frozen base)."""

    rank: int = quantity(label="adapter rank r")
    targets: list = quantity(label="the adapted linears' names")
    trainable_parameters: object = quantity("parameters", label="trainable parameters (the adapters)")
    adapted_linears: object = quantity(label="adapted linears (all instances)")
    model_flops: str = quantity(label="model FLOPs convention (for MFU)")
    quantization: str | None = quantity(label="the frozen base's weight dtype (QLoRA)", omit_none=True, default=None)
    dequantization: str | None = quantity(label="QLoRA dequantization FLOPs convention (hardware FLOPs)",
                                          omit_none=True, default=None)


@dataclass
class ComputeByClass(Part):
    """The per-kernel model's compute seconds per device per step by kernel class
    (:func:`costgraph.training.kernel_time.kernel_seconds`; its :data:`costgraph.training.kernel_time.CLASSES`,
    in their order), after a calibration's factors; SymPy."""

    matmul: object = quantity("s", label="GEMMs")
    attention: object = quantity("s", label="fused attention cores")
    memory: object = quantity("s", label="memory-bound kernels (and the loss)")
    other: object = quantity("s", label="matrix FLOPs outside GEMMs (roofline)")


@dataclass
class UserbuffersSMs(Part):
    """The SMs the TP-overlapped GEMMs run on under Transformer Engine's userbuffers
    (:func:`costgraph.training.kernel_time.userbuffers_margin`): the device's less the 16 its
    communication kernels take."""

    gemm: int = quantity("SMs", label="SMs left to the overlapped GEMMs")
    device: int = quantity("SMs", label="SMs of the device (kernels.toml sm_count)")


@dataclass
class Calibrated(Part):
    """What a result calibrated by an efficiency profile says (``calibration`` in the JSON of ``train`` and
    ``plan``; :func:`costgraph.training.calibration_profile.calibrated`): the profile's file, hardware, time
    model, its factors (name → multiplier), the memory reserve it set (None: not the verdict's), which
    figures the factors changed, how many runs it was fitted to and when."""

    profile: str | None = quantity(label="the profile's file (None: given as an object)")
    hardware: str = quantity(label="the preset it was fitted on")
    time_model: str = quantity(label="the time model its factors multiply")
    factors: dict = quantity(label="factor name → multiplier")
    memory_reserve_bytes: int | None = quantity("bytes", label="memory reserve (the fit verdict's)")
    figures: list = quantity(label="the figures it calibrated")
    runs: int = quantity(label="measured runs it was fitted to")
    date: str = quantity(label="date of the profile")


@dataclass
class MemoryEstimate(Part):
    """One side of Megatron-LM's memory estimate beside costgraph's (first pipeline stage, bytes per device;
    :data:`costgraph.training.megatron.KEYS`): weights, gradients and optimizer states together, activations,
    their total; SymPy (numbers where the values are given)."""

    weights_and_optimizer: object = quantity("bytes", label="weights, gradients and optimizer states")
    activations: object = quantity("bytes", label="activations")
    total: object = quantity("bytes", label="total")


@dataclass
class MegatronBeside(Part):
    """``--megatron``: Megatron-LM's theoretical memory (``theoretical_memory_usage.py``) beside costgraph's
    own and the difference costgraph − Megatron (:func:`costgraph.training.megatron.megatron_beside`; why
    they differ: :data:`costgraph.training.megatron.DIFFERENCES`)."""

    megatron: MemoryEstimate = quantity(label="Megatron-LM's estimate")
    costgraph: MemoryEstimate = quantity(label="costgraph's figure")
    difference: MemoryEstimate = quantity(label="costgraph − Megatron")


@dataclass
class TrainingCompute(Part):
    """The compute sections of ``costgraph train`` at model scope (:func:`costgraph.training.api.compute_section`):
    SymPy expressions; the sections are typed in turn (:class:`TrainingFlops`, :class:`TrainingTime`,
    :class:`StepParts`, ``communication`` kind → :class:`CollectiveCost`), each field with its unit (the section
    itself declares none: ``time`` holds seconds, days, GPU-hours and PF-days); a section without its inputs is
    None (no key)."""

    flops: TrainingFlops = quantity(label="FLOPs per iteration, per token, per device")
    lora: LoraCompute | None = quantity(label="LoRA: rank, targets, trainable parameters, FLOP conventions",
                                        omit_none=True, default=None)
    time: TrainingTime | None = quantity(label="step and training time", omit_none=True, default=None)
    mfu: object = quantity(label="MFU", omit_none=True, default=None)
    hfu: object = quantity(label="HFU", omit_none=True, default=None)
    communication: dict | None = quantity(label="kind → CollectiveCost (bytes, op, group; seconds, "
                                          "exposed, hidden, overlap_rule with a preset)", omit_none=True, default=None)
    step: StepParts | None = quantity(label="the step time's parts (costgraph.training.steptime)",
                                 omit_none=True, default=None)
    overlap: str | None = quantity(label="communication overlap convention", omit_none=True, default=None)
    overlap_contention: str | None = quantity(label="overlap contention convention (--overlap-contention)",
                                              omit_none=True, default=None)
    cross_entropy: str | None = quantity(label="the loss's kernels timed (--cross-entropy)", omit_none=True,
                                         default=None)
    compute_by_class: ComputeByClass | None = quantity(label="compute seconds by kernel class", omit_none=True,
                                                       default=None)
    moe_permute: str | None = quantity(label="MoE dispatch copies' convention", omit_none=True, default=None)
    attention_kernel: str | None = quantity(label="fused attention kernel timed", omit_none=True, default=None)
    gemm_rate: str | None = quantity(label="GEMM rate of the per-kernel model (--gemm-rate)", omit_none=True,
                                     default=None)
    userbuffers_sms: UserbuffersSMs | None = quantity(label="SMs of the TP-overlapped GEMMs", omit_none=True,
                                                      default=None)
    rate: object = quantity(label="the step time's rate (costgraph.training.steptime.Rate)", omit_none=True,
                            default=None)
    efficiency: object = quantity(label="fraction of the peak (--efficiency), None for another rate",
                                  default=None)
    hardware: str | None = quantity(label="the preset the seconds are on", default=None)
    calibration: Calibrated | None = quantity(label="what --efficiency-profile calibrated", omit_none=True,
                                              default=None)

    def present(self, name: str) -> bool:
        if name in ("efficiency", "hardware"):   # with a rate, even when None
            return self.rate is not None
        return super().present(name)


@dataclass
class OffloadSettings(Part):
    """Where CPU/NVMe offload puts what (the layout's ``--offload-optimizer``, ``--offload-params`` and
    ``--offload-activations``)."""

    optimizer: str = quantity(label="optimizer states offloaded to")
    params: str = quantity(label="parameters offloaded to")
    activations: object = quantity(label="fraction of the activations offloaded")


@dataclass
class OffloadSeconds(Part):
    """The host link's and the CPU step's seconds of one device's offload per step
    (:func:`costgraph.training.offload.offload_seconds`, DeepSpeed's schedule)."""

    d2h: object = quantity("s", label="device → host")
    h2d: object = quantity("s", label="host → device")
    link: object = quantity("s", label="host link, both directions at once")
    after: object = quantity("s", label="the updated partition back, after the CPU step")
    cpu_step: object = quantity("s", label="CPU optimizer step")
    serial: object = quantity("s", label="after the backward, in series (CPU step + partition back)")


@dataclass
class TrainingOffload(Part):
    """CPU/NVMe offload of the most-loaded device (:func:`costgraph.training.offload.offload_section`):
    bytes per device (per step for the host link); with a hardware preset the per-node figures, the
    seconds (None when the preset publishes no host-link bandwidth), the preset and its host-memory
    bandwidth."""

    settings: OffloadSettings = quantity(label="offload settings (optimizer, params, activations)")
    host: object = quantity("bytes", label="host memory per device")
    nvme: object = quantity("bytes", label="NVMe per device")
    host_link_d2h: object = quantity("bytes", label="device → host per step")
    host_link_h2d: object = quantity("bytes", label="host → device per step")
    devices_per_node: int | None = quantity(label="devices sharing a host", omit_none=True, default=None)
    host_per_node: object = quantity("bytes", label="host memory per node", omit_none=True, default=None)
    nvme_per_node: object = quantity("bytes", label="NVMe per node", omit_none=True, default=None)
    seconds: OffloadSeconds | None = quantity(label="host-link and CPU-step seconds", default=None)
    hardware: str | None = quantity(label="the preset", default=None)
    host_memory_bandwidth: object = quantity("B/s", label="host-memory bandwidth per node", default=None)

    def present(self, name: str) -> bool:
        if name in ("seconds", "hardware", "host_memory_bandwidth"):   # with a preset, even when None
            return self.devices_per_node is not None
        return super().present(name)
