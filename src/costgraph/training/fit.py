"""Does it fit? Device memory sizes, and the largest micro-batch or sequence
that fits, solved exactly over the integers.

Sizes: ``80GB`` (decimal, 10⁹ bytes), ``80GiB`` (binary, 2³⁰), ``141e9`` or
``85899345920`` (bytes); ``TB``/``TiB``, ``MB``/``MiB`` likewise.
"""

from __future__ import annotations

import re

import sympy

from ..arguments import ascii_number
from ..errors import CostgraphValueError
from .result_parts import FitChange

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_SIZE = re.compile(r"^\s*([0-9]+)(?:\.([0-9]+))?(?:[eE]([0-9]{1,2}))?\s*([A-Za-z]*)\s*$")


def parse_size(text: str, *, what: str = "the memory size", floor: bool = False, minimum: int = 1) -> int:
    """``"80GB"`` → 80,000,000,000; ``"80GiB"`` → 85,899,345,920 (exact; a
    fraction of a byte is refused, or floored with ``floor=True``, as a size a log printed
    rounded: ``"6.51GiB"`` → 6,990,059,274). ``what`` names the size in errors; ``minimum``
    the fewest bytes taken (0 for a size that may be none).

    Raises
    ------
    CostgraphValueError
        Text that is not a size, an unknown unit, fewer than ``minimum`` bytes.
    """
    if not isinstance(text, str) or len(text) > 40:
        raise CostgraphValueError(f"cannot read {what} {str(text)[:40]!r}",
                                  hint="write e.g. 80GB (10^9 bytes), 80GiB (2^30 bytes) or 141e9")
    ascii_number(text, what)
    m = _SIZE.match(text.replace("_", ""))   # '_' only as a thousands separator here (ascii_number): 80_000MB
    if m and m.group(4).endswith("b") and m.group(4) not in ("b",):
        raise CostgraphValueError(f"{what} {text!r} is in bits ('b'); write bytes",
                                  hint="e.g. 80GB (10^9 bytes) or 80GiB (2^30 bytes)")
    unit = m.group(4).upper() if m else None
    if not m or unit not in _UNITS:
        raise CostgraphValueError(f"cannot read {what} {text!r}",
                                  hint="write e.g. 80GB (10^9 bytes), 80GiB (2^30 bytes) or 141e9")
    whole, frac, exp = m.group(1), m.group(2) or "", int(m.group(3) or 0)
    value = sympy.Rational(int(whole + frac), 10 ** len(frac)) * 10 ** exp * _UNITS[unit]
    value = sympy.floor(value) if floor else value
    if not value.is_integer or value < minimum:
        raise CostgraphValueError(f"{what} {text!r} is not a whole number of bytes of at least {minimum}",
                                  hint="write e.g. 80GB (10^9 bytes), 80GiB (2^30 bytes) or 141e9")
    return int(value)


def memory_size(value, what: str = "--memory") -> tuple[int, bool]:
    """A device (or host) memory size as every command reads it: an int of bytes as is, text
    (``"80GB"``, ``"80GiB"``, ``"141e9"``) floored to whole bytes as ``--kv-memory`` is (a size a
    log printed rounded: ``"23.58GiB"`` → 25,318,832,209 bytes, 23.58 × 2³⁰ = 25,318,832,209.92;
    issue 29). Returns ``(bytes, floored)``: ``floored`` says a fraction of a byte was dropped,
    for the command to say so.

    Raises
    ------
    CostgraphValueError
        Text that is not a size, a size below one byte, a value that is neither text nor an int."""
    from ..arguments import whole

    if not isinstance(value, str):
        return whole(value, what), False
    n = parse_size(value, what=what, floor=True)
    m = _SIZE.match(value.replace("_", ""))
    whole_bytes = sympy.Rational(int(m.group(1) + (m.group(2) or "")), 10 ** len(m.group(2) or "")) \
        * 10 ** int(m.group(3) or 0) * _UNITS[m.group(4).upper()]
    return n, whole_bytes != n


def floored_note(text: str, n: int, what: str = "--memory") -> str:
    """The note a command prints when :func:`memory_size` floored ``text`` to ``n`` bytes."""
    return f"{what} {text.strip()} is {n:,} bytes, floored to whole bytes (as --kv-memory is)"


_FRACTION = re.compile(r"^\s*(0|1|0?\.[0-9]{1,12}|1\.0*)\s*$")
#: a number with no unit (``--reserve 2`` or ``2.0``: not a fraction below 1; bytes only when given as an int)
_BARE = re.compile(r"^\s*[0-9][0-9_]*(\.[0-9]*)?([eE][+-]?[0-9]+)?\s*$")


def reserve_fraction(reserve) -> sympy.Rational | None:
    """The share of a device's memory ``reserve`` keeps free when it is a fraction (``"0.1"``, ``0.1``), read
    exactly as :func:`reserve_bytes` reads it; None when it is no fraction (a size, an int of bytes, other text:
    :func:`reserve_bytes` says what it takes).

    >>> reserve_fraction("0.1"), reserve_fraction("8GB")
    (1/10, None)

    Raises
    ------
    CostgraphValueError
        A fraction of 1 or more: it keeps the whole device memory free."""
    if isinstance(reserve, float) and not isinstance(reserve, bool):
        reserve = repr(reserve)
    if not (isinstance(reserve, str) and _FRACTION.match(reserve)):
        return None
    q = sympy.Rational(reserve.strip())
    if q >= 1:
        raise CostgraphValueError(f"--reserve {reserve.strip()} keeps the whole device memory free",
                                  hint="a fraction below 1 (0.1) or a size below the device memory")
    return q


def reserve_bytes(reserve, capacity: int) -> int:
    """The bytes a fit verdict keeps free on a device of ``capacity`` bytes: ``reserve`` a
    fraction of it in [0, 1) (``0.1``, ``"0.1"``; rounded up to a byte), or a size (``"8GB"``,
    an int of bytes above 1). ``None``: :data:`costgraph.choices.DEFAULT_RESERVE`.

    >>> reserve_bytes("0.1", 80_000_000_000), reserve_bytes("8GiB", 80_000_000_000), reserve_bytes(0, 80)
    (8000000000, 8589934592, 0)

    Raises
    ------
    CostgraphValueError
        Text that is neither a fraction nor a size (a number without a unit above 1, such as ``"2"`` or
        ``"5e9"``: a size needs its unit), or a reserve of the whole device or more.
    """
    from ..choices import DEFAULT_RESERVE, RUNTIME_RESERVE

    reserve = DEFAULT_RESERVE if reserve is None else reserve
    if reserve == RUNTIME_RESERVE:   # train's and fit's (costgraph.training.api.training_fits): it needs the layout
        raise CostgraphValueError(f"--reserve {RUNTIME_RESERVE} depends on a layout's parallel groups: train, fit and "
                                  "plan count it per layout (costgraph.runtime_memory.training_reserve), not as bytes "
                                  "of a device alone", hint=f"--reserve {DEFAULT_RESERVE} or a size (8GB) for a fixed "
                                  "reserve; `costgraph train` on a layout lists its runtime reserve's parts")
    if isinstance(reserve, bool):
        raise CostgraphValueError(f"--reserve must be a fraction or a size, got {reserve!r}",
                                  hint="a fraction of the device memory below 1 (0.1), a size with its unit ('8GiB'), "
                                       f"bytes as an int, or '{RUNTIME_RESERVE}' (train, fit, plan)")
    ascii_number(reserve, "--reserve")
    if isinstance(reserve, float):
        reserve = repr(reserve)
    if isinstance(reserve, str) and _BARE.match(reserve) and not _FRACTION.match(reserve):
        q = sympy.Rational(reserve.strip().replace("_", ""))
        if q < 1:   # 1e-1 is a fraction, in a form the reserve's rule does not read (it said "neither a fraction")
            raise CostgraphValueError(f"--reserve {reserve.strip()[:40]}: a fraction is written as a decimal",
                                      hint=f"--reserve {float(q):g}" if q.q < 10**12 else "e.g. --reserve 0.1")
        raise CostgraphValueError(f"--reserve {reserve.strip()[:40]}: a number without a unit is neither a fraction "
                                  "below 1 nor a size", hint="a fraction of the device memory (0.1) or a size with "
                                  "its unit (8GB, 8GiB)")
    if isinstance(reserve, int):
        out = reserve if reserve > 1 else reserve * capacity
    elif (q := reserve_fraction(reserve)) is not None:
        out = int(sympy.ceiling(q * capacity))
    else:
        try:
            out = parse_size(reserve, what="--reserve", minimum=0) if isinstance(reserve, str) else None
        except CostgraphValueError:   # said below, with both forms the reserve takes
            out = None
    if out is None or out < 0:
        raise CostgraphValueError(f"cannot read --reserve {str(reserve)[:40]!r}",
                                  hint="a fraction of the device memory (0.1) or a size (8GB, 8GiB)")
    if out >= capacity:
        raise CostgraphValueError(f"--reserve {reserve} keeps the whole device memory ({capacity:,} bytes) free",
                                  hint="a fraction below 1 (0.1) or a size below the device memory")
    return int(out)


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


#: the order of the recomputation policies, least memory last
_RECOMPUTE_ORDER = ("none", "selective", "full")


def fit_changes(model, layout, values: dict, usable: int) -> list[FitChange]:
    """What would make a layout that does not fit fit: one change at a time, each
    the peak of the most-loaded device (bytes, exact, :func:`costgraph.training.memory.training_memory`
    as ``costgraph train`` computes it) and whether it is at most ``usable`` bytes (the device
    memory less the reserve). ``layout``: the filled :class:`~costgraph.parallel.layout.Layout`;
    ``values``: every dimension (symbol → int).

    The changes tried (a change that leaves the peak as it is, or that the model does not
    divide into, is left out): a heavier recomputation (``selective``, ``full``); the next
    ZeRO stage (it shards over the DP × CP group: nothing when that group is one device);
    the micro-batch ``b`` halved down to 1; twice the TP degree, then twice the pipeline
    stages, on the same devices (``d`` halved) when ``d`` is even, else on twice the devices;
    twice the devices (``d`` doubled, with ZeRO ≥ 1). Returns :class:`~costgraph.training.result_parts.FitChange` s
    (``change``, ``options``, ``peak_bytes``, ``fits``; read also as the dicts they were; ``options``: the
    ``costgraph train`` flags that make the change)."""
    import dataclasses

    from ..errors import CostgraphValueError
    from .memory import training_memory
    from .validity import check_layout

    cg, L = model.graph, layout
    out = []

    def attempt(change, options, new_layout, new_values=values):
        try:
            filled = new_layout.filled()
            check_layout(cg, filled, new_values)
            total = training_memory(cg, filled).most_loaded(new_values).memory["total"]
        except CostgraphValueError:
            return
        total = total.xreplace(new_values)
        if not total.is_number:   # a change that needs a value the job does not give (ZeRO without --gpus: N_d)
            return
        peak = int(sympy.ceiling(total))
        out.append(FitChange(change, options, peak, peak <= usable))

    # heavier policies than the layout's; a named other policy (torchtitan's, Korthikanti's count): full
    start = _RECOMPUTE_ORDER.index(L.recompute) + 1 if L.recompute in _RECOMPUTE_ORDER else len(_RECOMPUTE_ORDER) - 1
    for r in _RECOMPUTE_ORDER[start:]:
        attempt(f"recompute {r}", f"--recompute {r}", dataclasses.replace(L, recompute=r))
    if L.zero < 3:
        attempt(f"ZeRO {L.zero + 1}", f"--zero {L.zero + 1}", dataclasses.replace(L, zero=L.zero + 1))
    b = model.graph.dims.get("b")
    if b is not None and b.derived is None and int(values.get(b.symbol, 1)) > 1:
        smaller = {**values, b.symbol: sympy.Integer(max(1, int(values[b.symbol]) // 2))}
        attempt(f"micro-batch b = {smaller[b.symbol]}", f"--set b={smaller[b.symbol]}", L, smaller)
    d = L.d if isinstance(L.d, int) else None
    if L.gpus is not None and d is not None:
        for name, flag in (("t", "--tp"), ("p", "--pp")):
            k = getattr(L, name) * 2
            gpus = L.gpus if d % 2 == 0 else L.gpus * 2
            what = f"{flag[2:].upper()} {k}" + ("" if gpus == L.gpus else f" on {gpus} devices")
            m = {} if name != "p" or L.m != L.p else {"m": k}   # m defaulted to p: keep it p
            attempt(what, f"{flag} {k}" + ("" if gpus == L.gpus else f" --gpus {gpus}"),
                    dataclasses.replace(L, gpus=gpus, d=None, **{name: k}, **m))
        if L.zero >= 1:
            attempt(f"{L.gpus * 2} devices (dp {d * 2})", f"--gpus {L.gpus * 2}",
                    dataclasses.replace(L, gpus=L.gpus * 2, d=None))
    before = training_memory(cg, L).most_loaded(values).memory["total"]
    peak = int(sympy.ceiling(before.xreplace(values)))
    return [c for c in out if c.peak_bytes != peak]
