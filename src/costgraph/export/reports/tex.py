"""A report as LaTeX: a standalone document, or its body alone (``fragment``)
to ``\\input`` into a paper.

The document uses only packages of Debian's ``texlive-latex-base`` (the
preamble is ``costgraph/export/report_preamble.tex``): ``amsmath``,
``array`` and ``longtable`` (a fragment needs these three in the paper's
preamble), ``geometry``, ``inputenc``; column widths are shares of
``\\linewidth``, so a fragment fits a paper's column. Formulas are SymPy's
``latex()`` printer in the field's order (:func:`costgraph.export.printing.to_latex`:
``24 b s h^{2} + 4 b s^{2} h``), set inline in paragraph columns so that a
long sum breaks after a ``+``; tables are ``longtable`` s, which break across
pages.
"""

from __future__ import annotations

import unicodedata
from importlib import resources

from ...version import __version__
from ..printing import to_latex
from .content import BlockRow, Report, Section, Table

# ^ and ~ from the typewriter font (OT1 cmtt has the ASCII signs): \textasciicircum and \^{} need the
# TS1 font, which texlive-latex-base does not ship as Type 1 (it would be made with METAFONT)
_SPECIAL = {"\\": r"$\backslash$", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"$\{$", "}": r"$\}$", "~": r"\texttt{\char126}", "^": r"\texttt{\char94}",
            "<": r"$<$", ">": r"$>$", "|": r"$|$"}
_UNICODE = {"×": r"$\times$", "·": r"$\cdot$", "−": "-", "→": r"$\to$", "←": r"$\leftarrow$", "≤": r"$\leq$",
            "≥": r"$\geq$", "≈": r"$\approx$", "÷": r"$\div$", "Ψ": r"$\Psi$", "Φ": r"$\Phi$", "α": r"$\alpha$",
            "β": r"$\beta$", "…": r"\dots{}", "–": "--", "—": "---", "’": "'", "‘": "`", "“": "``", "”": "''",
            "≫": r"$\gg$", "√": r"$\surd$"}
_UNICODE.update({d: r"\textsuperscript{" + str(i) + "}" for i, d in enumerate("⁰¹²³⁴⁵⁶⁷⁸⁹")})


def text(s: str) -> str:
    """Plain text for LaTeX: special characters escaped, the Unicode signs the
    engine writes (×, ·, ≤, →, ², …) as TeX, anything else reduced to ASCII."""
    out = []
    for ch in str(s):
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif ch in _UNICODE:
            out.append(_UNICODE[ch])
        elif ord(ch) < 128:
            out.append(ch)
        else:
            out.append(unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode("ascii"))
    return "".join(out)


def path(p: str) -> str:
    """A graph path in typewriter type, breakable after each ``/``."""
    return r"\texttt{" + r"/\allowbreak{}".join(text(part) for part in p.split("/")) + "}"


def formula(expr) -> str:
    """Inline math that may break after a ``+``: ``\\left( \\right)`` (which cannot break) become plain brackets."""
    if expr is None:
        return ""
    return "$" + to_latex(expr).replace(r"\left(", "(").replace(r"\right)", ")") + "$"


def _value(v: str | None) -> str:
    return text(v) if v is not None else ""


def _p(share: float) -> str:
    """A ragged-right paragraph column ``share`` of the line wide."""
    return r">{\raggedright\arraybackslash}p{" + f"{share:.2f}" + r"\linewidth}"


def _table(t: Table, numbers: bool) -> list[str]:
    cols = "@{}" + (_p(0.22) + _p(0.40) + _p(0.31) if numbers else _p(0.27) + _p(0.68)) + "@{}"
    head = r"\textbf{quantity} & \textbf{formula}" + (r" & \textbf{value}" if numbers else "") + r" \\ \hline"
    out = [r"\subsubsection*{" + text(t.title) + "}", r"\begin{longtable}{" + cols + "}", head, r"\endhead"]
    for r in t.rows:
        out.append(f"{text(r.label)} & {formula(r.expr)}" + (f" & {_value(r.value)}" if numbers else "") + r" \\")
    out.append(r"\end{longtable}")
    if t.note:
        out.append(text(t.note) + "\n")
    return out


def _block_tables(rep: Report) -> list[str]:
    from .content import label

    out = [r"\subsection*{Per block}",
           "One instance of each block, repeat group, top-level node and shared storage; a row counts "
           r"\emph{count} times in the model (the repeat count of the groups around it)."]
    numbers = rep.numbers
    for q in rep.block_quantities:
        cols = "@{}" + (_p(0.25) + _p(0.1) + _p(0.33) + _p(0.24) if numbers else _p(0.27) + _p(0.1) + _p(0.56)) + "@{}"
        out += [r"\subsubsection*{" + text(label(q)) + " (one instance)}",
                r"\begin{longtable}{" + cols + "}",
                r"\textbf{block} & \textbf{count} & \textbf{formula}" + (r" & \textbf{value}" if numbers else "")
                + r" \\ \hline", r"\endhead"]
        for b in rep.blocks:
            expr, value = b.quantities[q]
            if expr == 0:
                continue
            out.append(_block_cell(b) + f" & {formula(b.count)} & {formula(expr)}"
                       + (f" & {_value(value)}" if numbers else "") + r" \\")
        out.append(r"\end{longtable}")
    return out


def _block_cell(b: BlockRow) -> str:
    return path(b.path) + r" {\footnotesize(" + text(b.kind) + ")}"


def _section(s: Section, numbers: bool) -> list[str]:
    out = [r"\subsection*{" + text(s.title) + "}", r"\begin{itemize}"]
    out += [r"\item " + text(line) for line in s.settings]
    out.append(r"\end{itemize}")
    for t in s.tables:
        out += _table(t, numbers)
    for line in s.verdict:
        out.append(r"\textbf{" + text(line) + "}\n")
    if s.notes:
        out += ["Assumptions:", r"\begin{itemize}"] + [r"\item " + text(n) for n in s.notes] + [r"\end{itemize}"]
    return out


def body(rep: Report) -> str:
    """The document's body (what a fragment holds)."""
    out = [r"\section*{" + text(rep.title) + "}",
           text(f"Closed forms derived by costgraph {__version__} from the operator graph; "
                "every number is the formula at the values given."),
           r"\subsection*{Conventions}", r"\begin{description}"]
    out += [r"\item[" + text(k) + "] " + text(v) for k, v in rep.conventions]
    out.append(r"\end{description}")
    has_values = any(v is not None for _, _, v in rep.symbols)
    out += [r"\subsection*{Symbols}",
            r"\begin{longtable}{@{}>{$}l<{$}" + (_p(0.6) + "r" if has_values else _p(0.75)) + "@{}}",
            r"\textbf{symbol} & \textbf{meaning}" + (r" & \textbf{value}" if has_values else "") + r" \\ \hline",
            r"\endhead"]
    import sympy

    for name, meaning, value in rep.symbols:
        sym = to_latex(sympy.Symbol(name))
        out.append(f"{sym} & {text(meaning)}" + (f" & {value:,}" if has_values and value is not None else
                                                   (" & " if has_values else "")) + r" \\")
    out.append(r"\end{longtable}")
    out.append(r"\subsection*{Totals}")
    for t in rep.scopes:
        out += _table(t, rep.numbers)
    out += _block_tables(rep)
    if rep.training is not None:
        out += _section(rep.training, rep.values is not None)
    if rep.inference is not None:
        out += _section(rep.inference, True)
    if rep.warnings:
        out += [r"\subsection*{Warnings}", r"\begin{itemize}"] + [r"\item " + text(w) for w in rep.warnings] \
            + [r"\end{itemize}"]
    return "\n".join(out) + "\n"


def preamble() -> str:
    """The standalone document's preamble (``report_preamble.tex``)."""
    return resources.files("costgraph.export").joinpath("report_preamble.tex").read_text(encoding="utf-8")


def to_tex(rep: Report, fragment: bool = False) -> str:
    """The LaTeX of ``rep``: a whole document, or with ``fragment`` the body for
    ``\\input`` (the paper loads ``amsmath``, ``array`` and ``longtable``)."""
    if fragment:
        return ("% costgraph report fragment: \\input it into a document that loads\n"
                "% \\usepackage{amsmath} \\usepackage{array} \\usepackage{longtable}\n" + body(rep))
    return preamble() + "\\begin{document}\n" + body(rep) + "\\end{document}\n"
