"""Aligned text tables for the terminal, as :mod:`rich` draws them (no colour, no
box, never wrapped): every column-aligned block of costgraph's text output
goes through :func:`table`, so widths come from the contents, not from
hand-padded format strings. Cells of one-column characters on one line (the
text of the reports) are aligned here as rich aligns them, without importing
rich (a tenth of a second of a cold ``costgraph derive``: issue 31 item 8);
other cells (wide or combining characters, line breaks) are drawn by rich.
``tests/export/test_printing.py`` holds the two to the same lines."""

from __future__ import annotations

import io


def table(rows, headers=None, *, align=None, indent: int = 2, gap: int = 2) -> list[str]:
    """``rows`` (sequences of cells, converted with ``str``) as aligned lines.

    ``headers``: an optional first row; ``align``: per column ``"left"`` (default) or
    ``"right"``; ``indent``: spaces before each line; ``gap``: spaces between columns.
    Returns the lines without trailing spaces (an empty list for no rows)."""
    rows = [[str(c) for c in r] for r in rows]
    if not rows and not headers:
        return []
    ncol = max(len(r) for r in ([list(headers)] if headers else []) + rows)
    rows = [r + [""] * (ncol - len(r)) for r in rows]
    heads = list(headers or []) + [""] * (ncol - len(headers or []))
    plain = set(align or ()) <= {"left", "right"} and all(_narrow(c) for r in [heads, *rows] for c in r)
    draw = _aligned if plain else _rich
    return draw(rows, heads, bool(headers), align, indent, gap)


def _narrow(cell: str) -> bool:
    """Whether every character of ``cell`` takes one terminal column (printable, not wide, not
    combining), so that its width is its length."""
    if cell.isascii():
        return cell.isprintable()
    import unicodedata

    return cell.isprintable() and not any(unicodedata.east_asian_width(ch) in ("W", "F") or unicodedata.combining(ch)
                                          for ch in cell)


def _aligned(rows, heads, show: bool, align, indent: int, gap: int) -> list[str]:
    """The lines rich draws for cells of one-column characters: each column as wide as its widest
    cell, left or right justified (a right-justified cell without its trailing spaces, as rich
    justifies it), ``gap`` spaces after each, trailing spaces stripped."""
    body = ([heads] if show else []) + rows
    widths = [max(len(r[i]) for r in body) for i in range(len(heads))]
    right = [bool(align) and i < len(align) and align[i] == "right" for i in range(len(heads))]
    pad, sep = " " * indent, " " * gap
    return [pad + "".join((c.rstrip(" ").rjust(w) if r else c.ljust(w)) + sep for c, w, r in zip(row, widths, right)).rstrip()
            for row in body]


def _rich(rows, heads, show: bool, align, indent: int, gap: int) -> list[str]:
    """The lines of :func:`table` drawn by rich (cells of any characters)."""
    from rich.console import Console
    from rich.table import Table

    ncol = len(heads)
    t = Table(show_header=show, box=None, show_edge=False, pad_edge=False, padding=(0, gap, 0, 0),
              header_style="", highlight=False)
    for i in range(ncol):
        t.add_column(heads[i], justify=(align[i] if align and i < len(align) else "left"), no_wrap=True)
    for r in rows:
        t.add_row(*r)
    width = sum(max(len(x) for x in col) + gap for col in zip(heads, *rows)) + 8
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, force_terminal=False, no_color=True, highlight=False,
            emoji=False, markup=False).print(t)
    pad = " " * indent
    return [pad + line.rstrip() for line in buf.getvalue().splitlines()]
