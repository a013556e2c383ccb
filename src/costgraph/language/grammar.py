"""The costgraph grammar, built once into a LALR parser.

Shared by :mod:`costgraph.language.parser` (which parses with it) and
:mod:`costgraph.language.syntax_errors` (which reads its terminals' patterns to say
what was expected in the user's words), so neither imports the other.
The grammar text is ``grammars/costgraph.lark`` (see :mod:`costgraph.language.resources`).
"""

from __future__ import annotations

from functools import cache

from lark import Lark

from .resources import grammar_text


@cache
def lark_parser() -> Lark:
    """The LALR parser of the costgraph language, built on first use and kept.

    ``cache=True``: lark keeps the built LALR tables in the temp folder, keyed
    by the grammar's hash, so later starts skip building them (about 40 ms).
    """
    return Lark(grammar_text(), parser="lalr", propagate_positions=True, maybe_placeholders=True, cache=True)
