"""A report as Markdown, for READMEs and issues: pipe tables, formulas as
inline math ``$…$`` (SymPy's LaTeX in the field's order, which GitHub
renders), graph paths as code spans. A ``|`` inside a cell is escaped."""

from __future__ import annotations

from ...version import __version__
from ..printing import to_latex
from .content import Report, Section, Table


def cell(s) -> str:
    """Text for a table cell: ``|`` escaped, no line breaks."""
    return str(s).replace("|", r"\|").replace("\n", " ")


def formula(expr) -> str:
    """``$…$`` of ``expr`` ('' for None)."""
    return "" if expr is None else cell(f"${to_latex(expr)}$")


def _table(t: Table, numbers: bool, level: int = 3) -> list[str]:
    out = [f"{'#' * level} {t.title}", "", "| quantity | formula |" + (" value |" if numbers else ""),
           "|---|---|" + ("---|" if numbers else "")]
    for r in t.rows:
        out.append(f"| {cell(r.label)} | {formula(r.expr)} |" + (f" {cell(r.value or '')} |" if numbers else ""))
    out.append("")
    if t.note:
        out += [t.note, ""]
    return out


def _section(s: Section, numbers: bool) -> list[str]:
    out = [f"## {s.title}", ""] + [f"- {line}" for line in s.settings] + [""]
    for t in s.tables:
        out += _table(t, numbers)
    out += [f"**{line}**" + "  " for line in s.verdict]
    if s.notes:
        out += ["", "Assumptions:", ""] + [f"- {n}" for n in s.notes]
    return out + [""]


def to_md(rep: Report) -> str:
    """The Markdown of ``rep``."""
    import sympy

    from .content import label

    out = [f"# {rep.title}", "",
           f"Closed forms derived by costgraph {__version__} from the operator graph; every number is the "
           "formula at the values given.", "", "## Conventions", ""]
    out += [f"- **{k}**: {v}" for k, v in rep.conventions] + ["", "## Symbols", ""]
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
    out.append("| block | kind | count | " + " | ".join(label(q) for q in qs) + " |")
    out.append("|---|---|---|" + "---|" * len(qs))
    for b in rep.blocks:
        cells = []
        for q in qs:
            expr, value = b.quantities[q]
            if expr == 0:
                cells.append("0")
            else:
                cells.append(formula(expr) + (f" = {cell(value)}" if rep.numbers and value is not None else ""))
        out.append(f"| `{cell(b.path)}` | {cell(b.kind)} | {formula(b.count)} | " + " | ".join(cells) + " |")
    out.append("")
    if rep.training is not None:
        out += _section(rep.training, rep.values is not None)
    if rep.inference is not None:
        out += _section(rep.inference, True)
    if rep.warnings:
        out += ["## Warnings", ""] + [f"- {w}" for w in rep.warnings] + [""]
    return "\n".join(out).rstrip("\n") + "\n"
