"""The typed parts of a :class:`~costgraph.training.result.TrainingResult`: the settings beside the layout
(:class:`TrainingSettings`), the fit verdict (:class:`FitVerdict`), the compute sections (:class:`TrainingCompute`)
and CPU/NVMe offload (:class:`TrainingOffload`).

Each is a dataclass whose fields are :func:`costgraph.result_fields.quantity` fields carrying their unit
(``bytes``, ``s``, ``FLOP``, ``B/s``; ``""`` for a count, ratio or text) and label; each is also read as the
mapping it replaces (:class:`costgraph.result_fields.Part`: ``r.fits["fits"]``, ``"time" in r.compute``,
``{**r.settings}``), whose keys are the fields present. The JSON and text renderers
(:mod:`costgraph.export.training_report`, :mod:`costgraph.training.offload`) read the fields; the JSON names
are the field names. Built where the result is built (:func:`costgraph.training.api.train`,
:func:`~costgraph.training.api.training_fits`, :func:`~costgraph.training.api.compute_section`,
:func:`costgraph.training.offload.offload_section`).

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
class FitVerdict(Part):
    """The fit verdict of ``costgraph train`` (:func:`costgraph.training.api.training_fits`) for the
    most-loaded device: the capacity less the reserve against its peak. ``largest_b``/``largest_s`` are keys
    only for the sizes searched (``searched``: the model's free ``b`` and ``s`` at model scope); a searched
    size is None when 1 does not fit. ``changes``: what would make it fit (:func:`costgraph.training.fit.fit_changes`,
    a list of ``{change, options, peak_bytes, fits}``), only when it does not fit."""

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
    changes: list | None = quantity("bytes", label="what would make it fit, one change at a time",
                                    omit_none=True, default=None)
    searched: tuple = quantity(json=None, label="the sizes searched (largest_b, largest_s)", default=())

    def present(self, name: str) -> bool:
        if name in ("largest_b", "largest_s"):
            return name[-1] in self.searched
        return super().present(name)


@dataclass
class TrainingCompute(Part):
    """The compute sections of ``costgraph train`` at model scope (:func:`costgraph.training.api.compute_section`):
    SymPy expressions (per-entry units of ``flops`` and ``time`` declared in :data:`costgraph.training.compute.FLOPS`,
    ``TIME``); a section without its inputs is None (no key)."""

    flops: dict = quantity("FLOP", label="FLOPs per iteration, per token, per device (FLOPS)")
    lora: dict | None = quantity(label="LoRA: rank, targets, trainable parameters, FLOP conventions",
                                 omit_none=True, default=None)
    time: dict | None = quantity("s", label="step and training time (TIME)", omit_none=True, default=None)
    mfu: object = quantity(label="MFU", omit_none=True, default=None)
    hfu: object = quantity(label="HFU", omit_none=True, default=None)
    communication: dict | None = quantity("bytes", label="kind → {bytes, op, group; seconds, exposed, hidden, "
                                          "overlap_rule with a preset}", omit_none=True, default=None)
    step: dict | None = quantity("s", label="the step time's parts (costgraph.training.steptime)",
                                 omit_none=True, default=None)
    overlap: str | None = quantity(label="communication overlap convention", omit_none=True, default=None)
    cross_entropy: str | None = quantity(label="the loss's kernels timed (--cross-entropy)", omit_none=True,
                                         default=None)
    compute_by_class: dict | None = quantity("s", label="compute seconds by kernel class", omit_none=True,
                                             default=None)
    moe_permute: str | None = quantity(label="MoE dispatch copies' convention", omit_none=True, default=None)
    attention_kernel: str | None = quantity(label="fused attention kernel timed", omit_none=True, default=None)
    userbuffers_sms: dict | None = quantity(label="SMs of the TP-overlapped GEMMs ({gemm, device})",
                                            omit_none=True, default=None)
    rate: object = quantity(label="the step time's rate (costgraph.training.steptime.Rate)", omit_none=True,
                            default=None)
    efficiency: object = quantity(label="fraction of the peak (--efficiency), None for another rate",
                                  default=None)
    hardware: str | None = quantity(label="the preset the seconds are on", default=None)
    calibration: dict | None = quantity(label="what --efficiency-profile calibrated", omit_none=True, default=None)

    def present(self, name: str) -> bool:
        if name in ("efficiency", "hardware"):   # with a rate, even when None
            return self.rate is not None
        return super().present(name)


@dataclass
class TrainingOffload(Part):
    """CPU/NVMe offload of the most-loaded device (:func:`costgraph.training.offload.offload_section`):
    bytes per device (per step for the host link); with a hardware preset the per-node figures, the
    seconds (None when the preset publishes no host-link bandwidth), the preset and its host-memory
    bandwidth."""

    settings: dict = quantity(label="offload settings ({optimizer, params, activations})")
    host: object = quantity("bytes", label="host memory per device")
    nvme: object = quantity("bytes", label="NVMe per device")
    host_link_d2h: object = quantity("bytes", label="device → host per step")
    host_link_h2d: object = quantity("bytes", label="host → device per step")
    devices_per_node: int | None = quantity(label="devices sharing a host", omit_none=True, default=None)
    host_per_node: object = quantity("bytes", label="host memory per node", omit_none=True, default=None)
    nvme_per_node: object = quantity("bytes", label="NVMe per node", omit_none=True, default=None)
    seconds: dict | None = quantity("s", label="host-link and CPU-step seconds", default=None)
    hardware: str | None = quantity(label="the preset", default=None)
    host_memory_bandwidth: object = quantity("B/s", label="host-memory bandwidth per node", default=None)

    def present(self, name: str) -> bool:
        if name in ("seconds", "hardware", "host_memory_bandwidth"):   # with a preset, even when None
            return self.devices_per_node is not None
        return super().present(name)
