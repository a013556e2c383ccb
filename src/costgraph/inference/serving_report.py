"""The figures and named conventions of a parallel serving layout in ``infer``'s report
(:func:`report_serving`, :func:`serving_notes`): the layout's settings, each collective kind's bytes,
the experts per device, a pipeline's slowest stage and its tokens/s (the conventions:
:mod:`costgraph.inference.parallel`'s module docstring)."""

from __future__ import annotations

import sympy

from ..engine.totals import expand_sum


def report_serving(rep, inf, m, t: int, *, step_seconds, comm_seconds, exact) -> None:
    """Add the layout's settings, figures and named conventions to an
    :class:`~costgraph.inference.roofline.InferenceReport` (called by ``infer``,
    which passes its ``step_seconds``, ``comm_seconds`` and exact evaluation: no import cycle)."""
    from .phases import G, P

    _exact = exact

    sv, qd, vals = inf.serving, rep.quantities, rep.values
    rep.settings.set(ep=sv.ep, dp_attention=sv.dp_attention, pp=sv.pp, tp_overlap=sv.tp_overlap,
                        devices=sv.devices)
    new = {}
    for name, st in (("prefill", inf.prefill()), ("decode", inf.decode())):
        if st.collectives and t == 1 and m.timed:
            new[f"{name}.communication_seconds"] = comm_seconds(st, m, t)
        for kind in ("all-to-all", "send/recv", "all-gather"):
            got = [c.calls * c.bytes for c in st.collectives if c.kind == kind]
            if got:
                new[f"{name}.{kind.replace('/', '_').replace('-', '_')}_bytes"] = expand_sum(got)
    for g in inf.experts.values():
        new["experts_per_device"] = g.count / sv.ep
        new["decode.distinct_experts_read_per_device"] = g.count / sv.ep * (1 - (1 - g.active / g.count) ** inf.b)
        break
    tps = qd.get("tokens_per_second")   # None: no seconds (no device, or no link for the collectives)
    if sv.pp > 1 and tps is not None:
        slow = sympy.Max(*[step_seconds(s, m, t) for s in inf.stage_steps(1, P + G - 2)])
        new["decode.slowest_stage_seconds"] = slow
        tps = sv.pp * inf.b / sympy.Max(qd["time_per_output_token_mean"], sv.pp * slow)
        qd["tokens_per_second"] = tps
        mean = vals.get("time_per_output_token_mean")
        slow_v = _exact(slow, rep.subs)
        if mean is not None and slow_v is not None:
            vals["tokens_per_second"] = sv.pp * rep.subs[inf.b] / max(mean, sv.pp * slow_v)
    if tps is not None:
        qd["tokens_per_second_per_device"] = tps / sv.devices
    if vals.get("tokens_per_second") is not None:
        vals["tokens_per_second_per_device"] = vals["tokens_per_second"] / sv.devices
    for k, e in new.items():
        qd[k] = e
        v = _exact(e, rep.subs)
        if v is not None:
            vals[k] = v
    rep.notes += serving_notes(sv)


def serving_notes(sv) -> list[str]:
    """The conventions of the layout, as ``infer`` names them (module docstring)."""
    notes = [f"serving layout: {sv.devices} devices = tp {sv.tp} x pp {sv.pp}; figures per device"]
    if sv.dp_attention > 1:
        notes.append(f"DP attention (SGLang): {sv.dp_attention} DP ranks of attention-TP {sv.tp // sv.dp_attention}, "
                     f"each with b/{sv.dp_attention} sequences (b: the whole deployment's); KV cache per device: "
                     "its rank's sequences; MLP/MoE gathered to TP " + str(sv.tp) + ": decode MAX_LEN (all-gather "
                     "+ reduce-scatter), prefill SUM_LEN (two all-reduces)" if sv.ep == 1 else
                     f"DP attention: {sv.dp_attention} DP ranks of attention-TP {sv.tp // sv.dp_attention}, each "
                     f"with b/{sv.dp_attention} sequences; every op but the routed experts with the DP rank "
                     "(DeepSeek-V3 report 3.4)")
    if sv.ep > 1:
        notes.append(f"EP {sv.ep}: E/{sv.ep} whole experts per device; dispatch + combine all-to-all of "
                     f"b q k h / {sv.tp} elements per MoE layer each, uniform routing ((e-1)/e leaves the device), latency "
                     "NCCL's p2p rounds as training's (1 NIC step across nodes, ceil((e-1)/8) NVLink steps in one); "
                     "expected distinct experts read E/e (1 - (1 - k/E)^(b q)) per device")
    if sv.pp > 1:
        notes.append(f"PP {sv.pp}: memory of the most loaded stage, KV cache for {sv.pp} micro-batches of b in "
                     f"flight (vLLM); a step's FLOPs, bytes and latency: every stage's (a token passes them all) + "
                     f"{sv.pp - 1} sends of the activations; "
                     f"tokens/s = {sv.pp} b / max(mean TPOT, {sv.pp} x slowest stage)")
    notes.append("TP overlap: " + ("full: max(ops, collectives) per step" if sv.tp_overlap == "full" else
                                   "none: collectives after the ops"))
    return notes
