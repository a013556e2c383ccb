"""Leading terms of a closed form when some dimensions dominate ("h ≫ s").

``leading(Q, [h, s])`` keeps the terms of ``Q`` (expanded) whose degree
vector in the named symbols is largest in lexicographic order: first the
highest power of ``h``, among those the highest power of ``s``. So for
GPT's layer FLOPs ``24 b s h² + 4 b s² h``, ``h ≫ s`` gives ``24 b s h²``
(Kaplan et al. 2020's ``C ≈ 6N`` regime: the parameter matmuls) and
``s ≫ h`` gives ``4 b s² h`` (attention scores dominate long contexts). The
relative size of what is dropped, ``(Q − lead)/lead``, comes with it.

Terms inside ``Min``/``Max``/``floor`` are treated as constants when the
dominant symbols do not occur in them; otherwise the expansion is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..errors import CostgraphValueError


@dataclass(frozen=True)
class Leading:
    """``lead``: the leading terms; ``rest``: ``Q − lead``; ``ratio``: ``rest/lead`` cancelled."""

    order: tuple[sympy.Symbol, ...]
    lead: sympy.Expr
    rest: sympy.Expr
    ratio: sympy.Expr


def leading(expr: sympy.Expr, order: list[sympy.Symbol]) -> Leading:
    """The leading terms of ``expr`` when ``order[0] ≫ order[1] ≫ …`` (each ≫ 1).

    Raises
    ------
    CostgraphValueError
        An empty order, or a dominant symbol inside ``Min``/``Max``/``floor``.
    """
    if not order:
        raise CostgraphValueError("name at least one dominant dimension", hint="e.g. --large h")
    if len(set(order)) != len(order):
        raise CostgraphValueError("a dominant dimension is named twice", hint="e.g. --large s h")
    e = sympy.expand(expr)
    terms = e.args if e.is_Add else (e,)
    for t in terms:
        for f in t.atoms(sympy.Min, sympy.Max, sympy.floor, sympy.ceiling):
            if f.free_symbols & set(order):
                if isinstance(f, (sympy.Min, sympy.Max)):
                    raise CostgraphValueError(f"{', '.join(map(str, order))} occurs inside {f.func.__name__}: "
                                              "its leading term depends on which argument wins",
                                              hint="substitute a value for the other argument first (--set)")
                raise CostgraphValueError(f"{', '.join(map(str, order))} occurs inside {f.func.__name__} ({f}): "
                                          "a layer pattern's count, not a power of it",
                                          hint="take the leading terms in another dimension, or --set it")

    def degrees(t):
        powers = t.as_powers_dict()
        return tuple(int(powers.get(x, 0)) for x in order)

    top = max(degrees(t) for t in terms)
    lead = sympy.Add(*[t for t in terms if degrees(t) == top])
    rest = sympy.expand(e - lead)
    return Leading(tuple(order), lead, rest, sympy.cancel(rest / lead) if rest != 0 else sympy.Integer(0))
