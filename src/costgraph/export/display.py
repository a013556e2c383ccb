"""How the API's typed results show in a notebook: the one mixin, :class:`~costgraph.results.Tabular`,
gives each result ``_repr_html_``, ``_repr_latex_`` and ``_repr_pretty_`` (IPython's text) (one table,
Jupyter picks the richest) and ``to_pandas()``, all drawn by the renderers of this module from the one
:class:`~costgraph.results.Table` its ``_table()`` returns.

A cell is plain (text, a whole number, a float, a yes/no) or a :class:`Q`, a number with its unit.
Shown: whole numbers exactly with thousands separators (``248,879,616 bytes``); seconds as decimal
seconds (``0.0144617 s``), never a fraction; other floats with six significant digits. In
``to_pandas()`` a :class:`Q` column gives its numbers (exact ints stay Python ints, rationals become
floats) and a ``unit`` column beside it.

Light at import (standard library only); pandas is imported by ``to_pandas`` alone, an optional
extra (``pip install costgraph[notebook]``).
"""

from __future__ import annotations

import math
from fractions import Fraction
from html import escape

from ..errors import CostgraphValueError
from ..result_fields import Q, Table   # noqa: F401 - the cells and the table (re-exported)
from ..results import Tabular   # noqa: F401 - the results' mixin (re-exported)

_STYLE = "border-collapse:collapse;text-align:left"


def _number(v):
    """``v`` as a Python int when whole and exact, else a float (SymPy numbers and Fractions too)."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return v
    if isinstance(v, Fraction):
        return v.numerator if v.denominator == 1 else float(v)
    if getattr(v, "is_Integer", False):
        return int(v)
    if getattr(v, "is_number", False):
        return float(v)
    return v


def seconds_text(v) -> str:
    """Seconds as a decimal with 6 significant digits and no exponent: ``0.0144617 s``."""
    v = float(v)
    if v == 0 or not math.isfinite(v):
        return f"{v:g} s"
    places = max(0, 5 - math.floor(math.log10(abs(v))))
    return f"{v:.{places}f}".rstrip("0").rstrip(".") + " s"


def cell_text(c) -> str:
    """A cell as the tables show it (module docstring)."""
    if isinstance(c, Q):
        if c.unit == "s" and c.value is not None and not isinstance(c.value, str):
            return seconds_text(_number(c.value))
        text = cell_text(c.value)
        return f"{text} {c.unit}" if c.unit and c.value is not None and not isinstance(c.value, str) else text
    c = _number(c)
    if c is None:
        return "—"
    if isinstance(c, bool):
        return "yes" if c else "no"
    if isinstance(c, int):
        return f"{c:,}"
    if isinstance(c, float):
        return f"{c:.6g}"
    return str(c)


def html(t: Table) -> str:
    """``t`` as an HTML table with a caption (text escaped)."""
    out = [f'<table style="{_STYLE}"><caption style="text-align:left"><b>{escape(t.title)}</b></caption>']
    if t.heads:
        out.append("<tr>" + "".join(f"<th>{escape(str(h))}</th>" for h in t.heads) + "</tr>")
    for row in t.rows:
        out.append("<tr>" + "".join(f"<td>{escape(cell_text(c))}</td>" for c in row) + "</tr>")
    return "".join(out) + "</table>"


def text(t: Table) -> str:
    """``t`` as plain text: the title, then the columns aligned (what IPython prints as text/plain)."""
    cells = [[str(h) for h in t.heads]] + [[cell_text(c) for c in row] for row in t.rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))] if cells[0] else []
    lines = [t.title] + ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def tex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (``_`` → ``\\_``)."""
    return "".join(_TEX.get(ch, ch) for ch in text)


def _text(s: str) -> str:
    return r"\text{" + tex_escape(s) + "}"


def latex(t: Table) -> str:
    """``t`` as LaTeX math that Jupyter's MathJax renders (and nbconvert's LaTeX): the title over
    an ``array`` whose cells are ``\\text{...}`` (text escaped), between ``$`` signs."""
    cols = "l" * max(1, len(t.heads) or (len(t.rows[0]) if t.rows else 1))
    out = [r"$\begin{array}{l}\textbf{" + tex_escape(t.title) + r"} \\", r"\begin{array}{" + cols + r"}\hline"]
    if t.heads:
        out.append(" & ".join(_text(str(h)) for h in t.heads) + r" \\ \hline")
    out += [" & ".join(_text(cell_text(c)) for c in row) + r" \\" for row in t.rows]
    out.append(r"\hline\end{array}\end{array}$")
    return "\n".join(out)


def frame(t: Table):
    """``t`` as a pandas DataFrame (module docstring); the title in ``attrs["title"]``.

    Raises
    ------
    CostgraphValueError
        pandas is not installed (it is the ``notebook`` extra)."""
    try:
        import pandas
    except ImportError:
        raise CostgraphValueError("to_pandas() needs pandas, which is not installed",
                                  hint="pip install 'costgraph[notebook]' (or pip install pandas)") from None
    with_units = [i for i in range(len(t.heads)) if any(isinstance(r[i], Q) for r in t.rows)]
    columns: dict = {}
    for i, head in enumerate(t.heads):
        values = [_number(r[i].value if isinstance(r[i], Q) else r[i]) for r in t.rows]
        mixed = len({type(v) for v in values}) > 1 or any(type(v) is int and abs(v) >= 2**63 for v in values)
        columns[head] = pandas.Series(values, dtype=object) if mixed else values   # exact ints stay ints
        if i in with_units:
            name = "unit" if len(with_units) == 1 else f"{head} unit"
            columns[name] = [r[i].unit if isinstance(r[i], Q) else "" for r in t.rows]
    df = pandas.DataFrame(columns)
    df.attrs["title"] = t.title
    return df


def json_exact(v):
    """A JSON value of an exact number: an int when whole, else the text ``"p/q"`` (a SymPy
    Rational or a Fraction); floats, text, None and bools as they are."""
    if v is None or isinstance(v, (bool, str, float, int)):
        return v
    if isinstance(v, Fraction):
        return v.numerator if v.denominator == 1 else f"{v.numerator}/{v.denominator}"
    if getattr(v, "is_Integer", False):
        return int(v)
    if getattr(v, "is_Rational", False):
        return f"{int(v.p)}/{int(v.q)}"
    return str(v)
