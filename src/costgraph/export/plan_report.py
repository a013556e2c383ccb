"""The text of ``costgraph plan`` (:meth:`costgraph.training.planning.PlanResult.to_text`): the layouts
as a table, fastest first, the refusals, what was searched and pruned, and the ``costgraph train`` line
that checks the first row."""

from __future__ import annotations

from ..choices import ATTENTION, OVERLAP
from ..layout_options import GIVEN, given_phrases
from ..numbers import units
from .tables import table


#: how the header names train's default reserve (costgraph.runtime_memory.training_reserve)
_RUNTIME = ("--reserve runtime (default): the CUDA context and cuBLAS workspaces, and each row's NCCL buffers "
            "per parallel group above 1, as train counts them")


def to_text(plan) -> str:
    """The text ``costgraph plan`` prints for ``plan`` (a :class:`~costgraph.training.planning.PlanResult`):
    a table of the layouts, the refusals, and the ``costgraph train`` line to check one."""
    st, rows = plan.settings, plan.layouts
    # the given settings (layout_options.GIVEN), each named as its field declares (label, flag, value): the GEMM rate
    # with the per-kernel time model it is a setting of, the others after the overlap
    given = given_phrases({k: st.get(k) for k in GIVEN})
    with_days = st.get("tokens") is not None
    out = [f"{plan.model}: layouts on {plan.gpus} × {st['hardware_name']}, global batch {plan.global_batch} sequences; "
           f"device memory {units.with_unit('activation_bytes', plan.capacity_bytes)}"
           + (f" ({plan.device_memory.brief})" if plan.device_memory is not None and plan.device_memory.convention
              != "given" else "")
           + (f" less a reserve of {units.with_unit('activation_bytes', plan.reserve_bytes)} ("
              + ("calibrated" if plan.calibration is not None and plan.calibration.memory_reserve_bytes is not None
                 else _RUNTIME if st.get("reserve_runtime") else "--reserve")
              + ")" if plan.reserve_bytes else "") + f"; attention {st['attention']}"
           + (" (default)" if st["attention"] == ATTENTION.default else "") + "; compute "
           + (f"at {plan.efficiency:.0%} of {st['peak_flops'] / 1e12:g} TFLOP/s (BF16 dense)"
              + (f" ({st['assumed']})" if st.get("assumed") else "")
              if plan.efficiency is not None else
              f"by the per-kernel time model (kernels.toml [{st.get('kernel_table')}]; {given['gemm_rate']})"),
           f"{plan.considered:,} layouts considered; {len(rows)} shown, fastest first "
           f"(memory of the most-loaded device; step time = compute + bubble + optimizer step + exposed communication "
           f"+ contention, overlap "
           f"{st.get('overlap', OVERLAP.default)}{' (default)' if st.get('overlap', OVERLAP.default) == OVERLAP.default else ''}"
           + "".join(f", {phrase}" for k, phrase in given.items() if k != "gemm_rate") + ")", ""]
    heads = ["tp", "pp", "dp", "cp", "ep", "zero", "recompute", "sp", "b", "m", "v", "memory GB", "step s", "MFU"]
    cells = [[r["tp"], r["pp"], r["dp"], r["cp"], r["ep"], r["zero"], r["recompute"], "yes" if r["sp"] else "no",
              r["micro_batch"], r["micro_batches"], r.get("virtual_stages", 1), f"{r['memory_bytes'] / 1e9:.2f}", f"{r['step_seconds']:.3f}",
              f"{r['mfu']:.1%}"] + ([f"{r['train_days']:.1f}"] if with_days else []) for r in rows]
    if with_days:
        heads.append("days")
    extra = [(name, text) for name, text in (("schedule", lambda r: r.get("schedule", "1f1b")),
                                             ("split", _split_text),   # Megatron's layer split
                                             ("options", _options_text))   # the variants (plan_variants)
             if any(text(r) not in ("1f1b", "even", "") for r in rows)]
    for at, (name, text) in enumerate(extra, start=11):
        heads.insert(at, name)
        for cell, r in zip(cells, rows):
            cell.insert(at, text(r))
    right = ["right"] * len(heads)
    right[6] = right[7] = "left"
    for at in range(11, 11 + len(extra)):
        right[at] = "left"
    out += table(cells, heads, align=right) if rows else []
    out += _none_text(plan) if not rows else []
    out += ["", "refused: " + "; ".join(f"{n:,} {why}" for why, n in plan.refused.items() if n)]
    out += ["pruned: " + "; ".join(f"{n:,} {why}" for why, n in plan.pruned.items() if n)] \
        if any(plan.pruned.values()) else []
    out += ["searched: " + "; ".join(f"{k} {_values_text(v)}" for k, v in plan.searched.items())]
    out += ["not searched: " + "; ".join(f"{k} ({why})" for k, why in plan.not_searched().items())] \
        if plan.not_searched() else []
    if rows:
        out.append(f"check the first with: {plan.check_command()}")
    out += [f"warning: {w}" for w in plan.warnings or []]
    if plan.comparison is not None:   # --compare (costgraph.training.plan_compare)
        out += ["", plan.comparison.to_text()]
    if plan.calibration is not None:   # --efficiency-profile (costgraph.training.calibration)
        from ..training.calibration_profile import calibrated_text

        out.insert(2, calibrated_text(plan.calibration))
    return "\n".join(out)


def _none_text(plan) -> list[str]:
    """Why no layout is shown: none divides evenly, or none fits (and the least memory any needs)."""
    if not plan.divisible:
        return ["  no layout divides evenly: every layout of the degrees was refused by a divisibility rule "
                "(see refused) before any memory was computed"]
    out = [f"  none fits: every layout that divides evenly needs more than the device memory less the reserve "
           f"({units.with_unit('activation_bytes', plan.capacity_bytes - plan.reserve_bytes)})"]
    if plan.least is not None:
        r = plan.least
        out.append(f"  the least memory: {units.with_unit('activation_bytes', int(r['memory_bytes']))} at tp {r['tp']} "
                   f"pp {r['pp']} cp {r['cp']} ep {r['ep']} dp {r['dp']}, ZeRO {r['zero']}, recompute {r['recompute']}"
                   f"{', SP' if r['sp'] else ''}, b {r['micro_batch']} (screened); more devices, --reserve or "
                   f"--memory change the answer")
    return out


def _options_text(row: dict) -> str:
    """A row's variant fields for the table (``ep_overlap megatron``, ``policy fp8-current``, …; empty: none)."""
    out = []
    for k, v in (row.get("options") or {}).items():
        out.append(f"{k} {'+'.join(v) if isinstance(v, (tuple, list)) else v}")
    return ", ".join(out)


def _split_text(row: dict) -> str:
    """A row's layer split for the table: ``even``, ``+emb``/``+loss`` (counted as layers),
    or ``F/L`` (the first and last stages' layers)."""
    if row.get("first_stage_layers") is not None or row.get("last_stage_layers") is not None:
        return f"{row.get('first_stage_layers')}/{row.get('last_stage_layers')}"
    out = ("+emb" if row.get("account_embedding") else "") + ("+loss" if row.get("account_loss") else "")
    return out or "even"


def _values_text(values: list) -> str:
    """``1, 2, 4`` (a split as ``first/last``, ``+embedding``, ``+loss``, ``even``; a module set as
    ``mlp+layernorm``; a layer count as ``block 2``; None as ``default``)."""
    def one(v):
        if v is None:
            return "default"
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            return "+".join(v)
        if isinstance(v, list) and len(v) == 2:
            return f"{v[0]} {v[1]}"
        if isinstance(v, list):
            f, l, emb, loss = v
            if f is None and l is None:
                return "even" + ("+embedding" if emb else "") + ("+loss" if loss else "")
            return f"first {f}/last {l}"
        return str(v).lower() if isinstance(v, bool) else str(v)
    return "{" + ", ".join(one(v) for v in values) + "}"
