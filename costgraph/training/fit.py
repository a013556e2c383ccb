"""Does it fit? Device memory sizes, and the largest micro-batch or sequence
that fits, solved exactly over the integers.

Sizes: ``80GB`` (decimal, 10⁹ bytes), ``80GiB`` (binary, 2³⁰), ``141e9`` or
``85899345920`` (bytes); ``TB``/``TiB``, ``MB``/``MiB`` likewise.
"""

from __future__ import annotations

import re

import sympy

from ..errors import CostgraphValueError

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_SIZE = re.compile(r"^\s*([0-9]+)(?:\.([0-9]+))?(?:[eE]([0-9]{1,2}))?\s*([A-Za-z]*)\s*$")


def parse_size(text: str) -> int:
    """``"80GB"`` → 80,000,000,000; ``"80GiB"`` → 85,899,345,920 (exact; a
    fraction of a byte is refused).

    Raises
    ------
    CostgraphValueError
        Text that is not a size, or an unknown unit.
    """
    if not isinstance(text, str) or len(text) > 40:
        raise CostgraphValueError(f"cannot read the memory size {str(text)[:40]!r}",
                                  hint="write e.g. 80GB (10^9 bytes), 80GiB (2^30 bytes) or 141e9")
    m = _SIZE.match(text)
    if m and m.group(4).endswith("b") and m.group(4) not in ("b",):
        raise CostgraphValueError(f"the memory size {text!r} is in bits ('b'); write bytes",
                                  hint="e.g. 80GB (10^9 bytes) or 80GiB (2^30 bytes)")
    unit = m.group(4).upper() if m else None
    if not m or unit not in _UNITS:
        raise CostgraphValueError(f"cannot read the memory size {text!r}",
                                  hint="write e.g. 80GB (10^9 bytes), 80GiB (2^30 bytes) or 141e9")
    whole, frac, exp = m.group(1), m.group(2) or "", int(m.group(3) or 0)
    value = sympy.Rational(int(whole + frac), 10 ** len(frac)) * 10 ** exp * _UNITS[unit]
    if not value.is_integer or value <= 0:
        raise CostgraphValueError(f"the memory size {text!r} is not a positive whole number of bytes")
    return int(value)


def largest_fitting(total: sympy.Expr, symbol: sympy.Symbol, values: dict, capacity: int,
                    limit: int = 2**40) -> int | None:
    """The largest positive integer ``n`` with ``total(symbol = n) ≤ capacity``,
    the other symbols at ``values``; ``None`` when even 1 does not fit.

    Memory grows with the micro-batch and the sequence (every term has a
    non-negative coefficient in them), so the answer is found by doubling
    then bisection, each step an exact integer evaluation of the closed form.
    """
    rest = {k: v for k, v in values.items() if k != symbol}
    f = total.xreplace(rest)
    free = f.free_symbols - {symbol}
    if free:
        raise CostgraphValueError(f"no value for {', '.join(sorted(map(str, free)))}",
                                  hint="give every dimension but the one solved for")

    def fits(n: int) -> bool:
        return f.xreplace({symbol: sympy.Integer(n)}) <= capacity

    if not fits(1):
        return None
    lo, hi = 1, 2
    while hi <= limit and fits(hi):
        lo, hi = hi, hi * 2
    if hi > limit:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
