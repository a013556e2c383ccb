"""Reports of a model's costs: LaTeX (standalone or a fragment), one
self-contained HTML page, Markdown (``costgraph report``).

:func:`~.content.build` gathers what a report shows from the engine;
:func:`~.tex.to_tex`, :func:`~.html.to_html` and :func:`~.md.to_md` print it.
"""

from .content import Report, build
from .html import to_html
from .md import to_md
from .tex import to_tex

__all__ = ["Report", "build", "to_html", "to_md", "to_tex"]
