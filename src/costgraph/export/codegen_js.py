"""JavaScript emitter of :mod:`costgraph.export.codegen`: exact ``BigInt``.

Each function takes one object of dimensions, ``fn({b: 1n, s: 2048n})``
(BigInt, or a Number that is a safe integer), with the configuration's
values as defaults; only the object's own properties are read (a dimension
named ``constructor`` or ``__proto__`` is never taken from
``Object.prototype``), and returns a ``BigInt``. It throws ``TypeError`` for a
missing or non-integer dimension, ``RangeError`` for a non-positive one or a
value that is not whole. The file works as a CommonJS module (Node:
``require``) and as a plain script (it then defines ``globalThis.<model>``).
"""

from __future__ import annotations

from sympy.printing.jscode import JavascriptCodePrinter

from ..errors import CostgraphValueError
from .printing import field_order
from .codegen_program import Program, comment_doc, header_lines, plain
from .codegen_printing import MinMaxAsCalls, NamedSymbols


class BigIntPrinter(NamedSymbols, MinMaxAsCalls, JavascriptCodePrinter):
    """BigInt arithmetic: integers as ``12n``, powers as ``x ** 2n``,
    ``cg_min``/``cg_max``/``cg_floordiv`` helpers (``Math.min`` and ``/``
    do not do what an exact integer formula needs)."""

    MIN_CALL, MAX_CALL = "cg_min", "cg_max"

    def _print_Integer(self, e):
        return f"{int(e)}n"

    def _print_Rational(self, e):
        raise ValueError(f"a fraction {e} in an integer formula")   # exact_parts leaves none

    def _print_Pow(self, e):
        if not (e.exp.is_Integer and e.exp >= 0):
            raise CostgraphValueError(f"power {e} in an integer formula")
        return f"({self._print(e.base)} ** {int(e.exp)}n)"

    def _print_cg_floordiv(self, e):
        n, d = e.args
        return f"cg_floordiv({self._print(n)}, {self._print(d)})"


HELPERS = r"""function cg_dim(name, value) {
  if (typeof value === "number" && Number.isSafeInteger(value)) value = BigInt(value);
  if (typeof value !== "bigint") {
    throw new TypeError(`${name} must be a whole number (BigInt or safe integer), got ${value === undefined ? "nothing" : typeof value}`);
  }
  if (value <= 0n) throw new RangeError(`${name} must be positive, got ${value}`);
  return value;
}

// the own properties of dims, in an object without a prototype: a dimension named
// constructor, toString or __proto__ is read from dims itself, never from Object.prototype
function cg_own(dims) {
  if (dims === null || typeof dims !== "object") {
    throw new TypeError(`the dimensions must be an object such as {b: 1n}, got ${dims === null ? "null" : typeof dims}`);
  }
  return Object.assign(Object.create(null), dims);
}

function cg_min(a, b) { return a < b ? a : b; }

function cg_max(a, b) { return a > b ? a : b; }

// floor(n / d), rounding towards minus infinity (BigInt's / truncates towards zero)
function cg_floordiv(n, d) {
  if (d === 0n) throw new RangeError("division by zero");
  const q = n / d;
  return (n % d !== 0n && ((n < 0n) !== (d < 0n))) ? q - 1n : q;
}

// n / d, which must be whole
function cg_exactdiv(n, d, what) {
  if (n % d !== 0n) throw new RangeError(`${what} is ${n}/${d} here, not a whole number: the sizes do not divide evenly`);
  return n / d;
}
"""


def js_source(program: Program, docs=None) -> str:
    """An ES2020 file (BigInt) of functions ``<scope>_<quantity>({dims})``; ``docs(function)``: whether a
    function gets its JSDoc block (None: every one; the calculator page leaves it out of its training and
    serving functions, whose closed forms it shows: :mod:`costgraph.export.web`)."""
    names = program.arg_names("javascript")
    pr = BigIntPrinter(names)
    out = ["/*"] + [(" * " + ln).rstrip() for ln in header_lines(program)]
    out += [" *", " * Every function takes one object of dimensions (BigInt, or Numbers that are safe",
            " * integers) and returns an exact BigInt; TypeError for a missing or non-integer",
            " * dimension, RangeError for a non-positive one or a value that is not whole.",
            " */", '"use strict";', "", "(function (root) {", ""]
    body = [HELPERS]
    for f in program.functions:
        if docs is None or docs(f):
            doc = comment_doc(program, f, names, lambda n, rename, meaning: f"@param {{bigint}} dims.{n}{rename} {meaning}",
                              indent="")
            doc.append("@returns {bigint}")
            body += ["/**"] + [(" * " + ln).rstrip() for ln in doc] + [" */"]
        params = ", ".join(f"{names[a]} = {program.defaults[a]}n" if a in program.defaults else names[a]
                           for a in f.args)
        body.append(f"function {f.name}(cg_dims = {{}}) {{")
        if f.args:   # own properties only: never Object.prototype's constructor, toString, __proto__, ...
            body.append(f"  let {{{params}}} = cg_own(cg_dims);")
        for a in f.args:
            body.append(f'  {names[a]} = cg_dim("{names[a]}", {names[a]});')
        num = pr.doprint(field_order(f.num, expanded=True))
        if f.den == 1:
            body.append(f"  return {num};")
        else:
            body.append(f'  return cg_exactdiv({num}, {pr.doprint(f.den)}, "{f.name}");')
        body += ["}", ""]
    body.append("const SYMBOLS = {")
    # computed keys: a literal `__proto__: ...` would set the prototype instead of a key
    body += [f"  [{_js_string(names[d])}]: {_js_string(plain(m))}," for d, m in program.symbols.items()]
    body += ["};", "", "const FUNCTIONS = {"]
    body += [f"  {_js_string(plain(f.scope) + '/' + f.quantity)}: {f.name}," for f in program.functions]
    body += ["};", ""]
    exports = ", ".join([f.name for f in program.functions] + ["SYMBOLS", "FUNCTIONS"])
    body += [f"const api = {{{exports}}};",
             'if (typeof module !== "undefined" && module.exports) module.exports = api;',
             f"else root.{program.ident} = api;"]
    out += [("  " + ln if ln else "") for b in body for ln in b.split("\n")]
    out += ["", '})(typeof globalThis !== "undefined" ? globalThis : this);']
    return "\n".join(out) + "\n"


def _js_string(text: str) -> str:
    """A double-quoted JavaScript string literal (JSON's escaping is valid JavaScript)."""
    import json

    return json.dumps(text)


__all__ = ["js_source", "BigIntPrinter"]
