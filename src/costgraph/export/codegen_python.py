"""Python and NumPy emitters of :mod:`costgraph.export.codegen`.

Python: exact integers; each function takes its dimensions by keyword,
checks they are positive whole numbers, evaluates ``num`` (and ``den``) in
Python integers and divides with a zero-remainder check.

NumPy: the same formulas over broadcast arrays; ``dtype="float64"``
(default) or ``"int64"`` (guarded against overflow by a bound on every
intermediate, as :func:`costgraph.numbers.evaluator.vectorized`).
"""

from __future__ import annotations

import sympy
from sympy.printing.numpy import NumPyPrinter
from sympy.printing.pycode import PythonCodePrinter

from .printing import field_order
from .codegen_program import Program, conventions_for, header_lines, plain, title, wrap
from .codegen_printing import MinMaxAsCalls, NamedSymbols

_SETTINGS = {"order": "none", "fully_qualified_modules": True}


class IntPythonPrinter(NamedSymbols, PythonCodePrinter):
    """Python integer arithmetic: ``min``/``max``, ``cg_floordiv`` as ``//``;
    symbols printed by the ``names`` map."""

    SETTINGS = _SETTINGS

    def _print_cg_floordiv(self, e):
        n, d = e.args
        return f"(({self._print(n)}) // ({self._print(d)}))"

    def _print_Rational(self, e):   # exact_parts leaves none; refuse rather than print a float
        if e.q != 1:
            raise ValueError(f"a fraction {e} in an integer formula")
        return str(e.p)


class IntNumPyPrinter(NamedSymbols, MinMaxAsCalls, NumPyPrinter):
    """NumPy: ``numpy.minimum``/``numpy.maximum`` (broadcasting, pairwise),
    ``cg_floordiv`` as ``numpy.floor_divide``."""

    MIN_CALL, MAX_CALL = "numpy.minimum", "numpy.maximum"

    SETTINGS = _SETTINGS

    def _print_cg_floordiv(self, e):
        n, d = e.args
        return f"numpy.floor_divide({self._print(n)}, {self._print(d)})"

    _print_Rational = IntPythonPrinter._print_Rational


def _bound(e: sympy.Expr) -> sympy.Expr:
    """A bound on the magnitude of every intermediate of ``e`` evaluated as
    printed (terms, then their sum): absolute values of coefficients, each
    Min/Max/floor-division replaced by the sum of its arguments' bounds (all
    factors are integers of magnitude ≥ 1, so a product's bound covers its
    factors'). As :func:`costgraph.numbers.evaluator._overflow_bound`."""
    from ..numbers.integer_form import cg_floordiv

    if e.is_Add:
        return sympy.Add(*[_bound(a) for a in e.args])
    if e.is_Mul:
        return sympy.Mul(*[_bound(a) for a in e.args])
    if e.is_Pow:
        return sympy.Pow(_bound(e.base), e.exp)
    if isinstance(e, (sympy.Min, sympy.Max, cg_floordiv)):
        return sympy.Add(*[_bound(a) for a in e.args])
    if e.is_Number:
        return abs(e)
    return e


def _doc(program: Program, f, names: dict[str, str], indent: str, numpy: bool) -> list[str]:
    lines = [title(f), ""]
    lines += wrap(f"= {f.formula}", indent="")
    if f.args:
        lines += ["", "Arguments (positive whole numbers" + (", or arrays of them, broadcast" if numpy else "") + "):"]
        for a in f.args:
            rename = f" (dimension {a})" if names[a] != a else ""
            lines += wrap(f"{names[a]}{rename}: {plain(program.symbols.get(a, '')) or '(no description)'}",
                          indent="  ")
    if numpy:
        lines += ["", "dtype: 'float64' (rounded to 53 bits) or 'int64' (exact; OverflowError if an",
                  "intermediate could reach 2**62)."]
    conv = conventions_for(program, f.quantity)
    if conv:
        lines += [""] + wrap(conv)
    out = [indent + '"""' + lines[0]]
    out += [(indent + ln) if ln else "" for ln in lines[1:]]
    out.append(indent + '"""')
    return out


def _signature(program: Program, f, names, numpy: bool) -> str:
    parts = []
    for a in f.args:
        d = program.defaults.get(a)
        parts.append(f"{names[a]}={d}" if d is not None else names[a])
    if numpy:
        # positional while no argument without a default follows one with a default (a partial
        # configuration); from that first default on, keyword-only
        has = [a in program.defaults for a in f.args]
        cut = next((i for i in range(len(has)) if has[i] and not all(has[i:])), len(has))
        parts = parts[:cut] + ["*"] + parts[cut:] + ['dtype="float64"'] if parts else ['dtype="float64"']
        return ", ".join(parts)
    return ", ".join(["*"] + parts) if parts else ""


def python_source(program: Program) -> str:
    """A self-contained Python module (no imports beyond the standard library)."""
    names = program.arg_names("python")
    pr = IntPythonPrinter(names)
    out = ['"""' + header_lines(program)[0]]
    out += [ln for ln in header_lines(program)[1:]]
    out += ["", "Every function returns an exact int (Python integers never overflow); it raises",
            "TypeError for an argument that is not an int, ValueError for one that is not",
            "positive, and ValueError if the value is not a whole number (sizes that do not",
            "divide evenly).", '"""', "", "import operator", "", ""]
    out += ["def _cg_dim(name, value):",
            '    """``value`` as a positive int (ints and integer types; not bool or float)."""',
            "    if isinstance(value, bool):",
            '        raise TypeError(f"{name} must be a whole number, not a bool")',
            "    try:",
            "        value = operator.index(value)",
            "    except TypeError:",
            '        raise TypeError(f"{name} must be a whole number, got {type(value).__name__}") from None',
            "    if value <= 0:",
            '        raise ValueError(f"{name} must be positive, got {value}")',
            "    return value", "", "",
            "def _cg_exact(num, den, what):",
            '    """num / den, which must be whole."""',
            "    q, r = divmod(num, den)",
            "    if r:",
            '        raise ValueError(f"{what} is {num}/{den} here, not a whole number: '
            'the sizes do not divide evenly")',
            "    return q", ""]
    for f in program.functions:
        out += ["", f"def {f.name}({_signature(program, f, names, False)}):"]
        out += _doc(program, f, names, "    ", False)
        for a in f.args:
            out.append(f"    {names[a]} = _cg_dim({a!r}, {names[a]})")
        num = pr.doprint(field_order(f.num, expanded=True))
        if f.den == 1:
            out.append(f"    return {num}")
        else:
            out.append(f"    return _cg_exact({num}, {pr.doprint(f.den)}, {f.name!r})")
        out.append("")
    out += _tables(program, names)
    return "\n".join(out) + "\n"


def _tables(program: Program, names) -> list[str]:
    out = ["", "#: dimension -> meaning", "SYMBOLS = {"]
    out += [f"    {d!r}: {plain(m)!r}," for d, m in program.symbols.items()]
    out += ["}", "", "#: dimension -> default value (from the configuration given to costgraph)", "DEFAULTS = {"]
    out += [f"    {d!r}: {v}," for d, v in program.defaults.items()]
    out += ["}", "", "#: (scope, quantity) -> function", "FUNCTIONS = {"]
    out += [f"    ({plain(f.scope)!r}, {f.quantity!r}): {f.name}," for f in program.functions]
    out += ["}", "", "#: (scope, quantity) -> unit", "UNITS = {"]
    out += [f"    ({plain(f.scope)!r}, {f.quantity!r}): {f.unit!r}," for f in program.functions]
    out += ["}"]
    return out


def numpy_source(program: Program) -> str:
    """A Python module using NumPy: functions of broadcast arrays."""
    names = program.arg_names("numpy")
    pr = IntNumPyPrinter(names)
    fnames = {a: f"_cg_f_{i}" for i, a in enumerate(program.symbols)}
    prf = IntNumPyPrinter(fnames)
    out = ['"""' + header_lines(program)[0]]
    out += header_lines(program)[1:]
    out += ["", "Every function takes arrays (or numbers) of positive whole numbers, broadcast together,",
            "and returns an array: dtype='float64' (default; rounded to 53 bits, as costgraph's",
            "Costs.compile) or 'int64' (exact; OverflowError when a bound on every intermediate,",
            "the sum of the terms' magnitudes, reaches 2**62, instead of wrapping around).",
            "ValueError: an argument that is not positive and whole, or a value that is not whole.",
            '"""', "", "import numpy", "", "",
            "def _cg_arrays(dtype, **arrays):",
            '    """The arguments as arrays of ``dtype``, broadcast together, checked whole and positive."""',
            '    if dtype not in ("float64", "int64"):',
            "        raise ValueError(f\"dtype must be 'float64' or 'int64', not {dtype!r}\")",
            "    out = []",
            "    for name, value in arrays.items():",
            "        a = numpy.asarray(value)",
            '        if a.dtype.kind not in "iu" and not (dtype == "float64" and a.dtype.kind == "f"',
            "                                               and numpy.all(numpy.isfinite(a)) and numpy.all(a == numpy.round(a))):",
            '            raise ValueError(f"{name} must be whole numbers, got dtype {a.dtype}")',
            "        if a.size and not numpy.all(a > 0):",
            '            raise ValueError(f"{name} must be positive")',
            "        out.append(a.astype(dtype))",
            "    return numpy.broadcast_arrays(*out)", "", "",
            "def _cg_guard(bound, what):",
            '    """Refuse an int64 evaluation whose intermediates could pass 2**62."""',
            "    if numpy.any(numpy.asarray(bound) >= 2.0 ** 62):",
            '        raise OverflowError(f"{what}: some intermediate could exceed the int64 range; '
            "use dtype='float64'\")", "", "",
            "def _cg_result(num, den, shape, dtype, what):",
            '    """num / den as an array of ``shape``: int64 must divide exactly."""',
            "    num = numpy.broadcast_to(numpy.asarray(num, dtype=dtype), shape)",
            '    if dtype == "float64":',
            "        return num / den if not (isinstance(den, int) and den == 1) else num.copy()",
            "    den = numpy.broadcast_to(numpy.asarray(den, dtype=dtype), shape)",
            "    q, r = numpy.divmod(num, den)",
            "    if numpy.any(r):",
            '        raise ValueError(f"{what} is not a whole number at some points: the sizes do not divide evenly")',
            "    return q", ""]
    for f in program.functions:
        out += ["", f"def {f.name}({_signature(program, f, names, True)}):"]
        out += _doc(program, f, names, "    ", True)
        kw = ", ".join(f"{names[a]}={names[a]}" for a in f.args)
        lhs = ", ".join(names[a] for a in f.args)
        if f.args:
            out.append(f"    {lhs}{',' if len(f.args) == 1 else ''} = _cg_arrays(dtype, {kw})")
            out.append(f"    shape = {names[f.args[0]]}.shape")
        else:
            out.append("    _cg_arrays(dtype)")
            out.append("    shape = ()")
        num = field_order(f.num, expanded=True)
        if f.args:
            out.append('    if dtype == "int64":')
            fl = ", ".join(fnames[a] for a in f.args)
            out.append(f"        {fl} = " + ", ".join(f"{names[a]}.astype(numpy.float64)" for a in f.args))
            bound = _bound(num) + (_bound(f.den) if f.den != 1 else 0)
            out.append(f"        _cg_guard({prf.doprint(bound)}, {f.name!r})")
        out.append(f"    return _cg_result({pr.doprint(num)}, {pr.doprint(f.den)}, shape, dtype, {f.name!r})")
        out.append("")
    out += _tables(program, names)
    return "\n".join(out) + "\n"


__all__ = ["python_source", "numpy_source", "IntPythonPrinter", "IntNumPyPrinter"]
