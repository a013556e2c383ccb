"""Prefix caching and chunked prefill, each a small function over
:meth:`costgraph.inference.phases.Inference.step` (``q`` new tokens against ``n`` cached).

**Prefix caching** (``--shared-prefix S``: the first ``S`` prompt tokens are the same in all
``b`` sequences, vLLM's automatic prefix caching, on by default in the V1 engine):

* *memory*: the prefix's KV cache is stored once. vLLM hashes and shares **full blocks** only
  (vllm @ 001cabc1 ``vllm/v1/core/kv_cache_utils.py``: a block's hash covers its
  ``block_size`` tokens), so ``⌊S/k⌋`` blocks are shared and each sequence keeps
  ``P + G − ⌊S/k⌋·k`` positions of its own, rounded up to blocks;
* *prefill*: the first sequence computes its whole prompt, ``step(P, 0)`` at ``b = 1``; the
  other ``b − 1`` compute only their unshared part against the cached prefix,
  ``step(P − S, S)`` at ``b − 1`` — two steps (the prefix is in the cache only once a step has
  written it: sequences arriving in the same step as the first do not hit it). ``S < P``: vLLM
  always computes at least the last prompt token (its logits);
* *decode*: unchanged (paged attention reads each sequence's blocks, the shared ones too).

**Chunked prefill** (``--chunk C``: each prompt is prefilled ``C`` tokens at a time, all ``b``
sequences in lockstep): chunk ``j`` is ``step(C, j·C)``, the last ``step(P − (m−1)C, (m−1)C)``
with ``m = ⌈P/C⌉`` chunks; the time to first token is their sum. The sum over the middle chunks
is a closed form: each operator's roofline time ``max(FLOPs/peak, bytes/bandwidth)`` is
piecewise polynomial in ``j`` (linear: the keys read grow with ``n``; ``Min(n, w)`` under a
window), so it is split where its pieces cross and each piece summed exactly
(:func:`sum_piecewise`) — no loop per chunk.
"""

from __future__ import annotations

from itertools import combinations

import sympy

from ..engine.symbols import as_expr
from ..errors import CostgraphValueError
from .phases import G, N, P


def check_prefix(inf, shared: int, prompt: int) -> None:
    """Refuse a shared prefix that is not a whole number in [1, P) or a model with recurrent
    states (a Mamba state is not a per-position cache to share)."""
    if isinstance(shared, bool) or not isinstance(shared, int) or not 1 <= shared < prompt:
        raise CostgraphValueError(f"--shared-prefix must be a whole number from 1 to P - 1 = {prompt - 1}, "
                                  f"not {shared!r}",
                                  hint="vLLM computes at least the last prompt token of every sequence")
    if inf.states:
        raise CostgraphValueError("--shared-prefix: prefix caching of recurrent states is not modelled",
                                  hint="the prefix is shared through per-position KV blocks")
    if getattr(inf, "once", None):   # inference/request.py: an encoder, a vision tower per request
        raise CostgraphValueError("--shared-prefix: prefix caching of a model with a part run once per request "
                                  "(an encoder, a vision tower: its own input each request) is not modelled",
                                  hint="leave out --shared-prefix; the prefill counts that part once per request")


def prefix_kv_bytes(inf, shared: int, page: int, batch=None) -> sympy.Expr:
    """KV cache of ``batch`` sequences (default ``b``) of ``P + G`` positions whose first
    ``shared`` tokens are one prefix: ``⌊S/k⌋`` full blocks once, the rest per sequence
    (module docstring), per device."""
    batch = inf.b if batch is None else as_expr(batch)
    kept = (shared // page) * page
    once = inf.kv_cache_bytes(kept, batch=1, page=page) if kept else sympy.Integer(0)
    return once + inf.kv_cache_bytes(P + G - kept, batch=batch, page=page)


def prefix_prefill_seconds(inf, seconds, shared: int, batch: int) -> sympy.Expr:
    """Time to first token with a shared prefix: the first sequence's ``step(P, 0)`` (``b = 1``)
    + the other ``b − 1`` sequences' ``step(P − S, S)``; ``seconds`` maps a
    :class:`~costgraph.inference.phases.Step` to its time (the roofline's ``step_seconds``)."""
    b = inf.b
    first = as_expr(seconds(inf.step(P, 0))).xreplace({b: sympy.Integer(1)})
    if batch == 1:
        return first
    return first + as_expr(seconds(inf.step(P - shared, shared))).xreplace({b: sympy.Integer(batch - 1)})


def check_chunk(chunk) -> None:
    """Refuse a chunk size that is not a positive whole number."""
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise CostgraphValueError(f"--chunk must be a positive whole number of tokens, not {chunk!r}",
                                  hint="vLLM's chunk is max_num_batched_tokens, e.g. 2048 or 8192")


def chunked_prefill_seconds(inf, seconds, subs: dict, prompt: int, chunk: int) -> sympy.Expr:
    """Exact time of a prefill of ``prompt`` tokens in chunks of ``chunk`` (module docstring),
    every symbol at ``subs``; a number. Bounded time for any ``prompt / chunk``."""
    m = -(-prompt // chunk)
    if m == 1:
        return as_expr(seconds(inf.step(prompt, 0))).xreplace(subs)
    first = as_expr(seconds(inf.step(chunk, 0))).xreplace(subs)
    tail = prompt - (m - 1) * chunk
    last = as_expr(seconds(inf.step(tail, (m - 1) * chunk))).xreplace(subs)
    if m == 2:
        return first + last
    j = sympy.Symbol("j_chunk", integer=True, nonnegative=True)
    body = as_expr(seconds(inf.step(chunk, N))).xreplace(subs).xreplace({N: chunk * j})
    if body.free_symbols - {j}:
        raise CostgraphValueError("no value for " + ", ".join(sorted(map(str, body.free_symbols - {j}))))
    return first + sum_piecewise(body, j, 1, m - 2) + last


def _innermost(expr) -> list:
    return [a for a in expr.atoms(sympy.Max, sympy.Min)
            if not any(x.has(sympy.Max, sympy.Min) for x in a.args)]


def _cuts(atom, j, lo: int, hi: int) -> set:
    """Integers in (lo, hi] where a pair of the atom's arguments may change order."""
    out = set()
    for x, y in combinations(atom.args, 2):
        d = sympy.expand(x - y)
        if not d.has(j):
            continue
        if not d.is_polynomial(j):
            raise CostgraphValueError("chunked prefill: a step time that is not piecewise polynomial in n")
        for r in sympy.Poly(d, j).real_roots():
            for c in (sympy.floor(r), sympy.floor(r) + 1):
                if lo < c <= hi:
                    out.add(int(c))
    return out


def _poly_sum(expr, j, lo: int, hi: int):
    """Σ_{j=lo}^{hi} of a polynomial in j (Faulhaber's sums, exact)."""
    expr = sympy.expand(expr)
    if not expr.has(j):
        return expr * (hi - lo + 1)
    total = sympy.Integer(0)
    for (k,), c in sympy.Poly(expr, j).terms():
        total += c * (_power_sum(hi, k) - _power_sum(lo - 1, k))
    return total


def _power_sum(n: int, k: int):
    """Σ_{i=0}^{n} i^k (0 for n < 0), exact."""
    if n < 0:
        return sympy.Integer(0)
    i = sympy.Symbol("i_sum", integer=True)
    return sympy.summation(i**k, (i, 0, n)) if k > 3 else \
        [sympy.Integer(n + 1), sympy.Integer(n * (n + 1) // 2), sympy.Integer(n * (n + 1) * (2 * n + 1) // 6),
         sympy.Integer((n * (n + 1) // 2) ** 2)][k]


def sum_piecewise(expr, j: sympy.Symbol, lo: int, hi: int):
    """Σ_{j=lo}^{hi} of ``expr``, a sum of polynomials in ``j`` under ``Max``/``Min`` (an exact
    number): each term split at the integers where its innermost ``Max``/``Min`` may switch
    argument, the choice made in each piece, and the rest summed recursively."""
    if hi < lo:
        return sympy.Integer(0)
    if expr.is_Add:
        return sympy.Add(*[sum_piecewise(t, j, lo, hi) for t in expr.args])
    atoms = _innermost(expr)
    if not atoms:
        return _poly_sum(expr, j, lo, hi)
    cuts = sorted({lo, hi + 1}.union(*[_cuts(a, j, lo, hi) for a in atoms]))
    total = sympy.Integer(0)
    for a, b in zip(cuts, cuts[1:]):
        pick = {}
        for atom in atoms:
            vals = [(x.xreplace({j: a}), x) for x in atom.args]
            chosen = (max if isinstance(atom, sympy.Max) else min)(vals, key=lambda v: v[0])[1]
            pick[atom] = chosen
        total += sum_piecewise(expr.xreplace(pick), j, a, b - 1)
    return total
