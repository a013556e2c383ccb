"""Tensor and sequence parallelism: the collectives of the TP/SP walk (:mod:`costgraph.parallel.tensor`).

Row-parallel and vocabulary-parallel outputs made whole, the inputs of column-parallel linears (their
gradients; under SP the inputs gathered and the gradients scattered), norms split by heads, the
vocabulary-parallel cross-entropy and, under SP, the gradients of the weights TP keeps whole: the
conventions and sources are the module docstring of :mod:`costgraph.parallel.communication`, which calls
:func:`tp_collectives`.
"""

from __future__ import annotations

import sympy

from .collectives import Collective, Transfer
from .comm_step import ONE, ZERO, Expr, _Step, _trivial


def tp_collectives(x: _Step) -> dict[str, Collective]:
    """``tp``: the collectives of the TP/SP walk per layer per micro-batch,
    the vocabulary-parallel cross-entropy, and under SP the gradients of the
    weights TP keeps whole (module docstring)."""
    tp = x.pl.tp
    if tp is None:
        return {}
    parts: list[Transfer] = []
    group = x.pl.groups["tp"]

    def add(what, op, el, eb, calls):
        parts.append(Transfer(what, op, group.size, group.stride, el, eb, calls))

    skip = x.pl.in_experts if _trivial(x.L.etp) else (lambda path: False)
    _tp_made_whole(x, add, skip)
    _tp_column_inputs(x, add, skip)
    if x.L.loss and x.stage.has_head():
        for o in x.cg.outputs:
            if o in tp.split and x.cg.tensors[o].shape:
                ten = x.cg.tensors[o]
                add(f"{o}: vocabulary-parallel cross-entropy, max, target logit, sum of exponentials (forward)",
                    "all-reduce", ten.numel / ten.shape[-1] / x.pl.sequence_divisor(o), sympy.Integer(4),
                    3 * x.pl.degree("m"))
    if x.L.sp:
        el = _sp_replicated_weights(x)
        if el != 0:
            add("weights TP keeps whole that see s/t tokens: gradients (step)", "all-reduce", el, x.grad_bytes, ONE)
    return {"tp": Collective("tp", tuple(parts))} if parts else {}


def _fp8_gather(x: _Step) -> tuple[set, Expr, str] | None:
    """``(the FP8 linears, bytes per element, mode)`` where the layout's precision policy quantizes the
    sequence-parallel all-gathers of its FP8 linears (an FP8 recipe's ``tp_all_gather``,
    :data:`costgraph.training.data.TP_ALL_GATHER`, sources in ``fp8.toml``'s header): ``fp8`` (Transformer
    Engine: the inputs' gathers forward and for the weight gradient, and a row-parallel FP8 linear's output
    gradient) or ``fp8-input`` (torchao under torchtitan's float8 TP: the forward input's gather only); the
    recipe's ``data_bytes`` an element, plus its ``scale_bytes`` per ``block`` elements for block scaling (a
    per-tensor scale is not sent: TE's ``_all_gather_fp8`` gathers ``_data`` only); None otherwise (the
    activations' precision)."""
    from ..training.fp8 import fp8_linears, policy_recipe

    rec = policy_recipe(x.L.policy)
    if rec is None or rec.tp_all_gather == "activation":
        return None
    store = x.cg.memo("fp8_linears")
    if "all" not in store:
        store["all"] = frozenset(fp8_linears(x.cg))
    per = rec.data_bytes + (sympy.Rational(rec.scale_bytes, rec.block) if rec.scaling != "tensor" else 0)
    return store["all"], sympy.sympify(per), rec.tp_all_gather


def _tp_made_whole(x: _Step, add, skip) -> None:
    """Row-parallel and vocabulary-parallel outputs made whole: all-reduce
    forward, or with SP reduce-scatter forward and all-gather backward."""
    tp, cg = x.pl.tp, x.cg
    fp8 = _fp8_gather(x)
    for path in tp.row + tp.vocab:
        if skip(path) or x.stage.node_factor(path) == 0:
            continue
        o = cg.nodes[path]["outputs"][0]
        el, eb = cg.tensors[o].numel / x.pl.sequence_divisor(o), x.act_bytes(o)
        label = "row-parallel" if path in tp.row else "vocab-parallel"
        if o in tp.sequence:
            add(f"{path}: {label} output (forward)", "reduce-scatter", el, eb, x.node_calls(path, True, "reduce-scatter"))
            gb, what = (fp8[1], " in FP8") if fp8 is not None and fp8[2] == "fp8" and path in fp8[0] else (eb, "")
            add(f"{path}: gradient of its output{what} (backward)", "all-gather", el, gb, x.node_calls(path, False))
        else:
            add(f"{path}: {label} output (forward)", "all-reduce", el, eb, x.node_calls(path, True, "all-reduce"))
    for path in tp.split_norms:   # parallel/tensor.py "norms split by heads": one fp32 per token
        if skip(path) or x.stage.node_factor(path) == 0:
            continue
        o = cg.tensors[cg.nodes[path]["outputs"][0]]
        el = o.numel / o.shape[-1] / x.pl.sequence_divisor(cg.nodes[path]["outputs"][0])
        add(f"{path}: norm split by heads, sum of squares per token (forward)", "all-reduce", el,
            sympy.Integer(4), x.node_calls(path, True, "all-reduce"))
        add(f"{path}: its gradient's sum per token (backward)", "all-reduce", el, sympy.Integer(4),
            x.node_calls(path, False))


def _tp_column_inputs(x: _Step, add, skip) -> None:
    """A column-parallel linear's input: its gradient all-reduced backward, or
    with SP the input all-gathered forward and its gradient reduce-scattered
    backward; one per distinct input tensor."""
    tp, cg = x.pl.tp, x.cg
    fp8 = _fp8_gather(x)
    inputs: dict[str, str] = {}
    for path in tp.column:
        if skip(path) or x.stage.node_factor(path) == 0:
            continue
        inputs.setdefault(cg.nodes[path]["inputs"][0], path)
    for tid, path in inputs.items():
        el, eb = cg.tensors[tid].numel / x.pl.sequence_divisor(tid), x.act_bytes(tid)
        readers = [q for q in tp.column if cg.nodes[q]["inputs"][0] == tid and not skip(q)]
        who = ", ".join(q.rsplit("/", 1)[-1] for q in readers)
        if tid in tp.sequence:
            # every reader an FP8 linear: TE quantizes the input once and gathers it in FP8 (_fp8_gather)
            gb, what = (fp8[1], " in FP8") if fp8 is not None and set(readers) <= fp8[0] else (eb, "")
            add(f"{tid}: input of {who}{what} (forward)", "all-gather", el, gb, x.node_calls(path, True, "all-gather"))
            add(f"{tid}: its gradient (backward)", "reduce-scatter", el, eb, x.node_calls(path, False))
            if x.sp_backward_gather:
                gb, what = (gb, what) if fp8 is None or fp8[2] == "fp8" else (eb, "")
                add(f"{tid}: input gathered again for the weight gradient{what} (backward)", "all-gather", el, gb,
                    x.node_calls(path, False))
        else:
            add(f"{tid}: gradient of the input of {who} (backward)", "all-reduce", el, eb,
                x.node_calls(path, False))


def _sp_replicated_weights(x: _Step) -> Expr:
    """Elements of weights TP keeps whole whose owner sees only its ``s/t``
    tokens under SP (an input split along the sequence; a row-parallel bias,
    added after the reduce-scatter)."""
    tp, cg, total = x.pl.tp, x.cg, ZERO
    for path, dd in cg.ops():
        f = x.stage.node_factor(path)
        if f == 0:
            continue
        ws = [w for w in dd["cost"].weights if tp.weight_divisor(w) == 1]
        if not ws:
            continue
        sees_part = any(i in tp.sequence for i in dd["inputs"]) or (
            path in tp.row and any(o in tp.sequence for o in dd["outputs"]))
        if sees_part:
            total += sympy.Add(*[cg.weights[w].count * cg.weights[w].numel / x.pl.weight_divisor(w) * f
                                 for w in ws])
    return total
