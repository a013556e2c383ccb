"""A report as one self-contained HTML page.

Formulas are MathML from SymPy's presentation printer (``mathml(expr,
printer="presentation")``; a subclass keeps the field's factor order), which
browsers render natively (MathML Core); plots are inline SVG
(:func:`costgraph.export.plots.svg_text`); the style sheet
(``costgraph/export/report.css``) is inline. The page loads nothing: no
scripts, fonts, images or style sheets from elsewhere, and no URL appears in
it (inline SVG and MathML need no namespace declarations in HTML).
"""

from __future__ import annotations

import html
import re
from importlib import resources

from ...version import __version__
from .content import Report, Section, Table


def _printer():
    from sympy.printing.mathml import MathMLPresentationPrinter

    class FieldOrderMathML(MathMLPresentationPrinter):
        """SymPy's presentation MathML printer, printing the factors of a product
        in the order they are given (``24 b s h²``, as :func:`costgraph.export.printing.field_order`
        builds them) instead of sorting them by name."""

        def _print_Add(self, expr, order=None):
            return super()._print_Add(expr, order="none")   # the terms as given

    # the base printer keeps a product's factors as given only under order 'old'
    return FieldOrderMathML({"order": "old"})


_ENTITY = re.compile(r"&([A-Za-z][A-Za-z0-9]*);")


def mathml(expr, display: bool = False) -> str:
    """``<math>`` of ``expr`` (presentation MathML); named entities become
    numeric references, so the markup is also well-formed XML."""
    from html.entities import html5

    if expr is None:
        return ""
    inner = _printer().doprint(expr)
    inner = _ENTITY.sub(lambda m: "".join(f"&#x{ord(c):x};" for c in html5.get(m.group(1) + ";", m.group(0))), inner)
    return f'<math display="{"block" if display else "inline"}">{inner}</math>'


def _e(s) -> str:
    return html.escape(str(s), quote=True)


def _table(t: Table, numbers: bool, level: int = 3) -> list[str]:
    out = [f"<h{level}>{_e(t.title)}</h{level}>", '<div class="scroll"><table>',
           "<thead><tr><th>quantity</th><th>formula</th>" + ("<th>value</th>" if numbers else "") + "</tr></thead>",
           "<tbody>"]
    for r in t.rows:
        out.append(f"<tr><td>{_e(r.label)}</td><td>{mathml(r.expr)}</td>"
                   + (f'<td class="num">{_e(r.value or "")}</td>' if numbers else "") + "</tr>")
    out += ["</tbody>", "</table></div>"]
    if t.note:
        out.append(f'<p class="note">{_e(t.note)}</p>')
    return out


def _section(s: Section, numbers: bool, anchor: str) -> list[str]:
    out = [f'<section id="{anchor}">', f"<h2>{_e(s.title)}</h2>", "<ul>"]
    out += [f"<li>{_e(line)}</li>" for line in s.settings] + ["</ul>"]
    for t in s.tables:
        out += _table(t, numbers)
    out += [f'<p class="verdict">{_e(line)}</p>' for line in s.verdict]
    if s.notes:
        out += ['<p class="note">Assumptions:</p>', '<ul class="note">'] + \
            [f"<li>{_e(n)}</li>" for n in s.notes] + ["</ul>"]
    out.append("</section>")
    return out


def to_html(rep: Report, plots: list[tuple[str, str]] | None = None) -> str:
    """The page. ``plots``: ``[(caption, inline SVG text), ...]``
    (:func:`costgraph.export.plots.svg_text` with ``inline=True``)."""
    import sympy

    from .content import label

    css = resources.files("costgraph.export").joinpath("report.css").read_text(encoding="utf-8")
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(rep.title)}</title>", f"<style>\n{css}</style>", "</head>", "<body>", "<main>",
           f"<h1>{_e(rep.title)}</h1>",
           f'<p class="meta">Closed forms derived by costgraph {_e(__version__)} from the operator graph; '
           "every number is the formula at the values given.</p>",
           '<section id="conventions">', "<h2>Conventions</h2>", '<dl class="conventions">']
    out += [f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rep.conventions]
    out += ["</dl>", "</section>", '<section id="symbols">', "<h2>Symbols</h2>", '<div class="scroll"><table>']
    has_values = any(v is not None for _, _, v in rep.symbols)
    out.append("<thead><tr><th>symbol</th><th>meaning</th>" + ("<th>value</th>" if has_values else "")
               + "</tr></thead><tbody>")
    for name, meaning, value in rep.symbols:
        out.append(f"<tr><td>{mathml(sympy.Symbol(name))}</td><td>{_e(meaning)}</td>"
                   + (f'<td class="num">{"" if value is None else f"{value:,}"}</td>' if has_values else "") + "</tr>")
    out += ["</tbody></table></div>", "</section>", '<section id="totals">', "<h2>Totals</h2>"]
    for t in rep.scopes:
        out += _table(t, rep.numbers)
    out += ["</section>", '<section id="blocks">', "<h2>Per block</h2>",
            '<p class="note">One instance of each block, repeat group, top-level node and shared storage; '
            "a row counts <em>count</em> times in the model.</p>"]
    for q in rep.block_quantities:
        out += [f"<h3>{_e(label(q))} (one instance)</h3>", f'<div class="scroll"><table class="blocks" data-quantity="{q}">',
                "<thead><tr><th>block</th><th>kind</th><th>count</th><th>formula</th>"
                + ("<th>value</th>" if rep.numbers else "") + "</tr></thead><tbody>"]
        for b in rep.blocks:
            expr, value = b.quantities[q]
            if expr == 0:
                continue
            out.append(f"<tr><td><code>{_e(b.path)}</code></td><td>{_e(b.kind)}</td><td>{mathml(b.count)}</td>"
                       f"<td>{mathml(expr)}</td>" + (f'<td class="num">{_e(value or "")}</td>' if rep.numbers else "")
                       + "</tr>")
        out += ["</tbody></table></div>"]
    out.append("</section>")
    if rep.training is not None:
        out += _section(rep.training, rep.values is not None, "training")
    if rep.inference is not None:
        out += _section(rep.inference, True, "inference")
    if plots:
        out += ['<section id="plots">', "<h2>Plots</h2>"]
        for caption, svg in plots:
            out += ["<figure>", svg, f"<figcaption>{_e(caption)}</figcaption>", "</figure>"]
        out.append("</section>")
    if rep.warnings:
        out += ['<section id="warnings">', "<h2>Warnings</h2>", "<ul>"] + \
            [f"<li>{_e(w)}</li>" for w in rep.warnings] + ["</ul>", "</section>"]
    out += ["</main>", "</body>", "</html>"]
    return "\n".join(out) + "\n"
