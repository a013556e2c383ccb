"""Inference steps as analyses over the operator graph: prefill and decode.

A step processes ``q`` new tokens of each of ``b`` sequences against ``n``
positions already in the KV cache. Prefill is ``(q, n) = (P, 0)`` for a prompt
of ``P`` tokens; a decode step is ``(1, n)``.

**How the key axis is found.** The graph is built with the ``cache`` operator
marking the tensors kept at inference (K and V, or MLA's latent). Under
:func:`split_keys` (what :func:`load` does) the cached tensor's sequence axis
(axis −2, the ``CacheEntry`` contract) comes out of ``cache`` as a symbol of its
own, :data:`KEYS`, so every shape and cost computed *from the cache* — the
key axis of QKᵀ, the inner axis of scores·V, a window's ``Min(·, w)``, MLA's
up-projection of its latent — carries ``KEYS``, and everything else (the
queries, the residual stream, the projections of the new tokens) carries the
model's sequence symbol ``s``. A step substitutes ``s → q`` and
``KEYS → n + q``: nothing is written per model or per symbol name.

Per step (all exact SymPy expressions in the model's dimensions, ``q``, ``n``):

* ``flops`` — forward FLOPs under a convention (``matmul`` default). With
  ``causal="half"`` the products marked ``causal`` count ``q·(n + q/2)``
  query-key pairs instead of ``q·(n + q)`` (half the ``q × q`` square; equal to
  ``derive --causal half`` at ``n = 0``).
* ``weight_bytes`` — every weight read once per step in its storage dtype
  (:mod:`costgraph.inference.dtypes`); a mixture's experts: the expected
  number of distinct experts ``E·(1 − (1 − k/E)^(b·q))`` per MoE layer
  (uniform routing, each token choosing ``k`` distinct experts independently).
  An embedding table counts whole (an upper bound: a lookup reads ``b·q`` rows).
* ``kv_read`` (``n`` cached positions, ``Min(n, w)`` under a window) and
  ``kv_written`` (``q`` positions) in the KV dtype.
* **Recurrent state** (``conv1d`` and ``selective_scan``: a ``CacheEntry``
  with ``state = True``, Mamba's convolution and SSM states): a fixed-size
  cache per sequence, whatever ``n``. A step reads the whole state (when
  ``n > 0``: a prefill starts from zeros, Gu & Dao 2023 Alg. 2 / Hugging
  Face's ``mamba_selective_scan`` initialises ``ssm_state`` with zeros) and
  writes it back once (``selective_state_update`` and
  ``causal_conv1d_update`` update it in place: ``state.copy_(...)``), both in
  the activation dtype: serving engines keep it in the model's dtype, apart
  from the KV cache's (vLLM ``CacheConfig.mamba_cache_dtype = "auto"``), so
  ``--kv`` does not quantize it. Its bytes count in ``kv_read`` /
  ``kv_written`` and in the KV cache (``b`` states, no paging); a decode step
  reads it instead of a cache growing with ``n``. The tokens' own FLOPs (the
  scan's ``2·D·N`` per token, the convolution's ``2·C·K``) are the graph's
  with ``s → q``: the recurrence costs per token what the scan costs per
  position. Jamba mixes both: the attention layers' K/V grow, the Mamba
  layers' states do not.
* **Once per request** (:mod:`costgraph.inference.request`): the operators
  computed from model inputs but from no token (a VLM's vision tower and
  projector, an encoder, a cross-attention's K/V of the encoder's output) run
  in a request's first step (``n`` the literal 0: a prefill, a first chunk)
  and in no later one. K/V such a part caches are not split by
  :func:`split_keys`: they keep their own length (Whisper's ``e``), are
  written by the first step and read whole by every later one, and count in
  the KV cache beside the growing one (``fixed_bytes``; transformers'
  ``EncoderDecoderCache``: ``self_attention_cache`` + ``cross_attention_cache``).
* ``activation_bytes`` — inputs and outputs of every operator that is not a
  view, in the activation dtype (bf16): the traffic an unfused execution
  moves; reported apart, added to ``bytes`` only with ``activations=True``.

Each quantity is also kept per operator (:class:`OpCost`) for the per-op
roofline of :mod:`costgraph.inference.roofline`: a weight is charged to the
last operator reading it (a tied head, not the lookup), a cache's reads and
writes to the first matrix product reading the cached tensor (QKᵀ reads K,
scores·V reads V; MLA's up-projection reads the latent).

With tensor parallelism over ``t`` devices (the TP walk of :func:`costgraph.parallel.placement.placement`,
the rules of training), figures are per device: split weights, cache tensors
and operators ÷ t, and one all-reduce of the output of every row-parallel
linear and vocabulary-parallel lookup per step.
"""

from __future__ import annotations

import sympy

from ..choices import CAUSAL, CONVENTION, DEFAULT_KV
from ..engine.symbols import as_expr

from ..errors import CostgraphValueError
from ..engine.graph import ONE, ZERO, CostGraph
from ..parallel.layout import Layout
from ..parallel.placement import placement
from ..engine.precision import precision as get_precision
from ..engine.totals import causal_share, expand_sum
from ..ops.registry import has_role
from .dtypes import KVDtype, WeightDtype, kv_dtype, unquantized_bits, weight_dtype
from .keys import KEYS, split_keys
from .request import per_request_ops, token_roots
from .steps import AllReduce, Collective, OpCost, Step

_pos = dict(positive=True, integer=True)
#: new tokens per sequence in a step, positions already cached
Q = sympy.Symbol("q", **_pos)
N = sympy.Symbol("n", integer=True, nonnegative=True)
#: prompt length and generated tokens
P = sympy.Symbol("P", **_pos)
G = sympy.Symbol("G", **_pos)
#: paged-allocation block size
K_PAGE = sympy.Symbol("k_page", **_pos)



def moves_no_data(kind: str) -> bool:
    """Whether operator ``kind`` moves no data at serving: a view (role ``view``), the cache
    included (its traffic is ``kv_read`` / ``kv_written``)."""
    return has_role(kind, "view")


def _wrap_build_error(err):
    msg = str(err)
    if "broadcast" in msg or "differ" in msg:
        raise CostgraphValueError(
            "inference needs a decoder-only model: in this one the attention scores meet a tensor "
            "sized by the query length on the key axis (an encoder-decoder, or a position bias)",
            hint="the inference analysis covers models whose keys come only from cache(...)") from err
    raise err


class Inference:
    """The inference analysis of a model built by :func:`load` (or under :func:`split_keys`).

    ``weights``/``kv``: dtype names of ``dtypes.toml``; ``t``: tensor-parallel
    degree (an int); ``convention``/``causal`` as ``derive``;
    ``activations``: add activation traffic to the bytes of a step;
    ``quantized``/``keep``: which weights take a quantized ``weights`` dtype
    (:mod:`costgraph.inference.quantized`: a scope, and module names kept in 16 bits).
    """

    def __init__(self, model, *, weights: str | WeightDtype = "bf16", kv: str | KVDtype | None = DEFAULT_KV,
                 t: int = 1, convention: str = CONVENTION.default, causal: str = CAUSAL.default, activations: bool = False,
                 replicate: tuple[str, ...] = (), quantized: str = "linear", keep: tuple[str, ...] = ()):
        from ..engine.conventions import check_convention

        if isinstance(model, str):
            model = load(model)
        self.model = model
        cg: CostGraph = getattr(model, "graph", model)
        self.cg = cg
        seq = cg.dims.get("s")
        if seq is not None and seq.derived is not None:   # s follows an input's size (a Whisper-like Mel stem's s =
            _no_tokens(cg)     # 2·se frames, a ViT's patches): refused where no token ids are read (trial12: "no value")
        check_convention(convention)
        if causal not in ("full", "half", "exact"):
            raise CostgraphValueError(f"unknown causal convention {causal!r}", hint="full, half or exact")
        if isinstance(t, bool) or not isinstance(t, int) or t < 1:
            raise CostgraphValueError(f"the tensor-parallel degree must be a positive whole number, not {t!r}")
        self.weights, self.kv = weight_dtype(weights), kv_dtype(DEFAULT_KV if kv is None else kv)   # None: the default
        self.t, self.convention, self.causal, self.activations = t, convention, causal, activations
        if not cg.caches:
            from ..diffusion import is_diffusion, no_decode_phase

            if is_diffusion(cg):   # DiT, SD3: per-image FLOPs are steps × a step's (costgraph.diffusion)
                raise no_decode_phase(cg.name)
            raise CostgraphValueError(f"model '{cg.name}' caches nothing: no cache(...) in its graph; an encoder "
                                      "(BERT, ViT) has no decode phase to model",
                                      hint="for a decoder, mark K and V with cache(...) in the model file; for an "
                                           "encoder's forward pass use derive or train")
        split = {p for p, d in cg.ops() if has_role(d["kind"], "cache")
                 and any(KEYS in cg.tensors[o].shape for o in d["outputs"])}
        #: K/V-style entries growing with the tokens (a sequence axis split), K/V computed once per
        #: request at a fixed length (inference/request.py: a cross-attention's), fixed-size recurrent states
        self.kv_entries = [e for e in cg.caches if not e.state and not e.shared and e.path in split]
        self.fixed = [e for e in cg.caches if not e.state and not e.shared and e.path not in split]
        #: another layer's K/V read by a KV-sharing layer (Gemma 3n/4): read by each step, not stored
        self.shared = [e for e in cg.caches if e.shared and e.path in split]
        self.states = [e for e in cg.caches if e.state]
        if not self.kv_entries and not self.states:     # no cache grows with the tokens: an encoder's K/V
            _no_tokens(cg)
        self.s, self.b = self._axes(cg)
        #: operators run once per request, at the prefill (inference/request.py)
        self.once = per_request_ops(cg, self.s, KEYS)
        outputs = {o for p in self.once for o in cg.nodes[p]["outputs"]}
        if any(e.tensor not in outputs for e in self.fixed):
            raise _unsplit(cg)
        names = {d.name for d in cg.dims.values()}
        clash = names & {"q", "n", "P", "G", "n_keys", "k_page"}
        if clash:
            raise CostgraphValueError(f"model '{cg.name}' has a dimension named {sorted(clash)[0]!r}, "
                                      "a symbol of the inference analysis")
        from .quantized import quantized_weights   # which weights: --quantized scope, less `keep` (quantized.py)

        self._quantized = quantized_weights(cg, quantized, keep, dtype=self.weights)
        self._act = get_precision("bf16")
        # the TP/SP walk of the layout's placement (shared with the validity check)
        # replicate: K/V head counts fewer than t, one head per device (parallel/tensor.py::kv_replication)
        self.tp = placement(cg, Layout(t=t, gpus=t, tp_replicated=tuple(replicate))).tp if t > 1 else None
        self._consumers: dict[str, list[str]] = {}
        for path, d in cg.ops():
            for tid in d["inputs"]:
                self._consumers.setdefault(tid, []).append(path)
        self._order = {p: i for i, p in enumerate(cg.nodes)}

    def _axes(self, cg: CostGraph) -> tuple:
        """``(s, b)``: the one growing sequence axis and the one batch axis of the caches."""
        # the sequence axis: a cached tensor's axis -2 ([B, ..., S, d]); a state's operator reads
        # [B, S, C] (conv1d, selective_scan), its state [B, ...]
        seqs = {cg.tensors[e.tensor].shape[-2] for e in self.kv_entries} | \
            {cg.tensors[cg.nodes[e.path]["inputs"][0]].shape[-2] for e in self.states}
        if not seqs:   # only K/V of a fixed length (cross-attention alone): the token inputs' axis
            seqs = {cg.tensors[r].shape[-1] for r in token_roots(cg) if cg.tensors[r].role == "index"}
        if not seqs:
            raise _unsplit(cg)
        batches = {cg.tensors[e.tensor].shape[0] for e in cg.caches}
        if len(seqs) != 1 or len(batches) != 1 or not all(isinstance(x, sympy.Symbol) for x in seqs | batches):
            raise CostgraphValueError(f"model '{cg.name}': its caches differ in batch or sequence axis "
                                      f"({', '.join(sorted(map(str, seqs | batches)))}); one of each is needed",
                                      hint="infer needs one batch and one sequence axis growing with the tokens "
                                           "(K/V computed once per request, from no token, may have their own)")
        return seqs.pop(), batches.pop()

    # ------------------------------------------------------------ helpers
    def _wdiv(self, wid):
        return self.tp.weight_divisor(wid) if self.tp else ONE

    def _tdiv(self, tid):
        return self.tp.tensor_divisor(tid) if self.tp else ONE

    def _node_div(self, path, d):
        if not self.tp:
            return ONE
        if path in self.tp.column and any(o in self.tp.divisors for o in d["outputs"]):
            return self.tp.divisors[next(o for o in d["outputs"] if o in self.tp.divisors)]   # a replicated K/V head
        if path in self.tp.column or path in self.tp.row or path in self.tp.vocab:
            return sympy.Integer(self.t)
        return sympy.Integer(self.t) if any(o in self.tp.split for o in d["outputs"]) else ONE

    def weight_copy_bytes(self, wid: str) -> sympy.Expr:
        """Bytes of one copy of weight ``wid`` in its storage dtype, per device."""
        w = self.cg.weights[wid]
        if wid in self._quantized:
            return self.weights.bytes(w.shape) / self._wdiv(wid)
        if w.element_bytes is not None:   # a buffer kept in its own dtype (transformers' keep-in-fp32)
            return w.numel * w.element_bytes / self._wdiv(wid)
        return w.numel * unquantized_bits() / 8 / self._wdiv(wid)

    def _copies_read(self, wid: str, tokens) -> sympy.Expr:
        """Copies of weight ``wid`` a step of ``tokens`` tokens reads: all of them for a dense
        weight (active = count), else the expected distinct experts ``E·(1 − (1 − k/E)^tokens)``
        (uniform routing). Exact; at a long prompt the power is huge (``(15/16)^10^7``): evaluate
        it with :func:`costgraph.inference.decode.bounded_subs`, which keeps it unevaluated."""
        w = self.cg.weights[wid]
        if w.active == w.count or sympy.expand(w.active - w.count) == 0:   # no simplify: 57 of them
            return w.count
        return w.count * (1 - (1 - w.active / w.count) ** tokens)

    def _entry_position_bytes(self, entry) -> sympy.Expr:
        """Bytes one cached position of one sequence takes in this entry, all copies, per device."""
        ten = self.cg.tensors[entry.tensor]
        elements = ten.numel / (ten.shape[0] * ten.shape[-2])
        vectors = elements / ten.shape[-1]
        copies = self.cg.nodes[entry.path]["count"]
        if entry.fp8_block is not None:   # FP8 values, one fp32 scale per block (vllm deepseek_v2.py Indexer:
            # head_dim + head_dim // quant_block_size * 4 bytes a token, uint8)
            per = elements + vectors * sympy.ceiling(elements / vectors / entry.fp8_block) * 4
            return copies * per / self._tdiv(entry.tensor)
        return copies * self.kv.position_bytes(elements, vectors) / self._tdiv(entry.tensor)

    def _fixed_length(self, entry) -> sympy.Expr:
        """The positions a per-request entry keeps (its axis −2: Whisper's ``e``), a window applied."""
        length = self.cg.tensors[entry.tensor].shape[-2]
        return length if entry.window is None else sympy.Min(length, entry.window)

    def fixed_bytes(self, batch=None, page=None) -> sympy.Expr:
        """The K/V computed once per request (a cross-attention's over the encoder's positions), of
        ``batch`` sequences (default the model's ``b``), per device; ``page = k`` rounds each up to
        blocks of ``k``. 0 for a model without them. Transformers allocates them in
        ``EncoderDecoderCache.cross_attention_cache`` (cache_utils.py), beside the
        ``self_attention_cache`` that grows."""
        batch = self.b if batch is None else as_expr(batch)
        total = []
        for e in self.fixed:
            kept = self._fixed_length(e)
            if page is not None:
                kept = sympy.ceiling(kept / page) * page
            total.append(batch * kept * self._entry_position_bytes(e) + self._entry_fixed_bytes(e))
        return expand_sum(total)

    def _entry_fixed_bytes(self, entry) -> sympy.Expr:
        return self.cg.nodes[entry.path]["count"] * sympy.Rational(self.kv.tensor_stat_bits, 8)

    def _state_bytes(self, entry) -> sympy.Expr:
        """Bytes of one sequence's recurrent state of this entry, all copies, per device, in the
        activation dtype (module docstring)."""
        ten = self.cg.tensors[entry.tensor]
        copies = self.cg.nodes[entry.path]["count"]
        return copies * ten.numel / ten.shape[0] * self._act.bytes(ten.role) / self._tdiv(entry.tensor)

    def state_bytes(self, batch=None) -> sympy.Expr:
        """The recurrent states of ``batch`` sequences (default the model's ``b``), per device:
        0 for a model with only a K/V cache."""
        batch = self.b if batch is None else as_expr(batch)
        return expand_sum([batch * self._state_bytes(e) for e in self.states])

    def _kv_reader(self, entry) -> str:
        """The first matrix product reading the cached tensor (through views and copies)."""
        start = [o for o in self.cg.nodes[entry.path]["outputs"]]
        seen, frontier, found = set(), list(start), []
        while frontier:
            tid = frontier.pop()
            for path in self._consumers.get(tid, ()):
                if path in seen:
                    continue
                seen.add(path)
                if self.cg.nodes[path]["cost"].forward.matmul != 0:
                    found.append(path)
                else:
                    frontier.extend(self.cg.nodes[path]["outputs"])
        return min(found, key=self._order.get) if found else entry.path

    # ------------------------------------------------------------ memory
    def kv_cache_bytes(self, positions=None, batch=None, page=None) -> sympy.Expr:
        """KV cache of ``batch`` sequences (default the model's ``b``) holding
        ``positions`` tokens each (default the model's ``s``), per device: a
        window keeps ``Min(positions, w)``; ``page = k`` rounds every
        sequence's kept positions of every cache up to whole blocks of ``k``
        (vLLM's paged allocation: ``⌈x/k⌉·k``)."""
        positions = self.s if positions is None else as_expr(positions)
        batch = self.b if batch is None else as_expr(batch)
        total = [self.state_bytes(batch)]     # recurrent states: whole, per sequence, not paged
        total.append(self.fixed_bytes(batch, page))   # K/V of a fixed length per request (cross-attention)
        for e in self.kv_entries:
            kept = positions if e.window is None else sympy.Min(positions, e.window)
            if page is not None:
                kept = sympy.ceiling(kept / page) * page
            total.append(batch * kept * self._entry_position_bytes(e) + self._entry_fixed_bytes(e))
        return expand_sum(total)

    def kv_cache_bytes_per_token(self) -> sympy.Expr:
        """One position of one sequence, every cache, windows not applied, per device (a
        recurrent state adds nothing per position)."""
        return expand_sum([self._entry_position_bytes(e) for e in self.kv_entries])

    def weight_memory(self) -> sympy.Expr:
        """Bytes of every weight in memory (all experts), per device."""
        return expand_sum([self.cg.weights[w].count * self.weight_copy_bytes(w) for w in self.cg.weights])

    # ------------------------------------------------------------ steps
    def step(self, q=Q, n=N) -> Step:
        """The costs of one step of ``q`` new tokens per sequence against ``n`` cached positions
        (a recurrent state is read when ``n`` is not the literal 0: a symbolic ``n`` stands for
        ``n ≥ 1``, as every decode step's ``P + G − 2`` with ``G ≥ 2``)."""
        q, n = as_expr(q), as_expr(n)
        cg = self.cg
        sub = {self.s: q, KEYS: n + q}
        tokens = self.b * q
        # a request's first step (n = 0: a prefill) runs its per-request part (inference/request.py) too
        run = [(p, d) for p, d in cg.ops() if n == 0 or p not in self.once]
        ops: dict[str, OpCost] = {}
        reader_of: dict[str, str] = {}
        for wid in cg.weights:
            readers = [p for p, d in run if wid in d["cost"].weights or wid in d["cost"].tied]
            if readers:
                reader_of[wid] = readers[-1]
        for path, d in run:
            op = ops[path] = OpCost(path, d["kind"])
            f = d["cost"].forward.under(self.convention) * d["active"]
            # the pairs a causal mask keeps, windows included (costgraph.engine.totals.causal_share): q queries
            # aligned to the newest of n + q keys
            f = f * causal_share(d["attrs"], self.causal)
            op.flops = f.xreplace(sub) / self._node_div(path, d)
            if not moves_no_data(d["kind"]) and d["outputs"] and cg.tensors[d["outputs"][0]].storage == d["outputs"][0]:
                moved = [cg.tensors[x] for x in (*d["inputs"], *d["outputs"])]
                op.activation_bytes = d["active"] * sympy.Add(*[
                    x.numel * self._act.bytes(x.role) / self._tdiv(x.id) for x in moved]).xreplace(sub)
        for wid, path in reader_of.items():
            ops[path].weight_bytes += self._copies_read(wid, tokens) * self.weight_copy_bytes(wid)
        kv_read, kv_written = self._kv_traffic(ops, q, n)
        allreduce = []
        if self.tp:
            from ..parallel.placement import expert_groups

            groups = expert_groups(cg)
            for path in [*self.tp.row, *(p for p in self.tp.vocab if has_role(cg.nodes[p]["kind"], "embedding"))]:
                if path not in ops:   # a per-request operator, not run by this step
                    continue
                d = cg.nodes[path]
                out = cg.tensors[d["outputs"][0]]
                # routed experts: one all-reduce of the combined output per MoE layer, not one per
                # active expert (vllm fused_moe/layer.py::FusedMoE.forward: reduce_results → one
                # tensor_model_parallel_all_reduce(final_hidden_states))
                g = next((e for q, e in groups.items() if path.startswith(q + "/")), None)
                calls = d["active"] if g is None else sympy.cancel(d["active"] / g.active)
                allreduce.append(AllReduce(path, calls, (out.numel * self._act.bytes(out.role)).xreplace(sub)))
            for path in self.tp.split_norms:   # parallel/tensor.py "norms split by heads": one fp32 per token
                if path in ops:
                    out = cg.tensors[cg.nodes[path]["outputs"][0]]
                    allreduce.append(AllReduce(path, cg.nodes[path]["active"],
                                               (out.numel / out.shape[-1] * 4).xreplace(sub)))
        kept = [o for o in ops.values() if o.flops != 0 or o.weight_bytes != 0 or o.kv_bytes != 0
                or (self.activations and o.activation_bytes != 0)]
        return Step(q, n,
                    flops=expand_sum([o.flops for o in kept]),
                    weight_bytes=sympy.Add(*[o.weight_bytes for o in kept]),
                    kv_read=expand_sum(kv_read), kv_written=expand_sum(kv_written),
                    activation_bytes=expand_sum([o.activation_bytes for o in ops.values()]),
                    with_activations=self.activations, ops=kept, allreduce=allreduce)

    def _kv_traffic(self, ops: dict, q, n) -> tuple[list, list]:
        """The KV bytes a step of ``q`` new tokens against ``n`` cached positions reads and writes,
        per cache entry (recurrent states, growing K/V, a KV-sharing layer's reads, per-request K/V),
        each added to the operator that reads it in ``ops``."""
        kv_read, kv_written = [], []
        for e in self.states:
            # read whole unless the step starts from zeros (n = 0: a prefill), written back once
            state = self.b * self._state_bytes(e)
            read = ZERO if n == 0 else state
            kv_read.append(read)
            kv_written.append(state)
            ops[e.path].kv_bytes += read + state
        for e in self.kv_entries:
            per = self._entry_position_bytes(e)
            kept = n if e.window is None else sympy.Min(n, e.window)
            # a sparse attention's queries each gather their top-k positions (DeepSeek-V3.2's DSA)
            read = self.b * per * (kept if e.topk is None else sympy.Min(kept, q * e.topk))
            written = self.b * per * q
            kv_read.append(read)
            kv_written.append(written)
            ops[self._kv_reader(e)].kv_bytes += read + written
        for e in self.shared:
            # a KV-sharing layer reads the n + q positions its source layer holds (written there this step)
            read = self.b * self._entry_position_bytes(e) * (n + q if e.window is None else sympy.Min(n + q, e.window))
            kv_read.append(read)
            ops[self._kv_reader(e)].kv_bytes += read
        for e in self.fixed:
            # computed once per request: written by its first step, read whole by every later one
            whole = self.b * self._entry_position_bytes(e) * self._fixed_length(e)
            read, written = (ZERO, whole) if n == 0 else (whole, ZERO)
            kv_read.append(read)
            kv_written.append(written)
            ops[self._kv_reader(e)].kv_bytes += read + written
        return kv_read, kv_written

    def prefill(self, prompt=P) -> Step:
        """The prompt's step: ``q = prompt``, ``n = 0``."""
        return self.step(prompt, 0)

    def decode(self, n=None) -> Step:
        """One decode step, ``q = 1`` against ``n`` cached positions (default
        ``P + G − 2``: the last step of a generation of ``G`` tokens, the first
        of which came from the prefill)."""
        return self.step(1, P + G - 2 if n is None else n)


def inference_step(model, *, q=Q, n=N, **settings) -> Step:
    """One step of ``q`` new tokens per sequence against ``n`` cached positions
    (see :class:`Inference` for ``settings``)."""
    return Inference(model, **settings).step(q, n)


def _no_tokens(cg: CostGraph) -> None:
    """Refuse an encoder that reads no token ids (a drafted ViT, SigLIP tower or wav2vec2, whose ``gqa_attention``
    marks K and V with ``cache(...)`` over its patches or frames): no token comes after them, no decode phase."""
    if not any(cg.tensors[r].role == "index" for r in token_roots(cg)):
        raise CostgraphValueError(
            f"model '{cg.name}' reads no token ids: an encoder of images or audio (ViT, wav2vec2) has no decode "
            "phase to model", hint="for its forward pass use derive or train")


def _unsplit(cg: CostGraph) -> CostgraphValueError:
    """The refusal of a model whose caches grow along no key axis: an encoder of no token ids (:func:`_no_tokens`),
    else a graph built outside :func:`costgraph.inference.load`."""
    _no_tokens(cg)
    return CostgraphValueError(
        f"model '{cg.name}' was built without the key axis split",
        hint="load it with costgraph.inference.load(...) (or inside costgraph.inference.split_keys())")
