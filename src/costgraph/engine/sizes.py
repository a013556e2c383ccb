"""Sizes that come out wrong, worded in the model's own names: a derived dimension ``A − B``
that is not positive names its parts (``t = s − ni (text tokens)``) and says which must be larger
(``s must be more than ni = 576 (image tokens)``), rather than printing the expanded expression
(``-image**2/p**2 + s``). Read by :meth:`costgraph.model.Model.values`' located size errors."""

from __future__ import annotations

import sympy


def named_difference(dims: dict, d, subs):
    """``(text, hint)`` for a size ``d`` that is a derived dimension ``A − B`` come out ≤ 0, in the
    model's names: ``t = s − ni (text tokens)`` and ``s must be more than ni = 576 (image tokens)``
    (a VLM's prompt shorter than its image tokens, issue 30); ``("", "")`` when ``d`` is no
    derived dimension, or no difference of named parts."""
    own = next((i for i in dims.values() if i.derived is not None and sympy.expand(i.derived - d) == 0), None)
    if own is None:
        return "", ""
    plus = sympy.Add(*[t for t in sympy.Add.make_args(sympy.expand(d)) if not t.could_extract_minus_sign()])
    minus = sympy.expand(plus - d)
    if plus == 0 or minus == 0:
        return "", ""
    def name(e):
        hit = next((i for i in dims.values() if sympy.expand((i.derived if i.derived is not None else i.symbol) - e)
                    == 0), None)
        return (hit.name, hit.meaning) if hit else (str(e), "")
    (p_name, _), (m_name, m_meaning) = name(plus), name(minus)
    text = f"{own.name} = {p_name} − {m_name}" + (f" ({own.meaning})" if own.meaning else "")
    need = f"{p_name} must be more than {m_name} = {minus.xreplace(subs)}" + (f" ({m_meaning})" if m_meaning else "")
    return text, need


__all__ = ["named_difference"]
