"""The tables of the API's typed results in a notebook (:mod:`costgraph.export.display` renders
them as HTML, LaTeX and pandas): :class:`~costgraph.training.result.TrainingResult`,
:class:`~costgraph.inference.InferenceReport`, :class:`~costgraph.training.planning.PlanResult`,
:class:`~costgraph.training.bare_time.BareTime` and the plot data of :mod:`costgraph.export.plots`.
Each is read from the result's ``to_dict()`` (the same numbers the JSON of the command has) with the
unit its producer declares (the fields of the typed results and their parts, :func:`costgraph.result_fields.quantity`:
:mod:`costgraph.training.result_parts`; :mod:`costgraph.inference.quantities`): bytes,
FLOP, FLOP/token, seconds (decimal), days, GPU-hours, PF-days, tokens/s."""

from __future__ import annotations

from ..inference.quantities import CapacityAnswers, InferenceFigures
from ..result_fields import Q, Table, quantities
from ..training.result_parts import CollectiveCost, StepParts


def _value(entry):
    """A JSON quantity entry (``expr``, ``value``) as its value, or its formula without one
    (or, for an answer left out, why: ``absent``)."""
    if not isinstance(entry, dict):
        return entry
    v = entry.get("value")
    return entry.get("expr", entry.get("absent", "")) if v is None else v


def training_table(result) -> Table:
    """Memory of the most-loaded device, the fit, FLOPs, time and communication of a TrainingResult."""
    doc = result.to_dict()
    plan = doc["plan"]
    title = (f"{doc['model']}: training per device — {plan['gpus'] or '?'} GPUs = tp {plan['tp']} × pp {plan['pp']} "
             f"× cp {plan['cp']} × dp {plan['dp']}; ZeRO {plan['zero']}")
    rows = [(k, Q(_value(e), "bytes")) for k, e in doc["memory"].items() if k != "fp8"]
    if "fits" in doc:
        rows.append(("fits", doc["fits"]["fits"]))
    compute = result.compute   # the units declared on the fields of its parts (costgraph.training.result_parts)
    for section in ("flops", "time"):
        declared = {n: q.unit for n, q in quantities(getattr(compute, section))} if section in doc else {}
        rows += [(k, Q(_value(e), declared.get(k, ""))) for k, e in doc.get(section, {}).items()]
    rows += [(k, Q(_value(doc[k]))) for k in ("mfu", "hfu") if k in doc]
    unit = {n: q.unit for n, q in (*quantities(CollectiveCost), *quantities(StepParts))}
    for kind, c in doc.get("communication", {}).items():
        rows.append((f"communication {kind} ({c['op']} over {c['group']})", Q(_value(c["bytes"]), unit["bytes"])))
        if "seconds" in c:
            rows.append((f"communication {kind} time", Q(_value(c["seconds"]), unit["seconds"])))
    if "step" in doc:
        rows.append(("step time", Q(_value(doc["step"]["total"]), unit["total"])))
    rows += [("warning", w) for w in doc["warnings"]]
    return Table(title, ("quantity", "value"), rows)


_INFER_KEYS = ("time_to_first_token", "time_per_output_token", "time_per_output_token_mean", "tokens_per_second",
               "weight_bytes", "kv_cache_bytes", "memory_bytes")   # units: inference.quantities.InferenceFigures


def inference_table(report) -> Table:
    """Latency, throughput and capacity of an InferenceReport."""
    doc = report.to_dict()
    st = doc["settings"]
    title = (f"{doc['model']}: inference on {st['hardware'] or 'no preset'} — batch {st['batch']}, prompt {st['prompt']}, "
             f"generate {st['generate']}, weights {st['weights']}, KV {st['kv']}")
    unit = {name: q.unit for name, q in quantities(InferenceFigures)}   # declared on the fields
    rows = [(k, Q(_value(doc[k]), unit[k])) for k in _INFER_KEYS]
    rows += [(k, Q(doc[k], q.unit) if q.unit else doc[k]) for k, q in quantities(CapacityAnswers)]
    rows += [("warning", w) for w in doc["warnings"]]
    return Table(title, ("quantity", "value"), rows)


_PLAN_HEADS = ("tp", "pp", "dp", "cp", "ep", "zero", "recompute", "sp", "micro_batch", "micro_batches",
               "virtual_stages", "schedule", "memory_bytes", "step_seconds", "mfu")
#: a row's fields that default where absent (the text report's v and schedule columns)
_PLAN_DEFAULTS = {"virtual_stages": 1, "schedule": "1f1b"}


def plan_table(result) -> Table:
    """The layouts of a PlanResult, fastest first (memory in bytes, step time in seconds); the virtual
    stages and the schedule as the text report shows them (rows differing only there were alike), and
    the variants (``options``) where a row has any."""
    from ..training.plan import Candidate

    doc = result.to_dict()
    units = {name: q.unit for name, q in quantities(Candidate) if q.unit}   # declared on the row's fields
    heads = _PLAN_HEADS + (("options",) if any(r.get("options") for r in doc["layouts"]) else ())
    rows = [tuple(Q(r[h], units[h]) if h in units else _plan_cell(r, h) for h in heads) for r in doc["layouts"]]
    title = (f"{doc['model']}: layouts on {doc['gpus']} × {doc['hardware']}, global batch {doc['global_batch']}; "
             f"{doc['considered']:,} considered; {doc['verdict']}")
    return Table(title, heads, rows)


def _plan_cell(row: dict, head: str):
    if head == "options":   # the variants, as the text report's options column writes them
        return ", ".join(f"{k} {'+'.join(v) if isinstance(v, (tuple, list)) else v}"
                         for k, v in (row.get("options") or {}).items())
    return row.get(head, _PLAN_DEFAULTS.get(head))


def fields_table(result) -> Table:
    """A row per quantity field of ``result`` (:func:`costgraph.results.quantities`): its label, and its
    value with the field's unit; a field that is None is left out. The title: the result's own
    ``title`` property when it has one, else its type's name."""
    rows = [(q.label, Q(getattr(result, name), q.unit)) for name, q in quantities(result)
            if getattr(result, name) is not None]
    return Table(getattr(result, "title", type(result).__name__), ("quantity", "value"), rows)


def memory_sweep_table(data) -> Table:
    """Bytes per device by part at each point of a MemorySweep."""
    heads = (data.symbol, *data.parts, "total")
    rows = [(p, *(Q(col[i], "bytes") for col in data.parts.values()), Q(data.totals[i], "bytes"))
            for i, p in enumerate(data.points)]
    return Table(data.title, heads, rows)


def flops_share_table(data) -> Table:
    """FLOPs by part of a FlopsShare, with each part's share of the total."""
    rows = [(label, Q(n, "FLOP"), f"{n / data.total:.1%}" if data.total else "—") for label, n in data.parts]
    rows.append(("total", Q(data.total, "FLOP"), "100.0%"))
    return Table(data.title, ("part", data.quantity, "share"), rows)


def roofline_table(data) -> Table:
    """The steps of a Roofline: arithmetic intensity and attained FLOP/s, beside the device's roof."""
    rows = [(label, Q(i, "FLOP/byte"), Q(f, "FLOP/s")) for label, i, f in data.points]
    rows.append((f"roof of {data.device}: peak, ridge", Q(data.ridge, "FLOP/byte"), Q(data.peak, "FLOP/s")))
    return Table(data.title, ("step", "intensity", "attained"), rows)
