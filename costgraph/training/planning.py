"""What ``costgraph plan`` computes, as a function of the Python API
(:meth:`costgraph.Model.plan` calls :func:`plan_layouts`), and its typed result
:class:`PlanResult`: the parallel layouts that fit a device, fastest first
(:func:`costgraph.training.plan.plan`), with the days to train when the
training tokens are given. :meth:`PlanResult.to_dict` is the JSON of
``costgraph plan --format json`` (schema ``costgraph schema plan``);
:meth:`PlanResult.to_text` its text; ``_repr_html_`` a table in Jupyter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import arguments
from ..choices import ATTENTION, DEFAULT_EFFICIENCY, DEFAULT_OPTIMIZER, DEFAULT_POLICY
from ..errors import CostgraphValueError
from ..parallel.layout import MAX_DEVICES


@dataclass
class PlanResult:
    """The ranked layouts of :func:`plan_layouts`.

    ``layouts``: one dict per layout, fastest first (``tp pp dp cp ep zero recompute sp
    micro_batch micro_batches memory_bytes step_seconds mfu``, and ``train_days`` with tokens);
    ``considered``: layouts searched; ``refused``: reason → count; ``capacity_bytes``,
    ``efficiency`` (a float), ``hardware`` (the preset's key); ``settings``: what the text's
    ``check one with`` line repeats (``hardware_name``, ``peak_flops``, ``attention``,
    ``precision``, ``optimizer``, ``memory`` as given, ``dropout``, ``tokens``)."""

    model: str
    gpus: int
    hardware: str
    global_batch: int
    capacity_bytes: int
    efficiency: float
    considered: int
    refused: dict
    layouts: list
    settings: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The document ``costgraph plan --format json`` prints (JSON values only)."""
        return {"model": self.model, "gpus": self.gpus, "hardware": self.hardware, "global_batch": self.global_batch,
                "capacity_bytes": self.capacity_bytes, "efficiency": self.efficiency, "considered": self.considered,
                "refused": dict(self.refused), "layouts": [dict(r) for r in self.layouts]}

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text."""
        import json

        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        """The text ``costgraph plan`` prints: a table of the layouts, the refusals, and the
        ``costgraph train`` line to check one."""
        from ..numbers import units
        from ..export.tables import table

        st, rows = self.settings, self.layouts
        with_days = st.get("tokens") is not None
        out = [f"{self.model}: layouts on {self.gpus} × {st['hardware_name']}, global batch {self.global_batch} sequences; "
               f"device memory {units.with_unit('activation_bytes', self.capacity_bytes)}; compute at "
               f"{self.efficiency:.0%} of {st['peak_flops'] / 1e12:g} TFLOP/s (BF16 dense)",
               f"{self.considered:,} layouts considered; {len(rows)} shown, fastest first "
               f"(memory of the most-loaded device; step time = max(compute + bubble, DP/ZeRO traffic) + exposed TP/CP/EP/PP communication)", ""]
        heads = ["tp", "pp", "dp", "cp", "ep", "zero", "recompute", "sp", "b", "m", "memory GB", "step s", "MFU"]
        cells = [[r["tp"], r["pp"], r["dp"], r["cp"], r["ep"], r["zero"], r["recompute"], "yes" if r["sp"] else "no",
                  r["micro_batch"], r["micro_batches"], f"{r['memory_bytes'] / 1e9:.2f}", f"{r['step_seconds']:.3f}",
                  f"{r['mfu']:.1%}"] + ([f"{r['train_days']:.1f}"] if with_days else []) for r in rows]
        if with_days:
            heads.append("days")
        right = ["right"] * len(heads)
        right[6] = right[7] = "left"
        out += table(cells, heads, align=right) if rows else []
        if not rows:
            out.append("  (none fits)")
        out += ["", "refused: " + "; ".join(f"{n:,} {why}" for why, n in self.refused.items() if n),
                "check one with: costgraph train ... --tp T --pp P --cp C --ep E --zero Z --recompute R [--sp] "
                f"--set b=B --micro-batches M --gpus {self.gpus} --hardware {self.hardware} --attention {st['attention']} "
                f"--precision {st['precision']} --optimizer {st['optimizer']}"
                + (f" --memory {st['memory']}" if st.get("memory") else "") + ("" if st.get("dropout", True) else " --no-dropout")]
        return "\n".join(out)

    def _repr_html_(self) -> str:
        """Jupyter: the layouts as a table."""
        from ..export.results_html import plan_html

        return plan_html(self)


def plan_layouts(model, values, *, gpus: int, hardware, global_batch: int, tokens=None, efficiency=None,
                 memory=None, precision: str = DEFAULT_POLICY, optimizer: str = DEFAULT_OPTIMIZER,
                 attention: str = ATTENTION.default, top: int = 10) -> PlanResult:
    """The layouts of ``model`` (a :class:`costgraph.Model`) that fit, fastest first
    (:func:`costgraph.training.plan.plan`), as ``costgraph plan`` checks and shows them.

    ``values``: every dimension's value (symbol → int; ``b`` is replaced by each candidate
    micro-batch); ``hardware``: a preset name or
    :class:`~costgraph.hardware.Hardware`; ``tokens``: training tokens (adds ``train_days`` to
    each layout); ``efficiency``: fraction of the peak (default 1/2); ``memory``: device bytes or
    a size (``"80GB"``; default the preset's); numbers as ints, floats or decimal text.

    Raises
    ------
    CostgraphValueError
        No values, a count that is not positive, more than 10⁶ devices, an efficiency outside (0, 1], a dimension without a value, an unknown preset."""
    from ..hardware import preset
    from .fit import parse_size
    from .plan import plan

    if values is None:
        raise CostgraphValueError("plan needs the model's sizes", hint="give --config NAME or --set h=... l=...")
    values = arguments.model_values(model, values)
    for v, name in ((gpus, "--gpus"), (global_batch, "--global-batch"), (top, "--top")):
        arguments.whole(v, name)
    arguments.positive_number(tokens, "--tokens")
    arguments.named_choice(attention, ATTENTION)
    if memory is not None and not isinstance(memory, str):
        arguments.whole(memory, "--memory")
    if gpus > MAX_DEVICES:
        raise CostgraphValueError(f"--gpus {gpus:,}: the planner searches up to 1,000,000 devices")
    hw = preset(hardware)
    capacity = parse_size(memory) if isinstance(memory, str) else memory if memory is not None else hw.memory_bytes
    eff = arguments.rational(DEFAULT_EFFICIENCY if efficiency is None else efficiency, "--efficiency")
    if not 0 < eff <= 1:
        raise CostgraphValueError(f"--efficiency {efficiency} is not a fraction in (0, 1]")
    free = sorted(d.name for d in model.graph.dims.values()
                  if d.derived is None and d.symbol not in values and d.name != "b")
    if free:
        raise CostgraphValueError(f"no value for {', '.join(free)}", hint="give them with --set or --config")
    result = plan(model, values, gpus=gpus, hardware=hw, global_batch=global_batch, capacity=capacity,
                  efficiency=eff, attention=attention, policy=precision, optimizer=optimizer, top=top)
    tokens = arguments.rational(tokens, "--tokens")
    seq = int(values[model.graph.dims["s"].symbol]) if "s" in model.graph.dims else 1
    rows = []
    for c in result.layouts:
        row = c.as_dict()
        if tokens is not None:
            row["train_days"] = float(tokens / (global_batch * seq)) * c.step_seconds / 86400
        rows.append(row)
    settings = {"hardware_name": hw.name, "peak_flops": hw.peak_flops_bf16, "attention": attention,
                "precision": precision, "optimizer": optimizer, "memory": memory, "dropout": model.settings.dropout,
                "tokens": tokens}
    return PlanResult(model.name, gpus, hw.key, global_batch, capacity, float(eff), result.considered,
                      result.refused, rows, settings)
