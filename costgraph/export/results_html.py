"""Jupyter displays (``_repr_html_``) of the API's typed results: one HTML table each
for :class:`~costgraph.training.result.TrainingResult`,
:class:`~costgraph.inference.InferenceReport` and
:class:`~costgraph.training.planning.PlanResult`, read from their ``to_dict()``
(the same numbers the JSON of the command has; text escaped)."""

from __future__ import annotations

from html import escape

_STYLE = "border-collapse:collapse;text-align:left"


def table(title: str, rows: list[tuple[str, str]], heads: tuple[str, ...] = ()) -> str:
    """An HTML table with a caption ``title``, one row per tuple (cells escaped)."""
    out = [f'<table style="{_STYLE}"><caption style="text-align:left"><b>{escape(title)}</b></caption>']
    if heads:
        out.append("<tr>" + "".join(f"<th>{escape(h)}</th>" for h in heads) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>")
    return "".join(out) + "</table>"


def _shown(entry: dict) -> str:
    """A JSON quantity entry (``expr``, ``value``) as its value, or its formula without one."""
    v = entry.get("value")
    if v is None:
        return entry.get("expr", entry.get("absent", ""))   # absent: why (infer without a preset)
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else f"{v:.6g}" if isinstance(v, float) else str(v)


def training_html(result) -> str:
    """Memory of the most-loaded device, the fit, FLOPs, time and communication of a TrainingResult."""
    doc = result.to_dict()
    plan = doc["plan"]
    title = (f"{doc['model']}: training per device — {plan['gpus'] or '?'} GPUs = tp {plan['tp']} × pp {plan['pp']} "
             f"× cp {plan['cp']} × dp {plan['dp']}; ZeRO {plan['zero']}")
    rows = [(f"{k} (bytes)", _shown(e)) for k, e in doc["memory"].items()]
    if "fits" in doc:
        rows.append(("fits", "yes" if doc["fits"]["fits"] else "no"))
    for section in ("flops", "time"):
        rows += [(k, _shown(e)) for k, e in doc.get(section, {}).items()]
    rows += [(k, _shown(doc[k])) for k in ("mfu", "hfu") if k in doc]
    for kind, c in doc.get("communication", {}).items():
        secs = f", {_shown(c['seconds'])} s" if "seconds" in c else ""
        rows.append((f"communication {kind}", f"{c['op']} over {c['group']}: {_shown(c['bytes'])} bytes{secs}"))
    if "step" in doc:
        rows.append(("step time (s)", _shown(doc["step"]["total"])))
    rows += [("warning", w) for w in doc["warnings"]]
    return table(title, rows, ("quantity", "value"))


def inference_html(report) -> str:
    """Latency, throughput and capacity of an InferenceReport."""
    doc = report.to_dict()
    st = doc["settings"]
    title = (f"{doc['model']}: inference on {st['hardware'] or 'no preset'} — batch {st['batch']}, prompt {st['prompt']}, "
             f"generate {st['generate']}, weights {st['weights']}, KV {st['kv']}")
    keys = ("time_to_first_token", "time_per_output_token", "time_per_output_token_mean", "tokens_per_second",
            "weight_bytes", "kv_cache_bytes", "memory_bytes")
    rows = [(k, _shown(doc[k])) for k in keys]
    rows += [("fits", "yes" if doc["fits"] else "no" if doc["fits"] is not None else "—"), ("max_batch", doc["max_batch"]),
             ("max_context", doc["max_context"])]
    rows += [("warning", w) for w in doc["warnings"]]
    return table(title, rows, ("quantity", "value"))


def plan_html(result) -> str:
    """The layouts of a PlanResult, fastest first."""
    doc = result.to_dict()
    heads = ("tp", "pp", "dp", "cp", "ep", "zero", "recompute", "sp", "micro_batch", "micro_batches",
             "memory_bytes", "step_seconds", "mfu")
    rows = [tuple(_shown({"value": r[h]}) for h in heads) for r in doc["layouts"]]
    title = (f"{doc['model']}: layouts on {doc['gpus']} × {doc['hardware']}, global batch {doc['global_batch']}; "
             f"{doc['considered']:,} considered")
    return table(title, rows, heads)
