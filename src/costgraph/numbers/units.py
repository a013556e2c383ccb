"""Numbers with units, for people.

* counts (parameters): SI prefixes, decimal — ``124.4 M`` (never binary
  prefixes on counts);
* FLOPs: SI prefixes — ``291.6 GFLOP`` (FLOPs, not MACs: 2 per multiply-add);
* bytes: both decimal and binary, each labelled — ``275.41 GB, 256.50 GiB``.

Below 1000 a number is shown once, exactly (``528``, ``80 bytes``).

Formatting is done by :mod:`humanize`; exact integers are always shown too.
"""

from __future__ import annotations

import re
from fractions import Fraction

import humanize

UNITS = {
    "params": "parameters",
    "params_active": "parameters",
    "flops_forward": "FLOP",
    "flops_backward": "FLOP",
    "flops_backward_input": "FLOP",
    "flops_backward_weight": "FLOP",
    "activation_bytes": "bytes",
    "kv_cache_bytes": "bytes",
    "kv_cache_bytes_per_token": "bytes",
}

#: How each quantity is labelled in tables and reports (an indented label is a
#: part of the line above it).
LABELS = {
    "params": "parameters",
    "params_active": "active parameters",
    "flops_forward": "forward FLOPs",
    "flops_backward": "backward FLOPs",
    "flops_backward_input": "  of which input gradients",
    "flops_backward_weight": "  of which weight gradients",
    "activation_bytes": "activation bytes",
    "kv_cache_bytes": "KV cache bytes",
    "kv_cache_bytes_per_token": "  per token",
}


def count(n: int) -> str:
    """``124439808`` → ``124.4 M`` (decimal SI prefix)."""
    return humanize.metric(n, precision=4).strip()


def flops(n: int) -> str:
    """``291648307200`` → ``291.6 GFLOP``; past the largest SI prefix humanize writes
    ``3.136 x 10⁴²`` and glues the unit on: the space before it is put back."""
    return re.sub(r"(10[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)FLOP$", r"\1 FLOP", humanize.metric(n, "FLOP", precision=4))


#: 1000 of the largest SI prefix (quetta, 10³⁰; humanize's last byte prefix Q, QiB = 2¹⁰⁰): from here
#: a prefixed figure would print float artefacts in dozens of digits, so scientific notation is used
PAST_PREFIXES = 1000 * 1000 ** 10


def nbytes(n: int) -> str:
    """``275414777856`` → ``275.41 GB, 256.50 GiB``: decimal and binary, both labelled; from
    :data:`PAST_PREFIXES` on, once in scientific notation: ``2.000 x 10³³ bytes``."""
    if abs(n) >= PAST_PREFIXES:
        return f"{humanize.scientific(n, precision=3)} bytes"
    return (f"{humanize.naturalsize(n, format='%.2f')}, "
            f"{humanize.naturalsize(n, binary=True, format='%.2f')}")


def decimal(x, places: int = 2) -> str:
    """A measured (float) figure with thousands separators and ``places`` decimals (``1,234.50``);
    from :data:`PAST_PREFIXES` on, scientific notation (``2.193 x 10⁹⁰``) rather than the float's
    binary artefacts written out in full; ``about 10^N`` beyond a float."""
    try:
        x = float(x)
    except OverflowError:
        return f"about 10^{len(str(abs(int(x)))) - 1}"
    return humanize.scientific(x, precision=3) if abs(x) >= PAST_PREFIXES else f"{x:,.{places}f}"


def _exact(x) -> Fraction:
    """``x`` (an int, a Fraction, a float, a SymPy number) as a Fraction, exactly."""
    if isinstance(x, (int, Fraction)):
        return Fraction(x)
    p, q = getattr(x, "p", None), getattr(x, "q", None)   # a SymPy Integer or Rational
    if isinstance(p, int) and isinstance(q, int):
        return Fraction(p, q)
    return Fraction(float(x))


def significant(x, digits: int = 4) -> str:
    """``x`` with ``digits`` significant digits in scientific notation, computed from the exact
    value (a float's binary expansion is never written out): ``5.000e-10``, ``9.313e+30``."""
    from decimal import Context, Decimal

    f = _exact(x)
    if f == 0:
        return "0"
    ctx = Context(prec=digits + 20)
    d = ctx.divide(Decimal(f.numerator), Decimal(f.denominator))
    return f"{d:.{digits - 1}e}"


def fixed(x, places: int = 2, digits: int = 4) -> str:
    """``x`` with thousands separators and ``places`` decimals (``1,234.50``) where a double holds
    every digit shown (below 10^(15 − places)) and where those decimals show a non-zero digit (at
    least 10^−places); elsewhere :func:`significant` (``5.000e-10``, ``9.313e+30``), from the
    exact value: no float noise past 16 digits, no ``0.0`` for a rate of 5e-10 (issue 30)."""
    f = _exact(x)
    if f == 0 or Fraction(1, 10 ** places) <= abs(f) < 10 ** (15 - places):
        return f"{float(f):,.{places}f}"
    return significant(f, digits)


def with_unit(quantity: str, n: int) -> str:
    """An exact integer with thousands separators, its unit, and (from 1000
    up) its human-readable form (a ``Fraction`` — the average layer of a layer
    pattern — as a mixed number and its decimal): ``124,439,808 (124.4 M)``,
    ``1,079,787,520 bytes (1.08 GB, 1.01 GiB)``, ``80 bytes``."""
    unit = UNITS[quantity]
    if isinstance(n, Fraction) and n.denominator != 1:   # an average layer of a layer pattern
        whole, rest = divmod(n.numerator, n.denominator)
        shown = f"{whole:,} {rest}/{n.denominator}"
        return (shown if unit == "parameters" else f"{shown} {unit}") + f" (average; ≈ {float(n):,.1f})"
    n = int(n)
    exact = f"{n:,}" if unit == "parameters" else f"{n:,} {unit}"
    if abs(n) < 1000:
        return exact
    try:
        human = {"parameters": count, "FLOP": flops, "bytes": nbytes}[unit](n)
    except OverflowError:   # beyond a float (over ~308 digits): the order of magnitude only
        human = f"about 10^{len(str(abs(n))) - 1}"
    return f"{exact} ({human})"
