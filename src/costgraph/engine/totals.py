"""Sums over the graph: per node, per block, per layer (one iteration of a
repeat group) and per model.

Quantities (all exact SymPy expressions in the model's dimension symbols):

``params``
    Parameters: the elements of every distinct weight, each counted once
    (a tied head adds nothing), times its count.
``params_active``
    Parameters a token passes through: inside ``repeat E as experts active k``
    only ``k`` of the ``E`` copies (Mixtral-8x7B: 12.9 B of 46.7 B).
``flops_forward``, ``flops_backward_input``, ``flops_backward_weight``, ``flops_backward``
    FLOPs under a named convention (:mod:`costgraph.engine.conventions`).
``activation_bytes``
    Bytes of the tensors kept for the backward pass: every storage saved by
    a node in scope is counted once, however many nodes keep it or views of
    it, at the bytes per element of its role (:mod:`costgraph.engine.precision`).
``kv_cache_bytes``
    Bytes of the tensors marked ``cache(...)`` (keys and values, or MLA's
    latent) for ``b`` sequences holding ``s`` tokens each (for a prompt of
    ``s`` and ``n`` generated tokens, evaluate at ``s + n``); a sliding
    window keeps ``Min(s, w)`` positions; a recurrent state (Mamba's
    ``selective_scan``, ``conv1d``) is kept whole per sequence.
``kv_cache_bytes_per_token``
    The same for one token of one sequence, windows not applied (a recurrent
    state does not grow with tokens: 0).

A node inside ``repeat l`` counts ``l`` times at model scope and once at
layer scope. FLOPs and activations of a mixture's experts count the active
copies (every token through ``k`` experts: perfect balance); parameters count
all. Totals are returned expanded (canonical form).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy

from ..choices import CAUSAL as _CAUSAL
from ..errors import CostgraphValueError
from .graph import ZERO, CostGraph
from .precision import Precision
from .quantities import QUANTITIES

CAUSAL = _CAUSAL.values


def _pairs_before(t, w, exact: bool):
    """Σ_{i=1..t} Min(i, w): the (query, key) pairs a causal mask (window
    ``w``, None: none) keeps for the first ``t`` queries of a square; as an
    area (``exact=False``) ``u²/2 + (t − u)·w``, exactly ``u(u+1)/2 + (t − u)·w``,
    ``u = Min(t, w)``."""
    u = t if w is None else sympy.Min(t, w)
    tri = u * (u + 1) / 2 if exact else u ** 2 / 2
    return tri if w is None else tri + (t - u) * w


def causal_pairs(m, n, w=None, exact: bool = False) -> sympy.Expr:
    """The (query, key) pairs a causal mask keeps when ``m`` queries, aligned
    to the newest of ``n`` keys (the bottom-right-aligned mask), each meet the
    keys at or before their own position, at most the last ``w`` (a sliding
    window; None: no window).

    ``exact=False``: the area convention of ``--causal half`` — ``s²/2`` for a
    square, ``s·w − w²/2`` for a window ``w ≤ s``, ``m·n − m²/2`` for ``m ≤ n``
    queries over ``n`` keys; ``exact=True``: the whole number of pairs —
    ``s(s+1)/2``, ``s·w − w(w−1)/2``, ``m·n − m(m−1)/2``. With more queries
    than keys (``m > n``) the first ``m − n`` queries meet no key and the last
    ``n`` form the square: ``n²/2`` and ``n(n+1)/2`` — never negative. This is
    the mask of FlashAttention 2.1 and later for ``causal=True`` with
    ``seqlen_q ≠ seqlen_k`` (Dao-AILab/flash-attention README, "2.1: Change
    behavior of causal flag": "the causal mask is aligned to the bottom right
    corner of the attention matrix, instead of the top-left corner"; seqlen_q
    = 5 over seqlen_k = 2 keeps 0, 0, 0, 1, 2 keys per row, "if the row of the
    mask is all zero, the output will be zero") and of PyTorch's ``torch.nn.attention.bias.causal_lower_right``;
    PyTorch's ``scaled_dot_product_attention(is_causal=True)`` aligns it to
    the top left instead. Valid for all sizes (``Min``/``Max`` expressions)."""
    return _pairs_before(n, w, exact) - _pairs_before(sympy.Max(n - m, 0), w, exact)


def causal_share(attrs: dict, causal: str) -> sympy.Expr:
    """The share of a product's counted FLOPs its causal mask keeps: 1 under
    ``full`` or for a product not marked ``causal``; else :func:`causal_pairs`
    over the pairs counted (``m · Min(n, w)``), from the ``queries`` and
    ``keys`` the matmul rule records (a graph without them: ``1/2``)."""
    if causal == "full" or not attrs.get("causal"):
        return sympy.Integer(1)
    m, n, w = attrs.get("queries"), attrs.get("keys"), attrs.get("window")
    if m is None or n is None:
        return sympy.Rational(1, 2)
    counted = m * (n if w is None else sympy.Min(n, w))
    return causal_pairs(m, n, w, exact=causal == "exact") / counted


@dataclass(frozen=True)
class Scope:
    """A part of the graph: node ``prefix`` ('' for the whole model) and the
    multiplicity that one instance of it has (divided out of counts)."""

    name: str
    prefix: str
    per: sympy.Expr
    per_active: sympy.Expr

    def contains(self, path: str) -> bool:
        return not self.prefix or path == self.prefix or path.startswith(self.prefix + "/")


MODEL_SCOPE = Scope("model", "", sympy.Integer(1), sympy.Integer(1))
"""The whole model: every node, counts as they are."""


def resolve_scope(cg: CostGraph, scope: str) -> Scope:
    """``model``; ``layer`` (the model's one repeat group, per iteration); or the
    path of a repeat group, block or node (per instance).

    Raises
    ------
    CostgraphValueError
        For ``layer`` in a model with no or several top-level repeat groups,
        or an unknown path; the message lists the choices.
    """
    if scope == "model":
        return MODEL_SCOPE
    if scope == "layer":
        top = [g for g in cg.groups.values() if "/" not in g.path] or list(cg.groups.values())
        if len(top) != 1:
            raise CostgraphValueError(
                f"model '{cg.name}' has {len(top)} repeat groups; 'layer' needs exactly one",
                hint="name one as the scope: " + ", ".join(g.path for g in top) if top else None)
        return Scope("layer", top[0].path, top[0].multiplicity, top[0].active_multiplicity)
    if scope in cg.groups:
        g = cg.groups[scope]
        return _instanced(cg, Scope(scope, scope, g.multiplicity, g.active_multiplicity))
    if scope in cg.blocks:
        return _instanced(cg, Scope(scope, scope, cg.blocks[scope].count, cg.blocks[scope].active))
    if scope in cg.nodes:
        n = cg.nodes[scope]
        return _instanced(cg, Scope(scope, scope, n["count"], n["active"]))
    raise CostgraphValueError(
        f"no scope '{scope}' in model '{cg.name}'",
        hint="use model, layer, or a path: " + ", ".join(sorted([*cg.groups, *cg.blocks])[:12]))


def _instanced(cg: CostGraph, sc: Scope) -> Scope:
    """``sc``, refused when it has no instance in the model as built (a branch whose condition
    holds for no iteration, ``if j < l - ns`` with ``ns = 0``): a per-instance figure of it
    would be 0/0 (issue 30 item 2)."""
    if sc.per == 0:
        raise CostgraphValueError(
            f"scope '{sc.name}' of model '{cg.name}' is empty: it has no instance (its branch's condition "
            f"holds for no iteration, or it repeats 0 times), so it has no per-instance costs",
            hint="name a scope with instances (model, layer, or another path), or set the option or size that "
                 "makes this branch run")
    return sc


@lru_cache(maxsize=4096)
def _rel(count, per):
    """``count / per`` with common factors cancelled (``E l - E k_d`` over ``l - k_d`` is ``E``).

    Memoized: a model has a handful of distinct counts (``1``, ``l``, ``E l``...)
    met at every node."""
    if per == 1:
        return count
    if count == per:
        return sympy.Integer(1)
    return sympy.cancel(count / per)


def expand_sum(terms) -> sympy.Expr:
    """The expanded sum of ``terms``: each term multiplied out on its own
    (products and integer powers of sums only, the one expansion a cost
    needs), then one flat ``Add``. Equal to ``sympy.expand(Add(*terms))`` and
    about twice as fast on a model's rows."""
    return sympy.Add(*[sympy.expand(t, power_exp=False, power_base=False, log=False, basic=False)
                       for t in terms])


def _whole(e) -> bool:
    """Whether ``e`` (a ratio of counts) is a polynomial: one instance of it is whole."""
    return sympy.fraction(e)[1] == 1


def totals(cg: CostGraph, scope: Scope, convention: str, precision: Precision,
           causal: str = _CAUSAL.default, rows: list[dict] | None = None) -> dict[str, sympy.Expr]:
    """Every quantity of :data:`QUANTITIES` summed over ``scope``, expanded.

    ``rows``: the scope's :func:`breakdown`, when the caller already has it."""
    if rows is None:
        rows = breakdown(cg, scope, convention, precision, causal)
    leaves = [r for r in rows if r["kind"] != "block"]
    return {q: expand_sum([r["count"] * r[q] for r in leaves]) for q in QUANTITIES}


def grouped_totals(cg: CostGraph, scope: Scope, leaves: list[dict]):
    """Totals of ``scope`` and their grouped form, from one pass of sums.

    Returns ``(totals, parts)``: ``totals[q]`` as :func:`totals` gives it;
    ``parts[q] = ([(count, per_instance), ...], rest)`` with one pair per
    top-level repeat group inside the scope (``l`` and one layer's sum) and
    the rest expanded: ``totals[q] == expand(Σ count·per_instance + rest)``.
    Summing each group once per instance, then scaling, costs less than
    expanding the whole model's sum."""
    tops = [p for p in cg.groups if "/" not in p and scope.contains(p) and p != scope.prefix]
    inside: dict[str, list[dict]] = {p: [] for p in tops}
    rest_rows = []
    for r in leaves:
        top = r["path"].split("/", 1)[0]
        (inside[top] if top in inside and "/" in r["path"] else rest_rows).append(r)
    counts = {p: _rel(cg.groups[p].multiplicity, scope.per) for p in tops}
    out, parts = {}, {}
    for q in QUANTITIES:
        if q == "flops_backward":
            continue
        groups = [(counts[p], expand_sum([_rel(r["count"], counts[p]) * r[q] for r in inside[p]])) for p in tops]
        rest = expand_sum([r["count"] * r[q] for r in rest_rows])
        parts[q] = (groups, rest)
        out[q] = expand_sum([c * g for c, g in groups] + [rest])
    bi, bw = parts["flops_backward_input"], parts["flops_backward_weight"]
    parts["flops_backward"] = ([(c, x + y) for (c, x), (_, y) in zip(bi[0], bw[0])], bi[1] + bw[1])
    out["flops_backward"] = out["flops_backward_input"] + out["flops_backward_weight"]
    return {q: out[q] for q in QUANTITIES}, parts


def _ancestors(path: str):
    """The enclosing paths of ``path``, innermost first (``a/b/c`` → ``a/b``, ``a``, ``''``)."""
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        yield path
    yield ""


def _home(cg: CostGraph, path: str, store) -> str:
    """The innermost block or repeat group around node ``path`` with as many
    (active) instances as ``store``: where one copy of a storage that several
    instances of the node share (a rotary table made once for all layers, an
    encoder output read by every decoder layer) is charged."""
    for anc in _ancestors(path):
        if anc == "":
            return ""
        if anc in cg.groups:
            mult = cg.groups[anc].active_multiplicity
        elif anc in cg.blocks:
            mult = cg.blocks[anc].active
        else:
            continue
        if _whole(_rel(store.active, mult)):
            return anc
    return ""


def _saved_bytes(cg: CostGraph, scope: Scope, path: str, d: dict, active, precision: Precision, share,
                 seen_storage: set[str], shared_rows: list[dict]):
    """Bytes of the storages node ``path`` (attributes ``d``) keeps for backward, per one
    instance of its row; a storage already seen is not counted again, and one with fewer
    copies than the node is charged to a ``storage`` row appended to ``shared_rows``
    (see :func:`breakdown`)."""
    act = ZERO
    for tid in d["cost"].saved:
        store = cg.tensors[cg.tensors[tid].storage]
        if store.id in seen_storage:
            continue
        seen_storage.add(store.id)
        part = 1 if share is None else share(store.id)
        if part is None:
            continue
        nbytes = store.numel * precision.bytes(store.role) * part
        if _rel(store.active, d["active"]) == 1:
            act += nbytes * active
            continue
        home = _home(cg, path, store)
        row_path = f"{home}/saved:{store.id}" if home else f"saved:{store.id}"
        if not scope.contains(row_path):
            continue   # a storage shared by more than this scope: charged where it is whole
        s_count = _rel(store.count, scope.per)
        s_active = _rel(_rel(store.active, scope.per_active), s_count)
        shared_rows.append(_row(row_path, "storage", s_count, activation_bytes=nbytes * s_active))
    return act


def _kv_cache_bytes(cg: CostGraph, entries, precision: Precision) -> tuple:
    """Bytes of one node's KV-cache ``entries`` for ``b`` sequences of ``s`` tokens (a window
    caps the positions kept; a recurrent state is whole), and per token of one sequence."""
    kv = kv_tok = ZERO
    for entry in entries:
        t = cg.tensors[entry.tensor]
        if entry.shared:   # another layer's cache, read (KV sharing): stored once, there
            continue
        if entry.state:   # a fixed-size recurrent state: whole, per sequence
            kv += t.numel * precision.bytes(t.role)
            continue
        seq = t.shape[-2]
        per_pos = t.numel / seq * precision.bytes(t.role)
        if entry.fp8_block is not None:   # FP8 values, one fp32 scale per block of fp8_block (CacheEntry)
            per_pos = t.numel / seq * (1 + sympy.ceiling(t.shape[-1] / entry.fp8_block) * 4 / t.shape[-1])
        kv += per_pos * (seq if entry.window is None else sympy.Min(seq, entry.window))
        kv_tok += per_pos / t.shape[0]
    return kv, kv_tok


def breakdown(cg: CostGraph, scope: Scope, convention: str, precision: Precision,
              causal: str = _CAUSAL.default, leaves_only: bool = False, share=None) -> list[dict]:
    """One row per operator node in ``scope`` (program order), then one per
    shared storage, then one per block and repeat group, each with ``path``,
    ``kind``, ``count`` (relative to the scope) and the quantities of *one*
    instance.

    **Saved storages** are counted once each, however many nodes keep them
    or views of them: a storage is charged to the first node in scope that
    keeps it. When that node has more instances than the storage has copies
    (one rotary table kept by the rope of every layer; T5's encoder output
    kept by every decoder layer) the storage is charged instead to a row of
    its own, kind ``storage``, path ``<home>/saved:<storage id>``, placed in
    the innermost block or group around the node that has as many instances
    as the storage (often the model itself). A scope smaller than that home
    does not contain the storage: every scope's total is then a whole number
    of bytes for any values, and node, storage and block rows add up to the
    scope's totals.

    Every count-dependent quantity is stored already multiplied into "per
    one instance of the row" terms: FLOPs and activations use the active
    copies, ``params`` all copies.

    ``causal="half"`` counts the products marked ``causal = true`` (QKᵀ and
    scores·V under a causal mask) over the (query, key) pairs the mask keeps,
    as an area (:func:`causal_pairs`: half the square, ``s·w − w²/2`` under a
    window ``w``, ``m·n − m²/2`` for ``m`` queries over ``n`` keys);
    ``"exact"`` over the whole number of pairs (``s(s+1)/2``...); ``"full"``
    (default) counts the whole square, as PaLM, Megatron-LM and
    FlopCounterMode do.

    ``leaves_only``: only the node and storage rows (what totals need); the
    block rows come from :func:`aggregate`.

    ``share``: for analyses of one device (training memory): a function of a
    storage id giving the share of it one device keeps — ``1``, ``1/t`` where
    tensor parallelism splits it — or ``None`` when it is not kept at all
    (recomputed in the backward pass). Default: every storage, whole.
    """
    caches: dict[str, list] = {}
    for entry in cg.caches:
        caches.setdefault(entry.path, []).append(entry)
    seen_storage: set[str] = set()
    seen_weight: set[str] = set()
    rows = []
    shared_rows = []
    for path, d in cg.ops():
        if not scope.contains(path):
            continue
        c = d["cost"]
        count = _rel(d["count"], scope.per)
        # compute-side quantities are scaled from the active copies to per-row
        active = _rel(_rel(d["active"], scope.per_active), count)
        params = params_active = ZERO
        for wid in c.weights:
            if wid not in seen_weight and not cg.weights[wid].buffer:   # a buffer is not a parameter
                seen_weight.add(wid)
                params += cg.weights[wid].numel
                params_active += cg.weights[wid].numel * active
        act = _saved_bytes(cg, scope, path, d, active, precision, share, seen_storage, shared_rows)
        half = causal_share(d["attrs"], causal)
        kv, kv_tok = _kv_cache_bytes(cg, caches.get(path, ()), precision)
        bi = c.backward_input.under(convention) * active * half
        bw = c.backward_weight.under(convention) * active * half
        rows.append(_row(path, d["kind"], count, params=params, params_active=params_active,
                         flops_forward=c.forward.under(convention) * active * half,
                         flops_backward_input=bi, flops_backward_weight=bw, flops_backward=bi + bw,
                         activation_bytes=act, kv_cache_bytes=kv, kv_cache_bytes_per_token=kv_tok))
    rows.extend(shared_rows)
    if leaves_only:
        return rows
    rows.extend(_aggregate(cg, scope, rows))
    return rows


def _row(path: str, kind: str, count, **quantities) -> dict:
    row = {"path": path, "kind": kind, "count": count}
    for q in QUANTITIES:
        row[q] = quantities.get(q, ZERO)
    return row


def group_total(cg: CostGraph, scope: Scope, leaves: list[dict], path: str, q: str) -> sympy.Expr:
    """Quantity ``q`` of one instance of the repeat group or block at ``path``,
    summed from the scope's leaf rows (expanded)."""
    mult = cg.groups[path].multiplicity if path in cg.groups else cg.blocks[path].count
    count = _rel(mult, scope.per)
    return expand_sum([_rel(r["count"], count) * r[q] for r in leaves if r["path"].startswith(path + "/")])


def aggregate(cg: CostGraph, scope: Scope, rows: list[dict]) -> list[dict]:
    """The block rows of a :func:`breakdown` from its leaf rows."""
    return _aggregate(cg, scope, rows)


def _aggregate(cg: CostGraph, scope: Scope, rows: list[dict]) -> list[dict]:
    """One row per block and repeat group in scope: the sum of the rows inside
    it, per one of its instances. Each row is added to each of its enclosing
    blocks once (linear in rows × depth)."""
    parents = {}
    for path, g in cg.groups.items():
        parents[path] = ("repeat", g.multiplicity)
    for path, b in cg.blocks.items():
        parents[path] = (b.kind, b.count)
    inside: dict[str, list[dict]] = {}
    for r in rows:
        for anc in _ancestors(r["path"]):
            if anc in parents:
                inside.setdefault(anc, []).append(r)
    out = []
    for path in sorted(parents, key=lambda p: (p.count("/"), p)):
        if not scope.contains(path) or path == scope.prefix:
            continue
        kind, mult = parents[path]
        count = _rel(mult, scope.per)
        members = inside.get(path, [])
        row = {"path": path, "kind": "block", "block": kind, "count": count}
        for q in QUANTITIES:
            row[q] = expand_sum([_rel(r["count"], count) * r[q] for r in members])
        out.append(row)
    return out


def buffers(cg: CostGraph) -> dict[str, tuple[sympy.Expr, str | None]]:
    """The model's buffers (``param NAME[shape]: buffer``; PyTorch's ``register_buffer``): weight id →
    (elements, all copies; its own dtype or None: the weights'). Not parameters: ``params`` leaves them
    out, as ``model.parameters()`` does; their bytes count with the weights' in memory."""
    return {wid: (w.count * w.numel, w.dtype) for wid, w in cg.weights.items() if w.buffer}
