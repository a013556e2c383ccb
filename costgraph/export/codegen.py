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
each formula is rewritten by :func:`costgraph.integer_form.exact_parts`
as ``num / den`` in integer operations only; the code computes both in the
target's integers and divides once, checking the remainder is zero.

* ``python``: Python integers, exact at any size; a remainder or a
  non-positive / non-integer argument raises ``ValueError``/``TypeError``.
* ``numpy``: arrays (broadcast), ``dtype="float64"`` (rounded to 53 bits, as
  :meth:`costgraph.Costs.compile`) or ``"int64"`` (exact; refuses with
  ``OverflowError`` when a bound on every intermediate — the sum of the
  terms' magnitudes — reaches 2⁶², as :func:`costgraph.evaluator.vectorized`).
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
integer semantics — never by editing formula text.
"""

from __future__ import annotations

import keyword
import re
import textwrap
from dataclasses import dataclass, field
from typing import Sequence

import sympy

from ..choices import CAUSAL, CONVENTION, PRECISION
from ..errors import CostgraphValueError, tidy
from ..integer_form import exact_parts

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

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# names a language reserves, or that the generated code itself uses
RESERVED = {
    "python": set(keyword.kwlist) | set(getattr(keyword, "softkwlist", ())) | {"min", "max"},
    "numpy": set(keyword.kwlist) | set(getattr(keyword, "softkwlist", ())) | {"numpy", "dtype", "shape"},
    "c": {"auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
          "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
          "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
          "volatile", "while", "_Bool", "_Complex", "_Imaginary", "bool", "true", "false", "int64_t",
          "uint64_t", "int32_t", "size_t", "NULL", "main", "printf", "pow", "fmin", "fmax"},
    "javascript": {"break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete",
                   "do", "else", "enum", "export", "extends", "false", "finally", "for", "function", "if",
                   "import", "in", "instanceof", "new", "null", "return", "super", "switch", "this", "throw",
                   "true", "try", "typeof", "var", "void", "while", "with", "yield", "let", "static",
                   "implements", "interface", "package", "private", "protected", "public", "await",
                   "arguments", "eval", "undefined", "NaN", "Infinity", "BigInt", "Number", "Math",
                   "TypeError", "RangeError", "module", "exports", "require", "globalThis", "Object"},
}


@dataclass(frozen=True)
class Function:
    """One generated function: ``quantity`` at ``scope``, ``num/den`` exactly."""

    name: str                     # identifier, e.g. model_flops_forward (C adds the model prefix)
    scope: str
    quantity: str
    unit: str
    meaning: str
    expr: sympy.Expr
    num: sympy.Expr
    den: sympy.Expr
    args: tuple[str, ...]         # dimension names, in the model's order
    formula: str                  # plain text, field order


@dataclass
class Program:
    """Everything a language emitter needs (built by :func:`plan`)."""

    model: str                    # the model's name
    ident: str                    # the model's name as an identifier (C prefix)
    symbols: dict[str, str]       # dimension → meaning, in the model's order
    defaults: dict[str, int]      # dimension → value (from --config/--set), possibly empty
    conventions: list[str]        # lines describing how the formulas were derived
    functions: list[Function]
    command: str                  # how to regenerate
    names: dict[str, dict[str, str]] = field(default_factory=dict)   # language → dim → argument name

    def arg_names(self, lang: str) -> dict[str, str]:
        """Dimension → argument name in ``lang`` (a reserved word gets a trailing ``_``)."""
        if lang not in self.names:
            reserved = RESERVED[lang]
            out, used = {}, set()
            for d in self.symbols:
                if not _IDENT.match(d):
                    raise CostgraphValueError(f"dimension name {d!r} is not an identifier")
                n = d
                while n in reserved or n.lower().startswith(("cg_", "_cg")) or n in used:
                    n += "_"
                out[d] = n
                used.add(n)
            self.names[lang] = out
        return self.names[lang]


def identifier(text: str) -> str:
    """``layers/attn`` → ``layers_attn``; a leading digit gets ``_``."""
    out = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return "_" + out if not out or out[0].isdigit() else out


def plain(text: str) -> str:
    """Text from a model file as one line safe inside any comment or
    docstring: whitespace runs become one space, invisible characters are
    escaped, and comment/docstring closers are broken (``*/``, ``\"\"\"``,
    backslashes)."""
    text = tidy(" ".join(str(text).split()))
    return text.replace("\\", "/").replace("*/", "* /").replace('"""', "'''")


def wrap(text: str, width: int = 88, indent: str = "") -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + "    ",
                         break_on_hyphens=False) or [indent]


def _conventions(model, costs) -> list[str]:
    from ..conventions import FLOP_CONVENTIONS

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
    from ..printing import to_text
    from ..totals import QUANTITIES
    from ..units import UNITS

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
    if lang == "python":
        from .codegen_python import python_source
        return python_source(program)
    if lang == "numpy":
        from .codegen_python import numpy_source
        return numpy_source(program)
    if lang == "c":
        from .codegen_c import c_source
        return c_source(program)
    if lang == "javascript":
        from .codegen_js import js_source
        return js_source(program)
    raise CostgraphValueError(f"unknown language {lang!r}", hint="choose one of: " + ", ".join(LANGUAGES))


def conventions_for(program: Program, quantity: str) -> str:
    """The conventions a quantity depends on, as one sentence ('' for parameter counts)."""
    c = program.conventions
    pick = (c[0:2] if quantity.startswith("flops") else c[2:4] if quantity == "activation_bytes"
            else c[2:3] if quantity.startswith("kv_cache") else [])
    return ("Conventions: " + "; ".join(plain(x) for x in pick) + ".") if pick else ""


def title(f) -> str:
    """A generated function's first doc line: its meaning, scope and unit."""
    return f"{plain(f.meaning)[:1].upper()}{plain(f.meaning)[1:]}, scope '{plain(f.scope)}' ({f.unit})."


def comment_doc(program: Program, f, names: dict[str, str], arg_line, indent: str = "  ") -> list[str]:
    """The lines of a C or JavaScript block comment of ``f``: :func:`title`, ``= formula``, the
    conventions, then ``arg_line(name, rename, meaning)`` per argument (``rename``: `` (dimension
    x)`` when the language's name differs from the dimension's)."""
    doc = [title(f)] + wrap(f"= {f.formula}")
    conv = conventions_for(program, f.quantity)
    if conv:
        doc += wrap(conv)
    for a in f.args:
        rename = f" (dimension {a})" if names[a] != a else ""
        doc += wrap(arg_line(names[a], rename, plain(program.symbols.get(a, ""))), indent=indent)
    return doc


def header_lines(program: Program) -> list[str]:
    """The common header text (one line each, safe for comments)."""
    from .. import __version__

    out = [f"Cost formulas of model '{plain(program.model)}', generated by costgraph {__version__}.",
           "Do not edit; regenerate with:",
           f"  {plain(program.command)}" if program.command else "  costgraph codegen ...",
           "",
           "Conventions:"]
    out += [ln for c in program.conventions for ln in wrap(plain(c), indent="  ")]
    out += ["", "Dimensions (positive whole numbers):"]
    for d, meaning in program.symbols.items():
        default = f" [default {program.defaults[d]}]" if d in program.defaults else ""
        out.append(f"  {d}: {plain(meaning) or '(no description)'}{default}")
    return out


__all__ = ["LANGUAGES", "Function", "Program", "plan", "generate"]
