"""Generated code: the cost formulas of a model as source code in another language.

``costgraph codegen MODEL --lang python|numpy|c|javascript`` writes one
function per quantity and scope (``model_params``, ``layer_flops_forward``,
``layers_attn_activation_bytes``), whose arguments are the model's dimension
symbols that formula uses (``b``, ``s``, ``h``, ...; in the model file's
order), with defaults from ``--config``/``--set`` when given, and whose
docstring or comment gives the quantity, its unit, the formula, each
symbol's meaning and the conventions it was derived under (FLOP convention,
causal counting, precision bytes, activation profile, dropout, options).

Exactness (the formulas are whole numbers at valid sizes, but may be written
with fractions, Min/Max, floor, ceil and %):
each formula is rewritten by :func:`costgraph.numbers.integer_form.exact_parts`
as ``num / den`` in integer operations only; the code computes both in the
target's integers and divides once, checking the remainder is zero.

* ``python``: Python integers, exact at any size; a remainder or a
  non-positive / non-integer argument raises ``ValueError``/``TypeError``.
* ``numpy``: arrays (broadcast), ``dtype="float64"`` (rounded to 53 bits, as
  :meth:`costgraph.Costs.compile`) or ``"int64"`` (exact; refuses with
  ``OverflowError`` when a bound on every intermediate — the sum of the
  terms' magnitudes — reaches 2⁶², as :func:`costgraph.numbers.evaluator.vectorized`).
* ``c``: ``int64_t`` (or ``__int128`` with ``-DCOSTGRAPH_INT128``), every
  operation checked with GCC/Clang's ``__builtin_*_overflow``: a function
  returns a status (0, or ``CG_OVERFLOW``, ``CG_NOT_WHOLE``,
  ``CG_BAD_ARGUMENT``, ``CG_DIVISION_BY_ZERO``) and writes the value only
  when exact. The range is therefore: every intermediate within the type.
* ``javascript``: ``BigInt``, exact at any size; throws ``RangeError`` /
  ``TypeError``.

The expressions are printed by SymPy's code printers
(:mod:`sympy.printing.pycode`, :mod:`sympy.printing.numpy`,
:mod:`sympy.printing.c`, :mod:`sympy.printing.jscode`), subclassed for
integer semantics — never by editing formula text. This module plans the
program and picks the back-end (:mod:`.codegen_python`, :mod:`.codegen_c`,
:mod:`.codegen_js`); what they share is in :mod:`.codegen_program`.
"""

from __future__ import annotations

from typing import Sequence

from ..choices import CAUSAL, CONVENTION, PRECISION
from ..errors import CostgraphValueError
from ..numbers.integer_form import exact_parts
from .codegen_c import c_source
from .codegen_js import js_source
from .codegen_program import Function, Program, identifier
from .codegen_python import numpy_source, python_source

LANGUAGES = ("python", "numpy", "c", "javascript")

#: What each quantity means (README "What it computes"), for the generated docs.
MEANINGS = {
    "params": "parameters; each distinct weight once (a tied head adds nothing)",
    "params_active": "parameters each token passes through (a mixture's top-k experts)",
    "flops_forward": "forward FLOPs",
    "flops_backward": "backward FLOPs (input gradients + weight gradients)",
    "flops_backward_input": "backward FLOPs of the input gradients",
    "flops_backward_weight": "backward FLOPs of the weight gradients",
    "activation_bytes": "bytes of the tensors kept for the backward pass",
    "kv_cache_bytes": "bytes of the K/V cache (and recurrent state) for b sequences of s tokens",
    "kv_cache_bytes_per_token": "bytes of the K/V cache for one token of one sequence (windows not applied)",
}

CAUSAL_TEXT = {
    "full": "attention products over the full s x s square",
    "half": "causal attention products over the kept (query, key) pairs as an area (s^2/2)",
    "exact": "causal attention products over the kept (query, key) pairs, whole pairs (s(s+1)/2)",
}


def _conventions(model, costs) -> list[str]:
    from ..engine.conventions import FLOP_CONVENTIONS

    p = costs.precision
    opts = ", ".join(f"{k}={str(v).lower()}" for k, v in model.graph.options.items())
    return [
        f"FLOPs: '{costs.convention}' convention: {FLOP_CONVENTIONS[costs.convention]}",
        f"causal '{costs.causal}': {CAUSAL_TEXT[costs.causal]}",
        f"bytes: precision '{p.name}': activations {p.activation} B, dropout masks {p.mask} B, "
        f"token ids {p.index} B per element",
        f"activation profile '{model.settings.profile}'; dropout {'on' if model.settings.dropout else 'off'}"
        + (f"; options: {opts}" if opts else ""),
    ]


def plan(model, scopes: Sequence[str] = ("model",), *, quantities: Sequence[str] | None = None,
         convention: str = CONVENTION.default, precision: str = PRECISION.default, causal: str = CAUSAL.default,
         values: dict | None = None, command: str = "") -> Program:
    """The functions to generate for ``model`` (a :class:`costgraph.Model`):
    every quantity (or those named in ``quantities``) at every scope.

    ``values``: ``{Symbol or name: int}`` used as the arguments' defaults.

    Raises
    ------
    CostgraphValueError
        An unknown scope or quantity, two scopes with the same identifier,
        or a formula with no exact integer form.
    """
    from .printing import to_text
    from ..engine.totals import QUANTITIES
    from ..numbers.units import UNITS

    if not scopes:
        raise CostgraphValueError("no scope to generate code for", hint="--scope model (default), layer, ...")
    if quantities:
        unknown = [q for q in quantities if q not in QUANTITIES]
        if unknown:
            raise CostgraphValueError(f"unknown quantity {unknown[0]!r}", hint="quantities: " + ", ".join(QUANTITIES))
    order = list(model.symbols)
    functions, seen, conventions = [], {}, None
    for scope in dict.fromkeys(scopes):
        costs = model.costs(scope, convention=convention, precision=precision, causal=causal)
        conventions = conventions or _conventions(model, costs)
        sid = identifier(scope)
        if sid in seen:
            raise CostgraphValueError(f"scopes {seen[sid]!r} and {scope!r} would both be named {sid!r}",
                                      hint="generate them in two files")
        seen[sid] = scope
        for q, e in costs.quantities.items():
            if quantities and q not in quantities:
                continue
            num, den = exact_parts(e)
            used = {str(x) for x in e.free_symbols}
            args = tuple([d for d in order if d in used] + sorted(used - set(order)))
            functions.append(Function(f"{sid}_{q}", scope, q, UNITS[q], MEANINGS[q], e, num, den, args,
                                      to_text(costs.ordered(q))))
    symbols = {d: model.symbols.get(d, "") for d in order}
    for f in functions:
        for a in f.args:
            symbols.setdefault(a, "")
    defaults = {str(k): int(v) for k, v in (values or {}).items() if str(k) in symbols}
    return Program(model.name, identifier(model.name), symbols, defaults, conventions, functions, command)


def generate(program: Program, lang: str) -> str:
    """The source text of ``program`` in ``lang`` (one of :data:`LANGUAGES`)."""
    emit = _BACK_ENDS.get(lang)
    if emit is None:
        raise CostgraphValueError(f"unknown language {lang!r}", hint="choose one of: " + ", ".join(LANGUAGES))
    return emit(program)


_BACK_ENDS = {"python": python_source, "numpy": numpy_source, "c": c_source, "javascript": js_source}


__all__ = ["LANGUAGES", "Function", "Program", "plan", "generate"]
