"""Aligned text tables for the terminal, drawn by :mod:`rich` (no colour, no
box, never wrapped): every column-aligned block of costgraph's text output
goes through :func:`table`, so widths come from the contents, not from
hand-padded format strings."""

from __future__ import annotations

import io


def table(rows, headers=None, *, align=None, indent: int = 2, gap: int = 2) -> list[str]:
    """``rows`` (sequences of cells, converted with ``str``) as aligned lines.

    ``headers``: an optional first row; ``align``: per column ``"left"`` (default) or
    ``"right"``; ``indent``: spaces before each line; ``gap``: spaces between columns.
    Returns the lines without trailing spaces (an empty list for no rows)."""
    from rich.console import Console
    from rich.table import Table

    rows = [[str(c) for c in r] for r in rows]
    if not rows and not headers:
        return []
    ncol = max(len(r) for r in ([list(headers)] if headers else []) + rows)
    rows = [r + [""] * (ncol - len(r)) for r in rows]
    heads = list(headers or []) + [""] * (ncol - len(headers or []))
    t = Table(show_header=bool(headers), box=None, show_edge=False, pad_edge=False, padding=(0, gap, 0, 0),
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
