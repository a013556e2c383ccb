"""Megatron-LM's pipeline layouts: ``--pipeline-model-parallel-layout`` as text.

Read at the source: NVIDIA/Megatron-LM @ d98e8a64 (2026-08-22),
``megatron/core/transformer/pipeline_parallel_layer_layout.py::PipelineParallelLayerLayout``
(``parse_str_to_list``, ``__init__``, ``validate_layer_layout``) and
``megatron/training/arguments.py`` (the flag; ``virtual_pipeline_model_parallel_size =
stages // pipeline_model_parallel_size``).

Syntax (the lark grammar is :data:`GRAMMAR`): ``E`` the embedding, ``t`` one
Transformer (decoder) layer, ``m`` one multi-token-prediction (MTP) layer, ``L`` the loss;
``|`` ends a stage; ``x*n`` repeats one symbol (``|*3`` too), ``(…)*n`` a run of symbols
(one level, as Megatron's regular expression unrolls it; the parenthesis needs its
``*n``); commas are cosmetic. Empty stages are allowed (``E||t|L``).

Stages and ranks: the text lists ``PP × VP`` stages; stage ``k`` is virtual stage
``k // PP`` (model chunk) of pipeline rank ``k % PP``, so rank ``r`` holds stages ``r,
r + PP, r + 2·PP, …``. Layers are numbered in the text's order. Megatron's checks
(:meth:`PipelineLayout.validate`): the first symbol is ``E`` and the last ``L``, once each;
as many ``t`` as the model has layers and ``m`` as it has MTP depths; every ``m`` after
every ``t``, all in one stage, the last model chunk of its rank (an MTP on a rank
other than the last is Megatron's *standalone* MTP).

Bounds, so a layout cannot ask for unbounded memory: at most :data:`MAX_TEXT`
characters, a repetition at most :data:`MAX_COUNT`, at most :data:`MAX_SYMBOLS`
symbols once unrolled and at most :data:`MAX_STAGES` stages (each stage is analysed, so
the stages bound the time too). Errors name the column in the flag's text.

:func:`parse_pipeline_layout` parses; :func:`pipeline_layout_for` parses, binds the
pipeline degree and checks the layout against a model (what the planner calls);
:func:`format_layout` writes per-stage symbols back as compact text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache, lru_cache

from ..errors import CostgraphValueError, Location

#: Megatron's LayerType of each symbol (pipeline_parallel_layer_layout.py char2layer_type)
SYMBOLS = {"E": "embedding", "t": "decoder", "m": "mtp", "L": "loss"}
#: the longest layout text (a command line's flag)
MAX_TEXT = 1000
#: the largest repetition count (x*n, (…)*n): no model has a thousandth of it in layers
MAX_COUNT = 4096
#: the most symbols (stage separators included) a layout may unroll to
MAX_SYMBOLS = 65536
#: the most stages (PP × VP) a layout may list: far above published layouts (DeepSeek-V3's PP 16 × VP 4 =
#: 64); 61,442 stages took minutes to analyse, 1,024 take seconds
MAX_STAGES = 1024
#: the layout's lark grammar (Megatron's parse_str_to_list as a grammar: one level of
#: parentheses, which need their *n; commas ignored)
GRAMMAR = r"""
start: item*

?item: symbol
     | symbol "*" COUNT          -> repeat
     | "(" symbol_run ")" "*" COUNT -> group

symbol_run: inner+
?inner: symbol
      | symbol "*" COUNT         -> repeat

symbol: LAYER | SEP

LAYER: "E" | "t" | "m" | "L"
SEP: "|"
COUNT: /[0-9]+/

%ignore ","
"""
#: the flag whose text the errors point into
FLAG = "--pipeline-layout"
HINT = ("Megatron-LM's --pipeline-model-parallel-layout: E embedding, t Transformer layer, m MTP layer, "
        "L loss, | ends a stage, x*n or (…)*n repeats, commas are ignored; e.g. Et*4|(t*4|)*14tmL")


class FlagLocation(Location):
    """A column in a command-line flag's text (printed ``--pipeline-layout, column 7``)."""

    def __str__(self) -> str:
        return f"{self.file}, column {self.column}"


def _error(text: str, column: int, message: str, hint: str = HINT) -> CostgraphValueError:
    return CostgraphValueError(message, FlagLocation(FLAG, 1, max(column, 1), text), hint=hint)


@dataclass(frozen=True)
class PipelineLayout:
    """A parsed layout: ``text`` as given, ``stages`` (each stage's symbols in order, e.g.
    ``"Etttt"``; ``""`` an empty stage), and once bound to a pipeline degree
    (:meth:`with_pp`) ``pp`` and ``vp`` (``len(stages) = pp × vp``)."""

    text: str
    stages: tuple[str, ...]
    pp: int | None = None
    vp: int | None = None

    @property
    def flat(self) -> str:
        """Every symbol in layer order (Megatron's ``flatten_layout``: the stages in text order)."""
        return "".join(self.stages)

    @property
    def layers(self) -> int:
        """Transformer layers (``t``) in all."""
        return self.flat.count("t")

    @property
    def mtp(self) -> int:
        """MTP layers (``m``) in all."""
        return self.flat.count("m")

    def with_pp(self, pp: int, v: int | None = None) -> "PipelineLayout":
        """This layout on ``pp`` pipeline ranks (``vp = stages / pp``); ``v``: the virtual
        stages asked for elsewhere (``--virtual-stages``), which must agree.

        Raises
        ------
        CostgraphValueError
            ``pp`` does not divide the stages, or ``v`` is not ``stages / pp``."""
        n = len(self.stages)
        if isinstance(pp, bool) or not isinstance(pp, int) or pp < 1:
            raise CostgraphValueError(f"--pp must be a positive whole number beside {FLAG}, got {pp!r}")
        if n % pp:
            raise CostgraphValueError(f"{FLAG} lists {n} stages, which --pp {pp} does not divide "
                                      "(Megatron-LM: the stages are PP × VP)",
                                      hint=f"--pp a divisor of {n}, or a layout of a multiple of {pp} stages")
        if v is not None and v != n // pp:
            raise CostgraphValueError(f"{FLAG} lists {n} stages = --pp {pp} × {n // pp} virtual stages, but "
                                      f"--virtual-stages is {v}",
                                      hint=f"drop --virtual-stages (the layout sets it), or --virtual-stages {n // pp}")
        return replace(self, pp=pp, vp=n // pp)

    def stage(self, rank: int, vp: int = 0) -> str:
        """The symbols of model chunk ``vp`` of pipeline rank ``rank`` (bound layouts)."""
        return self.stages[vp * self._pp() + rank]

    def chunk_sizes(self) -> list[list[int]]:
        """``sizes[r][vp]``: Transformer layers model chunk ``vp`` of rank ``r`` builds (as
        :func:`costgraph.parallel.layer_split.chunk_sizes`)."""
        pp = self._pp()
        return [[self.stage(r, k).count("t") for k in range(self.vp)] for r in range(pp)]

    def mtp_rank(self) -> int | None:
        """The pipeline rank holding the MTP layers (None: the layout has none)."""
        return next((k % self._pp() for k, st in enumerate(self.stages) if "m" in st), None)

    def validate(self, layers: int, mtp: int = 0, model: str = "the model") -> None:
        """Megatron's ``validate_layer_layout`` for a model of ``layers`` Transformer layers
        and ``mtp`` MTP depths (module docstring).

        Raises
        ------
        CostgraphValueError
            The first rule the layout breaks, with a hint."""
        flat, pp = self.flat, self._pp()
        if not flat.startswith("E") or flat.count("E") != 1:
            raise CostgraphValueError(f"{FLAG} {self.text!r}: the embedding E comes once, first "
                                      "(Megatron-LM validate_layer_layout)", hint="start the layout with E")
        if not flat.endswith("L") or flat.count("L") != 1:
            raise CostgraphValueError(f"{FLAG} {self.text!r}: the loss L comes once, last "
                                      "(Megatron-LM validate_layer_layout)", hint="end the layout with L")
        if self.layers != layers:
            raise CostgraphValueError(f"{FLAG} places {self.layers} Transformer layer(s) (t); {model} has {layers}",
                                      hint=f"{layers} t in all (t*n repeats)")
        if self.mtp != mtp:
            raise CostgraphValueError(f"{FLAG} places {self.mtp} MTP layer(s) (m); {model} has {mtp}",
                                      hint=(f"{mtp} m before L" if mtp else "no m: the model has no MTP depths "
                                            "(DeepSeek-V3: --set mtp=true adds them)"))
        if "m" in flat and "t" in flat[flat.index("m"):]:
            raise CostgraphValueError(f"{FLAG} {self.text!r}: MTP layers (m) come after every Transformer layer "
                                      "(Megatron-LM validate_layer_layout)", hint="move m to the end, before L")
        held = [k for k, st in enumerate(self.stages) if "m" in st]
        if len(held) > 1:
            raise CostgraphValueError(f"{FLAG} {self.text!r}: the MTP layers are in one stage (Megatron-LM "
                                      "validate_layer_layout)", hint="write all the m of a layout together")
        if held and held[0] // pp != self.vp - 1:
            raise CostgraphValueError(f"{FLAG} {self.text!r} on --pp {pp}: the MTP layers are in model chunk "
                                      f"{held[0] // pp} of rank {held[0] % pp}; Megatron-LM keeps them in the last "
                                      f"chunk of a rank (chunk {self.vp - 1})",
                                      hint="put m in one of the last --pp stages of the layout")

    def ranks(self) -> list[list[str]]:
        """``out[r][vp]``: each rank's chunks' symbols (bound layouts)."""
        return [[self.stage(r, k) for k in range(self.vp)] for r in range(self._pp())]

    def rank_text(self, rank: int) -> str:
        """Rank ``rank``'s chunks in words: ``E t*3 | t*2 | t*2 | m`` (bound layouts)."""
        return " | ".join(_run_length(c) or "(empty)" for c in self.ranks()[rank])

    def describe(self) -> str:
        """One line per run of ranks holding alike chunks, as Megatron's ``pretty_repr``:
        ``rank 0: E t*4 | t*4``."""
        rows, out = self.ranks(), []
        r = 0
        while r < len(rows):
            end = r
            while end + 1 < len(rows) and rows[end + 1] == rows[r]:
                end += 1
            who = f"rank {r}" if end == r else f"ranks {r}-{end}"
            out.append(f"{who}: " + self.rank_text(r))
            r = end + 1
        return "\n".join(out)

    def to_dict(self) -> dict:
        """The JSON form: ``text``, ``pp``, ``vp``, ``stages`` (symbols), ``layers_per_chunk``."""
        out = {"text": self.text, "pp": self.pp, "vp": self.vp, "stages": list(self.stages)}
        if self.pp is not None:
            out["layers_per_chunk"] = self.chunk_sizes()
        return out

    def _pp(self) -> int:
        if self.pp is None:
            raise ValueError("bind the layout to a pipeline degree first (with_pp)")
        return self.pp


def _run_length(symbols: str) -> str:
    """``"Etttt"`` → ``"E t*4"``."""
    out, i = [], 0
    while i < len(symbols):
        j = i
        while j < len(symbols) and symbols[j] == symbols[i]:
            j += 1
        out.append(symbols[i] + (f"*{j - i}" if j - i > 1 else ""))
        i = j
    return " ".join(out)


def format_layout(stages) -> str:
    """Compact layout text for per-stage symbols (``["Etttt", "tttt", "tttt", "tmL"]`` →
    ``"Et*4|(t*4|)*2tmL"``); :func:`parse_pipeline_layout` reads it back to the same stages."""
    stages = list(stages)
    text = _format(stages)
    if _FORMATTED_SYMBOLS.issuperset("".join(stages)):   # layout symbols only: the text reads back to them
        if len(_FORMATTED) >= _FORMATTED_SIZE:
            _FORMATTED.clear()
        _FORMATTED[text] = tuple(stages)
    return text


#: the texts :func:`format_layout` wrote and the stages each reads back to: :func:`parse_pipeline_layout` takes
#: them without the grammar (the planner formats its chunk layouts, then builds each row's layout from the text:
#: lark's import and parser table, about 0.07 s of CPU of every plan that tries one); kept small
_FORMATTED: dict[str, tuple[str, ...]] = {}
_FORMATTED_SIZE = 4096
_FORMATTED_SYMBOLS = frozenset(SYMBOLS) | {"|"}


def _format(stages: list) -> str:
    if len(stages) == 1:
        return _run_length(stages[0]).replace(" ", "")
    parts, i = [], 0
    while i < len(stages) - 1:
        j = i
        while j + 1 < len(stages) - 1 and stages[j + 1] == stages[i]:
            j += 1
        one = _run_length(stages[i]).replace(" ", "")
        parts.append(f"({one}|)*{j - i + 1}" if j > i and one else (one + "|") * (j - i + 1))
        i = j + 1
    return "".join(parts) + _run_length(stages[-1]).replace(" ", "")


def parse_pipeline_layout(text: str, pp: int | None = None, v: int | None = None) -> PipelineLayout:
    """Parse Megatron's layout ``text`` (module docstring); with ``pp``, bind it to ``pp``
    pipeline ranks (:meth:`PipelineLayout.with_pp`; ``v`` the virtual stages asked for).
    Megatron-LM's docs example (``docs/user-guide/features/pipeline_parallel_layout.md``,
    PP 16 × VPP 2):

    >>> lay = parse_pipeline_layout("Et*3|(tt|)*29,m|L", 16)
    >>> lay.vp, lay.mtp_rank(), lay.chunk_sizes()[0]
    (2, 14, [3, 2])
    >>> print(lay.describe())
    rank 0: E t*3 | t*2
    ranks 1-13: t*2 | t*2
    rank 14: t*2 | m
    rank 15: t*2 | L

    Raises
    ------
    CostgraphValueError
        Text outside the grammar, too long, a repetition over :data:`MAX_COUNT`, more than
        :data:`MAX_SYMBOLS` symbols once unrolled (each located by its column), or a ``pp``
        that does not divide the stages."""
    if not isinstance(text, str):
        raise CostgraphValueError(f"{FLAG} takes text, got {type(text).__name__}", hint=HINT)
    layout = _parse(text)
    return layout.with_pp(pp, v) if pp is not None else layout


@lru_cache(maxsize=256)
def _parse(text: str) -> PipelineLayout:
    known = _FORMATTED.get(text)
    if known is not None:   # written by format_layout: its stages, as the grammar reads them
        try:
            _check_bounds(text, known)
        except CostgraphValueError:
            return _parsed(text)   # refused as the parser locates it (an unrolled run's column)
        return PipelineLayout(text, known)
    return _parsed(text)


def _check_bounds(text: str, stages: tuple) -> None:
    """The parser's own checks of every bound (module docstring) on a text whose ``stages`` are known (one
    :func:`format_layout` wrote; each bound is checked in one function, which :func:`_parsed` calls too)."""
    _check_text(text)
    for m in re.finditer(r"[0-9]+", text):
        _check_count(text, m.group(), m.start() + 1)
    _check_symbols(text, sum(map(len, stages)) + len(stages) - 1, 1)
    _check_stages(text, len(stages))


def _check_text(text: str) -> None:
    """A layout text within :data:`MAX_TEXT` characters and not empty (checked before the grammar reads it)."""
    if len(text) > MAX_TEXT:
        raise _error(text[:MAX_TEXT], MAX_TEXT, f"the layout is {len(text):,} characters long: at most {MAX_TEXT}",
                     hint="repeat with x*n and (…)*n")
    if not text.strip(", "):
        raise _error(text, 1, "the layout is empty", hint=HINT)


def _check_symbols(text: str, symbols: int, column: int, what: str = "the layout") -> None:
    """At most :data:`MAX_SYMBOLS` symbols once unrolled (``what``: the layout, or a ``(…)*n`` at ``column``)."""
    if symbols > MAX_SYMBOLS:
        raise _error(text, column, f"{what} unrolls to more than {MAX_SYMBOLS:,} symbols",
                     hint="a stage per pipeline rank and model chunk: far fewer")


def _check_stages(text: str, stages: int) -> None:
    """At most :data:`MAX_STAGES` stages."""
    if stages > MAX_STAGES:
        raise _error(text, 1, f"the layout lists {stages:,} stages: at most {MAX_STAGES:,}",
                     hint="a stage per pipeline rank and model chunk (PP × VP): far fewer")


def _check_count(text: str, digits: str, column: int) -> int:
    """A repetition count at most :data:`MAX_COUNT` (its digits at ``column``), as an int."""
    if len(digits) > len(str(MAX_COUNT)) or int(digits) > MAX_COUNT:
        raise _error(text, column, f"the repetition *{digits[:12]}{'…' if len(digits) > 12 else ''} is over "
                     f"{MAX_COUNT}", hint=f"a count at most {MAX_COUNT}")
    return int(digits)


def _parsed(text: str) -> PipelineLayout:
    """``text`` read by the grammar (:data:`GRAMMAR`), every bound checked (:func:`parse_pipeline_layout`)."""
    _check_text(text)
    from lark.exceptions import UnexpectedInput

    try:
        tree = _lark().parse(text)
    except UnexpectedInput as e:
        raise _syntax(text, e) from None
    items = [_item(text, node) for node in tree.children]
    total = 0
    for size, column, _ in items:
        total += size
        _check_symbols(text, total, column)
    flat = "".join(sym * count for _, _, runs in items for sym, count in runs)
    _check_stages(text, flat.count("|") + 1)
    return PipelineLayout(text, tuple(flat.split("|")))


def _item(text, node) -> tuple[int, int, list[tuple[str, int]]]:
    """``(symbols once unrolled, column, [(run, times)])`` of one top-level item."""
    from lark import Token

    if isinstance(node, Token):   # a lone symbol (the rule inlined)
        return 1, node.column, [(str(node), 1)]
    if node.data == "symbol":
        tok = node.children[0]
        return 1, tok.column, [(str(tok), 1)]
    if node.data == "repeat":
        sym, count = node.children
        tok = sym.children[0] if not isinstance(sym, Token) else sym
        n = _count(text, count)
        return n, tok.column, [(str(tok), n)]
    run, count = node.children   # group: "(" symbol_run ")" "*" COUNT
    inner = [_item(text, x) for x in run.children]
    n = _count(text, count)
    body = "".join(sym * times for _, _, r in inner for sym, times in r)
    column = inner[0][1] - 1
    _check_symbols(text, len(body) * n, column, f"({body[:20]}{'…' if len(body) > 20 else ''})*{n}")
    return len(body) * n, column, [(body, n)]


def _count(text, tok) -> int:
    return _check_count(text, str(tok), tok.column)


def _syntax(text: str, e) -> CostgraphValueError:
    """A lark error in the layout's terms."""
    column = getattr(e, "column", -1)
    tok = getattr(e, "token", None)
    if column is None or column < 1 or (tok is not None and tok.type == "$END"):
        column = len(text) + 1
    got = text[column - 1] if column <= len(text) else None
    before = text[:column - 1].rstrip(",")
    if got is None:
        what = "a count after *" if before.endswith("*") else "the rest of a ( … )*n" if before.count("(") > \
            before.count(")") else "more"
        return _error(text, column, f"the layout ends where it needs {what}")
    if got == "(" and before.count("(") > before.count(")"):
        return _error(text, column, "parentheses do not nest in a layout (Megatron-LM unrolls one level)",
                      hint="write the inner run out, or repeat it with x*n")
    if got == ")" and before.endswith("("):
        return _error(text, column, "an empty ( ): a parenthesis holds symbols")
    if got == ")" and before.count("(") <= before.count(")"):
        return _error(text, column, "')' closes no '('")
    if before.endswith(")") and got != "*":
        return _error(text, column, "a parenthesized run needs its repetition: (…)*n",
                      hint="e.g. (t*4|)*14; without a count write the run out")
    if before.endswith("*"):
        return _error(text, column, f"a count after *, not {got!r}", hint="x*n with n a whole number, e.g. t*4")
    if got == "*":
        return _error(text, column, "* repeats the symbol or ( … ) before it: nothing to repeat here")
    if got.isdigit():
        return _error(text, column, f"a number without * before it ({got!r})", hint="t*4, not t4")
    if got.isspace():
        return _error(text, column, "a space in the layout (Megatron-LM reads none)", hint="write it without spaces")
    return _error(text, column, f"{got!r} is not a layout symbol")


@cache
def _lark():
    from lark import Lark

    return Lark(GRAMMAR, parser="lalr", propagate_positions=True)


def pipeline_layout_for(text: str, model, values: dict | None = None, pp: int | None = None,
                        v: int | None = None) -> PipelineLayout:
    """``text`` parsed, bound to ``pp`` ranks (default: one stage per rank, or ``stages / v``)
    and checked against ``model`` (a :class:`costgraph.Model` or a ``CostGraph``) at
    ``values`` (symbol → int): its Transformer layers (the top-level repeat groups before
    its output head) and MTP depths (the groups after it,
    :func:`costgraph.parallel.layer_split.layer_groups`). What the planner calls to validate a
    candidate layout.

    Raises
    ------
    CostgraphValueError
        Parse errors, a ``pp``/``v`` the stages do not match, a layout Megatron would refuse
        for this model, or a model whose layer counts have no number at ``values``."""
    from ..engine.symbols import as_expr
    from .layer_split import layer_groups

    cg = getattr(model, "graph", model)
    layout = parse_pipeline_layout(text)
    n = len(layout.stages)
    if pp is None:
        pp = n // v if v and n % v == 0 else n
    layout = layout.with_pp(pp, v)
    main, post = layer_groups(cg)
    counts = [as_expr(g.count).xreplace(values or {}) for g in main + post]
    if not all(c.is_Integer for c in counts):
        raise CostgraphValueError(f"{FLAG} needs the model's layer counts as numbers",
                                  hint="give --config NAME or --set l=…")
    layout.validate(int(sum(counts[:len(main)])), int(sum(counts[len(main):])), model=f"'{cg.name}'")
    return layout
