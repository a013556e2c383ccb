"""What every code generator back-end shares: the program to emit and its doc text.

:func:`costgraph.export.codegen.plan` builds a :class:`Program` (one
:class:`Function` per quantity and scope, each ``num/den`` in exact integer
form); the back-ends (:mod:`.codegen_python`, :mod:`.codegen_c`,
:mod:`.codegen_js`) print it, naming arguments with
:meth:`Program.arg_names` and writing the same header and doc text
(:func:`header_lines`, :func:`title`, :func:`comment_doc`,
:func:`conventions_for`), made safe inside any comment by :func:`plain`.
:mod:`costgraph.export.codegen` imports the back-ends; they import only this
module, never it.
"""

from __future__ import annotations

import keyword
import re
import textwrap
from dataclasses import dataclass, field

import sympy

from ..errors import CostgraphValueError, tidy

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# names a language reserves, or that the generated code itself uses
RESERVED = {
    "python": set(keyword.kwlist) | set(getattr(keyword, "softkwlist", ())) | {"min", "max"},
    "numpy": set(keyword.kwlist) | set(getattr(keyword, "softkwlist", ())) | {"numpy", "dtype", "shape"},
    "c": {"auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
          "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
          "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
          "volatile", "while", "_Bool", "_Complex", "_Imaginary", "bool", "true", "false", "int64_t",
          "uint64_t", "int32_t", "size_t", "NULL", "main", "printf", "pow", "fmin", "fmax",
          "linux", "unix", "i386"},     # the last three: GCC's GNU modes predefine them as macros
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
        """Dimension → argument name in ``lang``: the dimension's own name where
        it is safe (:func:`_unsafe`); else a reserved word gets a trailing ``_``
        (``in`` → ``in_``) and a name the generated code could clash with
        (``cg_…``, ``_cg…``, ``costgraph…`` in any case, C's ``__…``) gets
        ``dim_`` in front (``cg_x`` → ``dim_cg_x``); a name already taken then
        gets ``_2``, ``_3``, ... . Always terminates: every candidate from the
        second on ends in a digit, which no unsafe pattern matches, and at most
        ``len(taken)`` of them are taken."""
        if lang not in self.names:
            out: dict[str, str] = {}
            taken = set(self.symbols)          # a renaming never takes another dimension's own name
            for d in self.symbols:
                if not _IDENT.match(d):
                    raise CostgraphValueError(f"dimension name {d!r} is not an identifier")
                if not _unsafe(d, lang, self.ident):
                    out[d] = d
                    continue
                base = d + "_" if not _clashes(d, lang, self.ident) else "dim_" + d
                k, n = 1, base
                while _unsafe(n, lang, self.ident) or n in taken:
                    k += 1
                    n = f"{base}_{k}"
                out[d] = n
                taken.add(n)
            self.names[lang] = out
        return self.names[lang]


# prefixes (any case) of the names the generated code itself defines: cg_dim, _cg_exact, CG_OK, COSTGRAPH_*_H
_PREFIXES = ("cg_", "_cg", "costgraph")


def _clashes(name: str, lang: str, ident: str) -> bool:
    """Whether ``name`` could clash with a name the generated code defines,
    whatever is appended to it: the generator's prefixes, and in C names the
    implementation reserves (``__x``, ``_X``), ``<T>_t`` / ``<X>_MAX`` /
    ``<X>_MIN`` of the standard headers and the ``<MODEL>_DEFAULT_`` macros."""
    low = name.lower()
    if low.startswith(_PREFIXES):
        return True
    if lang == "c":
        return (name.startswith("__") or (name[0] == "_" and name[1:2].isupper())
                or name.startswith(f"{ident.upper()}_DEFAULT_") or name.endswith(("_t", "_MAX", "_MIN")))
    return False


def _unsafe(name: str, lang: str, ident: str) -> bool:
    """Whether ``name`` cannot be an argument in ``lang`` as it is."""
    return name in RESERVED[lang] or _clashes(name, lang, ident)


def identifier(text: str) -> str:
    """``layers/attn`` → ``layers_attn``; a leading digit gets ``_``."""
    out = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return "_" + out if not out or out[0].isdigit() else out


def plain(text: str) -> str:
    """Text from a model file as one line safe inside any comment or
    docstring of the generated code: whitespace runs become one space,
    invisible characters are escaped, backslashes become ``/``, a space
    goes between every ``/`` and ``*`` that touch (no ``/*`` or ``*/``: C's
    ``-Wcomment`` and every block comment's end), ``??`` becomes ``? ?``
    (C trigraphs such as ``??/``) and three double quotes become three
    single quotes (a Python docstring's end)."""
    text = tidy(" ".join(str(text).split())).replace("\\", "/")
    text = _COMMENT_MARK.sub(r"\g<0> ", text)
    while "??" in text:
        text = text.replace("??", "? ?")
    return text.replace('"""', "'''")


_COMMENT_MARK = re.compile(r"/(?=\*)|\*(?=/)")   # a / before a *, or a * before a /


def wrap(text: str, width: int = 88, indent: str = "") -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + "    ",
                         break_on_hyphens=False) or [indent]


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
    doc = [title(f)] + wrap(f"= {plain(f.formula)}")
    conv = conventions_for(program, f.quantity)
    if conv:
        doc += wrap(conv)
    for a in f.args:
        rename = f" (dimension {a})" if names[a] != a else ""
        doc += wrap(arg_line(names[a], rename, plain(program.symbols.get(a, ""))), indent=indent)
    return doc


def header_lines(program: Program) -> list[str]:
    """The common header text (one line each, safe for comments)."""
    from ..version import __version__

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
