"""How many layers each pipeline stage builds, as Megatron-LM splits them.

Megatron-LM @ d98e8a64, ``megatron/core/transformer/transformer_block.py::
get_num_layers_to_build`` and ``transformer_layer.py::get_transformer_layer_offset``
(no ``pipeline_model_parallel_layout``):

* ``first``/``last`` (``--decoder-first-pipeline-num-layers`` /
  ``--decoder-last-pipeline-num-layers``): the first (last) rank builds that
  many; the other ``p − (number given)`` ranks share the rest evenly (it must
  divide); not combinable with the ``account_for_*`` options;
* otherwise ``L' = L + [account_for_embedding] + [account_for_loss]`` must
  divide by ``p``; each rank builds ``L'/p``, one fewer on the first chunk of
  rank 0 (embedding) and on the last chunk of rank ``p − 1`` (loss);
* with ``v`` virtual stages each rank's count is split into ``v`` equal
  chunks (it must divide); chunk ``(vp, r)`` is the ``vp·p + r``-th block of
  consecutive layers (the offsets are the running sums in that order).

A *layer* is one iteration of the model's top-level repeat groups taken in
program order (DeepSeek-V3: its dense layers, then its MoE layers), so a
stage's share of each group is the part of the group's range its chunks
cover — contiguous, as Megatron assigns them.
"""

from __future__ import annotations

import functools

import sympy

from ..engine.symbols import as_expr
from ..errors import CostgraphValueError
from ..numbers.minmax import smax, smin

ZERO = sympy.Integer(0)
#: The most pipeline chunks (stages × virtual stages) a split is made for: one list entry each, so a
#: degree such as --pp 10**30 is refused before memory is spent on it (plan's 10**6 devices at most).
MAX_CHUNKS = 10**6


def chunk_sizes(total, p: int, v: int = 1, first=None, last=None, embedding: bool = False,
                loss: bool = False) -> list[list[sympy.Expr]]:
    """``sizes[r][vp]``: decoder layers chunk ``vp`` of rank ``r`` builds, for
    ``total`` layers (an int or a SymPy expression) on ``p`` ranks (an int)."""
    total = as_expr(total)
    if p * v > MAX_CHUNKS:
        raise CostgraphValueError(f"{p:,} pipeline stages × {v:,} virtual stages: more than {MAX_CHUNKS:,} chunks "
                                  "of layers", hint="a pipeline stage holds whole layers: at most as many stages "
                                  "as the model has layers")
    if first is not None or last is not None:
        left = p - (first is not None) - (last is not None)
        rest = total - (first or 0) - (last or 0)
        middle = rest / left if left > 0 else ZERO
        per = [first if r == 0 and first is not None else last if r == p - 1 and last is not None else middle
               for r in range(p)]
    else:
        per = [(total + int(embedding) + int(loss)) / p] * p
    sizes = [[as_expr(n) / v for _ in range(v)] for n in per]
    if embedding:
        sizes[0][0] -= 1
    if loss:
        sizes[p - 1][v - 1] -= 1
    return sizes


def chunk_ranges(sizes: list[list[sympy.Expr]]) -> list[list[tuple[sympy.Expr, sympy.Expr]]]:
    """``ranges[r][vp] = (offset, size)``: offsets as running sums in Megatron's order ``vp·p + r``."""
    p, v = len(sizes), len(sizes[0])
    out = [[None] * v for _ in range(p)]
    at = ZERO
    for vp in range(v):
        for r in range(p):
            out[r][vp] = (at, sizes[r][vp])
            at = at + sizes[r][vp]
    return out


def stage_shares(counts: list, p: int, v: int = 1, first=None, last=None, embedding: bool = False,
                 loss: bool = False, sizes=None) -> list[list[sympy.Expr]]:
    """``shares[r][k]``: iterations of top-level group ``k`` (of ``counts``, in
    program order) that rank ``r`` holds, contiguous (module docstring).
    ``sizes``: ``sizes[r][vp]``, each chunk's layers given (an explicit layout,
    :meth:`costgraph.parallel.pipeline_layout.PipelineLayout.chunk_sizes`) instead of
    Megatron's split options. Computed once per distinct arguments (the planner's layouts share
    their pipeline's split; SymPy's ``Min``/``Max`` of symbolic counts are slow to build)."""
    counts = tuple(as_expr(c) for c in counts)
    if sizes is not None:
        sizes = tuple(tuple(as_expr(n) for n in row) for row in sizes)
    return [list(row) for row in _stage_shares(counts, p, v, first, last, embedding, loss, sizes)]


@functools.lru_cache(maxsize=1024)
def _stage_shares(counts: tuple, p: int, v: int, first, last, embedding: bool, loss: bool, sizes) -> tuple:
    """:func:`stage_shares` on hashable arguments (rows as tuples)."""
    ranges = chunk_ranges(sizes if sizes is not None else chunk_sizes(sympy.Add(*counts), p, v, first, last,
                                                                       embedding, loss))
    if len(counts) == 1:
        return tuple((sympy.Add(*[n for _, n in ranges[r]]),) for r in range(p))
    starts, at = [], ZERO
    for c in counts:
        starts.append(at)
        at = at + c
    out = []
    for r in range(p):
        row = []
        for s, c in zip(starts, counts):
            parts = [_max(ZERO, _min(o + n, s + c) - _max(o, s)) for o, n in ranges[r]]
            row.append(sympy.Add(*parts))
        out.append(tuple(row))
    return tuple(out)


@functools.lru_cache(maxsize=8192)
def _min(a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    """``sympy.Min(a, b)``, once per arguments: the splits of one model meet the same chunk and group bounds
    again and again (DeepSeek-V3's plan: 636 of them, 356 distinct), and SymPy proves their order per call
    (a millisecond or more over the layer counts' symbols; :func:`costgraph.numbers.minmax.smin` builds the same
    object without the proof where the order of ``a`` and ``b`` changes with the counts)."""
    return smin(a, b)


@functools.lru_cache(maxsize=8192)
def _max(a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    """``sympy.Max(a, b)``, once per arguments (:func:`_min`; :func:`costgraph.numbers.minmax.smax`)."""
    return smax(a, b)


def check_split(total: int, p: int, v: int = 1, first=None, last=None, embedding: bool = False,
                loss: bool = False, what: str = "layers") -> None:
    """Refuse, as Megatron asserts, a split of ``total`` layers (an int) that does not come out whole.

    Raises
    ------
    CostgraphValueError
        With a hint naming the options that would split it.
    """
    hint_uneven = ("give the first and last stages their own counts: --decoder-first-pipeline-num-layers / "
                   "--decoder-last-pipeline-num-layers (the rest must divide), or --account-for-embedding-"
                   "in-pipeline-split / --account-for-loss-in-pipeline-split")
    if first is not None or last is not None:
        given = (first or 0) + (last or 0)
        left = p - (first is not None) - (last is not None)
        if given > total:
            raise CostgraphValueError(f"the first and last stages take {given} of the {total} {what}",
                                      hint=f"at most {total} together")
        if left > 0 and (total - given) % left:
            raise CostgraphValueError(
                f"{total - given} {what} left after the first/last stages do not divide into the other {left} stages "
                "(Megatron-LM get_num_layers_to_build)", hint=f"first + last ≡ {total % left} (mod {left})")
        if left == 0 and given != total:
            raise CostgraphValueError(f"with p = {p} the first and last stages hold all {total} {what}, not {given}")
    else:
        n = total + int(embedding) + int(loss)
        extra = (" + embedding" if embedding else "") + (" + loss" if loss else "")
        if n % p:
            raise CostgraphValueError(f"{p} pipeline stages cannot share the {n} {what}{extra} evenly "
                                      "(Megatron-LM get_num_layers_to_build)", hint=hint_uneven)
        if v > 1 and (n // p) % v:
            raise CostgraphValueError(f"{p} stages × {v} virtual stages cannot share the {n} {what}{extra} evenly",
                                      hint=f"p·v must divide {n}")
    sizes = chunk_sizes(total, p, v, first, last, embedding, loss)
    for r, row in enumerate(sizes):
        for n in row:
            if n < 0:
                raise CostgraphValueError(f"stage {r} would build {n} {what}", hint="fewer stages")
            if not n.is_integer:
                raise CostgraphValueError(f"stage {r}'s {sum(row)} {what} do not divide into v = {v} model chunks",
                                          hint=f"a count per stage divisible by {v}")


def layer_groups(cg) -> tuple[list, list]:
    """``(main, post)``: the top-level repeat groups in program order, split in two at the
    operator that produces the model's first output (its head). ``main`` are the layers
    split across the stages; ``post`` the groups after the head — DeepSeek-V3's MTP depths,
    which read the main model's output. Megatron-LM never counts MTP layers in the split:
    without a layout they all sit on the last stage, with the loss
    (``multi_token_prediction.py::mtp_on_this_rank`` @ d98e8a64); with one, on the rank
    whose stage lists ``m``."""
    store = cg.memo("layer_groups")   # once per graph, in its own cache
    if "groups" not in store:
        store["groups"] = _layer_groups(cg)
    main, post = store["groups"]
    return list(main), list(post)


def _layer_groups(cg) -> tuple[list, list]:
    top = [g for path, g in cg.groups.items() if "/" not in path]
    if not top or not cg.outputs:
        return top, []
    order = {path: i for i, (path, _) in enumerate(cg.ops())}
    head = order.get(cg.tensors[cg.outputs[0]].producer)
    if head is None:
        return top, []

    def start(g):
        return min((i for path, i in order.items() if path.startswith(g.path + "/")), default=-1)

    post = [g for g in top if start(g) > head]
    return [g for g in top if g not in post], post
