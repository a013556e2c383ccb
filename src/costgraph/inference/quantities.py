"""The quantities of ``costgraph infer`` (:class:`~costgraph.inference.roofline.InferenceReport`), declared as
typed parts whose fields carry their unit and label (:func:`costgraph.result_fields.quantity`, the mechanism of
:mod:`costgraph.training.result_parts`): the report's top-level figures (:class:`InferenceFigures`), one phase's
step (:class:`StepFigures`, ``prefill`` and ``decode``) and the capacity's answers (:class:`CapacityAnswers`).
The report holds its formulas in ``quantities`` and its numbers in ``values`` (JSON name → value, a phase's
``prefill.flops``); its properties ``figures``, ``prefill``, ``decode`` and ``answers``
(:class:`InferenceParts`) read them as these parts. The JSON renderer (:mod:`costgraph.export.inference_report`)
writes the fields in their order, the table (``print``, Jupyter, ``to_pandas()``:
:func:`costgraph.export.results_html.inference_table`) takes their units from the fields; :data:`TOP`,
:data:`STEP` and :data:`CAPACITY` (JSON name → :class:`~costgraph.result_fields.Quantity`) are generated
from them.

Light at import: the standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..result_fields import Part, Quantity, quantities, quantity


def _q(unit: str, label: str):
    """A quantity field that is None (no key) where the report has no formula for it."""
    return quantity(unit, label=label, omit_none=True, default=None)


@dataclass
class InferenceFigures(Part):
    """The report's top-level quantities (each ``{expr, tree, latex, value}`` in the JSON; a seconds figure
    absent without a rate): KV cache, weights, memory at the batch (bytes per device), latency (s),
    throughput (tokens/s)."""

    kv_cache_bytes: object = _q("bytes", "KV cache")
    kv_cache_bytes_paged: object = _q("bytes", "KV cache, paged")
    kv_cache_bytes_per_token: object = _q("bytes", "KV cache per token")
    weight_bytes: object = _q("bytes", "weights")
    memory_bytes: object = _q("bytes", "memory at this batch")
    time_to_first_token: object = _q("s", "time to first token")
    time_per_output_token: object = _q("s", "time per output token")
    time_per_output_token_mean: object = _q("s", "time per output token (mean)")
    tokens_per_second: object = _q("tokens/s", "tokens per second")
    tokens_per_second_per_device: object = _q("tokens/s", "tokens per second per device")


@dataclass
class StepFigures(Part):
    """One phase's step (``prefill`` and ``decode`` in the JSON; :class:`costgraph.inference.phases.Step`),
    per device: FLOPs, the bytes it moves, its arithmetic intensity and its roofline seconds (absent without
    a rate; ``communication_seconds`` under TP)."""

    flops: object = _q("FLOP", "FLOPs")
    bytes: object = _q("bytes", "bytes moved")
    weight_bytes: object = _q("bytes", "weights read")
    kv_read_bytes: object = _q("bytes", "KV cache read")
    kv_written_bytes: object = _q("bytes", "KV cache written")
    activation_bytes: object = _q("bytes", "activations moved")
    intensity: object = _q("FLOP/byte", "arithmetic intensity")
    seconds: object = _q("s", "step time")
    communication_seconds: object = _q("s", "communication time")


@dataclass
class CapacityAnswers(Part):
    """The capacity's answers (plain numbers in the JSON; None without a device memory)."""

    fits: bool | None = quantity(label="fits", default=None)
    max_batch: int | None = quantity(label="largest batch", default=None)
    max_context: int | None = quantity("tokens", label="longest context", default=None)


def _declared(cls) -> dict[str, Quantity]:
    """JSON name → :class:`~costgraph.result_fields.Quantity` of the fields of ``cls``, in their order."""
    return {q.json: q for _, q in quantities(cls)}


#: the report's top-level quantities (:class:`InferenceFigures`' fields)
TOP = _declared(InferenceFigures)
#: one phase's step (:class:`StepFigures`' fields)
STEP = _declared(StepFigures)
#: the capacity's answers (:class:`CapacityAnswers`' fields)
CAPACITY = _declared(CapacityAnswers)


class InferenceParts:
    """The typed views of an :class:`~costgraph.inference.roofline.InferenceReport` (mixed into it): its
    formulas (``quantities``) and numbers (``values``) read as the parts above, each field with its unit."""

    @property
    def figures(self) -> InferenceFigures:
        """The top-level formulas (SymPy; None where absent) as an :class:`InferenceFigures`."""
        return InferenceFigures(**{k: self.quantities.get(k) for k in TOP})

    def _step(self, phase: str) -> StepFigures:
        return StepFigures(**{k: self.quantities.get(f"{phase}.{k}") for k in STEP})

    @property
    def prefill(self) -> StepFigures:
        """The prefill step's formulas (``prefill.*``) as a :class:`StepFigures`."""
        return self._step("prefill")

    @property
    def decode(self) -> StepFigures:
        """The last decode step's formulas (``decode.*``) as a :class:`StepFigures`."""
        return self._step("decode")

    @property
    def answers(self) -> CapacityAnswers:
        """The capacity's answers (numbers) as a :class:`CapacityAnswers`."""
        return CapacityAnswers(**{k: self.values.get(k) for k in CAPACITY})
