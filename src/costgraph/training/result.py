"""The typed result of :meth:`costgraph.Model.train` (:func:`costgraph.training.api.train`).

A :class:`TrainingResult` holds what ``costgraph train`` shows: the memory per
device of each pipeline stage, the fit verdict, the FLOPs, time and
utilization, the communication per device per step (bytes; seconds with a
hardware preset), the step-time model, Megatron-LM's estimate beside
costgraph's, and warnings. :meth:`TrainingResult.to_dict` is the JSON of
``costgraph train --format json`` (schema ``costgraph schema train``);
:meth:`TrainingResult.to_text` its text; ``_repr_html_``/``_repr_latex_`` a table in Jupyter, ``to_pandas()`` a DataFrame:
all drawn by the renderers of :mod:`costgraph.export.present` (JSON and text:
:mod:`costgraph.export.training_report`) through :class:`costgraph.results.Document`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..result_fields import key
from ..results import Document
from .memory import StageMemory, TrainingMemory
from .result_parts import FitVerdict, MegatronBeside, TrainingCompute, TrainingOffload, TrainingSettings


@dataclass
class TrainingResult(Document):
    """Training costs per device for one layout.

    Attributes
    ----------
    model : str
        The model's name.
    symbols : dict
        Dimension symbol → meaning.
    scope : str
        ``model`` or ``layer`` (one layer on one device; no compute section).
    memory : TrainingMemory
        Bytes per device, per stage: ``memory.stages[i].memory[k]`` for ``k`` in
        ``weights gradients optimizer activations total`` (SymPy expressions).
    values : dict or None
        Dimension values (symbol → int) the numbers are taken at.
    settings : TrainingSettings
        ``profile``, ``dropout``, ``memory`` (device bytes or None), ``lora``, ``lora_targets``,
        ``quantization``: the settings beside the layout that the JSON ``plan`` names.
    fits : FitVerdict or None
        ``capacity_bytes``, ``reserve_bytes``, ``fits``, ``headroom_bytes``, ``largest_b``, ``largest_s``, ...
        with a device memory (:func:`costgraph.training.api.training_fits`).
    megatron : MegatronBeside or None
        ``megatron``, ``costgraph``, ``difference``: each a ``MemoryEstimate`` in bytes
        (:func:`costgraph.training.megatron.megatron_beside`).
    compute : TrainingCompute or None
        ``flops`` (always, model scope), ``time``, ``mfu``, ``hfu`` (with a rate),
        ``communication`` (kind → ``{bytes, op, group}``, and ``seconds`` with a hardware preset),
        ``step`` and ``efficiency`` (with a hardware preset); SymPy expressions.
    warnings : list of str
    offload : TrainingOffload or None
        With CPU/NVMe offload: :func:`costgraph.training.offload.offload_section` (host and NVMe
        bytes per device and per node, host-link bytes and seconds).

    The typed parts (:mod:`costgraph.training.result_parts`) carry each field's unit and read also as the
    mappings they were: ``r.fits.fits`` is ``r.fits["fits"]``.
    """

    #: the JSON document (``costgraph train --format json``, schema ``costgraph schema train``): each key's
    #: source field, unit and label, and the kind of value the renderer writes
    #: (:func:`costgraph.export.training_report.to_dict`; ``compute``'s sections, spread into the document,
    #: declare theirs in :mod:`costgraph.training.compute`: ``FLOPS``, ``TIME``, ``RATIOS``)
    DOCUMENT: ClassVar[tuple] = (
        key("costgraph", source=None, write="version", label="costgraph version"), key("model"), key("scope"),
        key("plan", source="memory", write="plan", label="layout and settings"),
        key("symbols"), key("values", write="values", label="dimension values"),
        key("memory", "bytes", write="top_memory", label="most-loaded device"),
        key("most_loaded_stage", source="memory", write="top_index", label="most-loaded stage"),
        key("stages", "bytes", source="memory", write="stages", label="memory per stage"),
        key("most_loaded_reason", source="memory", write="top_reason", label="why that stage"),
        key("fits", "bytes", omit_none=True, label="fit verdict"),
        key("megatron", "bytes", omit_none=True, write="beside", label="Megatron-LM's estimate beside"),
        key("compute", omit_none=True, write="compute", spread=True, label="FLOPs, time, communication, step"),
        key("offload", "bytes", omit_none=True, write="offload", label="CPU/NVMe offload"),
        key("warnings"))

    model: str
    symbols: dict
    scope: str
    memory: TrainingMemory
    values: dict | None = None
    settings: TrainingSettings | None = None
    fits: FitVerdict | None = None
    megatron: MegatronBeside | None = None
    compute: TrainingCompute | None = None
    warnings: list = field(default_factory=list)
    offload: TrainingOffload | None = None

    @property
    def layout(self):
        """The filled-in :class:`~costgraph.parallel.layout.Layout`."""
        return self.memory.layout

    @property
    def stages(self) -> list[StageMemory]:
        """The memory of each pipeline stage (``TrainingMemory.stages``)."""
        return self.memory.stages

    def most_loaded(self, values: dict | None = None) -> StageMemory:
        """The stage with the largest total at ``values`` (default: this result's values)."""
        return self.memory.most_loaded(self.values if values is None else values)

    @property
    def flops(self) -> dict | None:
        """FLOPs per iteration, per token and per device (SymPy), or None at layer scope."""
        return None if self.compute is None else self.compute.flops

    @property
    def communication(self) -> dict | None:
        """Kind → ``{bytes, op, group}`` (and ``seconds`` with a hardware preset), or None."""
        return None if self.compute is None else self.compute.communication

    @property
    def step(self) -> dict | None:
        """Seconds per step of the step-time model (with a hardware preset), or None."""
        return None if self.compute is None else self.compute.step
