r"""A report as Markdown, for READMEs and issues: pipe tables, formulas as
inline math ``$…$`` (SymPy's LaTeX in the field's order, which GitHub
renders), graph paths as code spans. Every text (names, descriptions, option
text from the model file) is escaped for CommonMark/GFM: ``< > &`` as HTML
entities, ``\ ` * _ [ ] |`` with a backslash (``_`` inside a word, which
opens no emphasis, as written), line breaks as spaces, so a
model string cannot inject raw HTML (``<script>``, ``<img onerror>``), links
or table cells."""

from __future__ import annotations

import html
import re

from ...version import __version__
from ..printing import to_latex
from .content import Report, Section, Table


# ``_`` between letters or digits opens no emphasis (CommonMark §6.2), so s_max stays as written
_SPECIALS = re.compile(r"([\\`*\[\]|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


def cell(s) -> str:
    r"""Text for a table cell, a heading or a list item: ``< > &`` as HTML
    entities, the Markdown specials ``\ ` * _ [ ] |`` backslash-escaped, no
    line breaks (CommonMark 0.31 §2.4 backslash escapes, §6.6 raw HTML)."""
    text = html.escape(str(s).replace("\r", " ").replace("\n", " "), quote=False)
    return _SPECIALS.sub(r"\\\1", text)


def _pipes(s) -> str:
    """A formula or code span inside a table cell: only ``|`` escaped (GFM tables)."""
    return str(s).replace("|", r"\|").replace("\n", " ")


def _code(s) -> str:
    """A graph path as a code span (HTML is literal there); one holding a
    backtick is shown as escaped text instead."""
    s = str(s)
    return f"`{_pipes(s)}`" if "`" not in s and "\n" not in s else cell(s)


def formula(expr) -> str:
    """``$…$`` of ``expr`` ('' for None)."""
    return "" if expr is None else _pipes(f"${to_latex(expr)}$")


def _table(t: Table, numbers: bool, level: int = 3) -> list[str]:
    out = [f"{'#' * level} {cell(t.title)}", "", "| quantity | formula |" + (" value |" if numbers else ""),
           "|---|---|" + ("---|" if numbers else "")]
    for r in t.rows:
        out.append(f"| {cell(r.label)} | {formula(r.expr)} |" + (f" {cell(r.value or '')} |" if numbers else ""))
    out.append("")
    if t.note:
        out += [cell(t.note), ""]
    return out


def _section(s: Section, numbers: bool) -> list[str]:
    out = [f"## {cell(s.title)}", ""] + [f"- {cell(line)}" for line in s.settings] + [""]
    for t in s.tables:
        out += _table(t, numbers)
    out += [f"**{cell(line)}**" + "  " for line in s.verdict]
    if s.notes:
        out += ["", "Assumptions:", ""] + [f"- {cell(n)}" for n in s.notes]
    return out + [""]


def to_md(rep: Report) -> str:
    """The Markdown of ``rep``."""
    import sympy

    from .content import label

    out = [f"# {cell(rep.title)}", "",
           f"Closed forms derived by costgraph {__version__} from the operator graph; every number is the "
           "formula at the values given.", "", "## Conventions", ""]
    out += [f"- **{cell(k)}**: {cell(v)}" for k, v in rep.conventions] + ["", "## Symbols", ""]
    has_values = any(v is not None for _, _, v in rep.symbols)
    out += ["| symbol | meaning |" + (" value |" if has_values else ""), "|---|---|" + ("---:|" if has_values else "")]
    for name, meaning, value in rep.symbols:
        out.append(f"| {formula(sympy.Symbol(name))} | {cell(meaning)} |"
                   + (f" {'' if value is None else f'{value:,}'} |" if has_values else ""))
    out += ["", "## Totals", ""]
    for t in rep.scopes:
        out += _table(t, rep.numbers)
    out += ["## Per block", "",
            "One instance of each block, repeat group, top-level node and shared storage; a row counts "
            "*count* times in the model." + (" Each cell: formula = value." if rep.numbers else ""), ""]
    qs = rep.block_quantities
    out.append("| block | kind | count | " + " | ".join(cell(label(q)) for q in qs) + " |")
    out.append("|---|---|---|" + "---|" * len(qs))
    for b in rep.blocks:
        cells = []
        for q in qs:
            expr, value = b.quantities[q]
            if expr == 0:
                cells.append("0")
            else:
                cells.append(formula(expr) + (f" = {cell(value)}" if rep.numbers and value is not None else ""))
        out.append(f"| {_code(b.path)} | {cell(b.kind)} | {formula(b.count)} | " + " | ".join(cells) + " |")
    out.append("")
    if rep.training is not None:
        out += _section(rep.training, rep.values is not None)
    if rep.inference is not None:
        out += _section(rep.inference, True)
    if rep.warnings:
        out += ["## Warnings", ""] + [f"- {cell(w)}" for w in rep.warnings] + [""]
    return "\n".join(out).rstrip("\n") + "\n"
