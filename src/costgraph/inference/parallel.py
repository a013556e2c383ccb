"""Parallel serving as an analysis over the graph: TP (K/V heads replicated when
``t`` exceeds them), expert parallelism, data-parallel attention, pipeline
stages and the TP all-reduce's overlap (:func:`serving_inference`).

Layout (:class:`Serving`) and its conventions, each named in ``infer``'s output:

* **Devices.** ``tp`` devices per pipeline stage (SGLang's ``--tp-size``: the
  whole group the MoE/MLP runs on), ``pp`` stages: ``tp·pp`` devices in all.
* **TP** (the training walk, :func:`costgraph.parallel.placement.placement`):
  K/V heads fewer than ``t`` are replicated, one per device, ``t`` a multiple
  of them (:func:`costgraph.parallel.tensor.kv_replication`; vLLM
  ``QKVParallelLinear``: ``num_kv_heads = 1``, ``num_kv_head_replicas =
  tp_size // total_num_kv_heads``).
* **Data-parallel attention** (``dp_attention = d``; SGLang
  ``dp_attention.py``): the attention side runs on ``d`` DP ranks of
  attention-TP ``tp/d`` consecutive devices, each with its own ``b/d``
  sequences (``--batch b`` is the whole deployment's per micro-batch; ``d``
  must divide it), so its weights are split ``tp/d`` ways and replicated
  ``d`` times and each device's KV cache holds its rank's sequences only.
  The attention side: every operator except the MLP/MoE blocks (a layer's
  block — the path component under the layer — with a matrix product and no
  ``cache``: norms, residual adds, the embedding and the head stay with the
  DP rank, SGLang's ``--enable-dp-lm-head``). Around each MLP/MoE block the
  tokens of all ranks are gathered to the full TP group: decode uses
  SGLang's ``MAX_LEN`` (``2·sum ≥ max·dp`` holds for equal ranks): an
  all-gather over ``tp`` of the whole batch's hidden states before, a
  reduce-scatter after (in place of the block's all-reduce); prefill
  (an extend batch) ``SUM_LEN``: an all-reduce of the zero-padded buffer
  before, the block's all-reduce after. The attention output's all-reduce
  stays over the attention-TP group.
* **Expert parallelism** (``ep = e``): the routed experts over ``e = tp``
  devices (each holds ``E/e`` whole experts; SGLang ``ep_size = tp_size``,
  vLLM ``--enable-expert-parallel``: EP = TP × DP); with ``d > 1`` every
  operator but the routed experts is on the attention side (DeepSeek-V3
  report §3.4: dense MLPs and shared experts with the DP rank, TP 1 when
  ``d = tp``). Each device dispatches its ``b·q/tp`` tokens' ``k`` copies of
  the expert group's input and combines as many outputs: two all-to-alls per
  MoE layer per step of ``b·q·k·h/tp`` elements (training's ep_time
  convention: uniform routing, ``(e−1)/e`` of the buffer leaves the device;
  latency NCCL's p2p rounds, :func:`costgraph.parallel.ep_time.alltoall_latency`:
  one step of the NIC's latency across nodes, ``⌈(e−1)/8⌉`` of NVLink's inside one),
  instead of the routed experts' all-reduce. Expected distinct experts read
  per device: ``(E/e)·(1 − (1 − k/E)^(b·q))`` (uniform routing), which makes
  its weight bytes those of TP over ``tp``.
* **Pipeline stages** (``pp = p``; :func:`costgraph.parallel.pipeline.pipeline_stages`,
  Megatron's even split of :mod:`costgraph.parallel.layer_split`): memory is
  the most loaded stage's (weights + the KV cache of its layers for ``p``
  micro-batches of ``b`` sequences in flight: vLLM runs ``p`` batches
  concurrently through the stages); a step's latency is every stage's time
  plus ``p − 1`` sends of the activations between stages; throughput
  ``p·b`` tokens per ``max(step, p · slowest stage)``.
* **TP overlap** (``tp_overlap``): ``none`` (default) adds the collectives
  after the operators; ``full`` hides them under the step's operators:
  ``max(Σ ops, Σ collectives)``.
* **Links**: each collective on the link its group crosses (training's
  :func:`costgraph.parallel.placement.link`: scale-up when the group's
  consecutive ranks stay inside one scale-up domain, else scale-out).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import sympy

from ..engine.graph import ONE, ZERO
from ..engine.totals import expand_sum
from ..errors import CostgraphValueError
from .phases import AllReduce, Collective, Inference, OpCost, Step
from ..ops.registry import has_role
from .serving_report import report_serving, serving_notes   # noqa: F401  (the report's side, kept importable here)

OVERLAP = ("none", "full")


@dataclass(frozen=True)
class Serving:
    """A serving layout: ``tp`` devices per stage, ``ep`` expert-parallel
    degree (1 or ``tp``), ``dp_attention`` DP ranks of the attention (divides
    ``tp``), ``pp`` pipeline stages, ``tp_overlap`` ``none`` or ``full``
    (module docstring)."""

    tp: int = 1
    ep: int = 1
    dp_attention: int = 1
    pp: int = 1
    tp_overlap: str = "none"

    @property
    def trivial(self) -> bool:
        """Whether it is plain TP as :class:`~costgraph.inference.phases.Inference` computes it."""
        return self.ep == 1 and self.dp_attention == 1 and self.pp == 1 and self.tp_overlap == "none"

    @property
    def devices(self) -> int:
        """Devices in all: ``tp`` per stage × ``pp`` stages."""
        return self.tp * self.pp


#: why a pipeline without a TP link has no seconds (its stages' sends need one even at --tp 1)
NEED_PP_LINK = ("seconds: the pipeline stages' sends need a link: --hardware NAME or --link-bandwidth "
                "B/s per direction")


def check_serving(cg, sv: Serving, values: dict | None, batch: int | None = None) -> None:
    """Refuse layouts no runtime runs (each error with a hint).

    Raises
    ------
    CostgraphValueError
        A degree that is not a positive whole number; ``dp_attention`` not
        dividing ``tp`` or the batch; ``ep`` other than 1 or ``tp``, not
        dividing the experts, or on a model without routed experts; ``pp``
        not dividing the layers evenly; an unknown ``tp_overlap``.
    """
    from ..parallel.placement import expert_groups

    for name, v in (("tp", sv.tp), ("ep", sv.ep), ("dp-attention", sv.dp_attention), ("pp", sv.pp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise CostgraphValueError(f"--{name} must be a positive whole number, not {v!r}")
    if sv.tp_overlap not in OVERLAP:
        raise CostgraphValueError(f"unknown --tp-overlap {sv.tp_overlap!r}", hint="none (default) or full")
    d = sv.dp_attention
    if sv.tp % d:
        raise CostgraphValueError(f"--dp-attention {d} does not divide --tp {sv.tp}",
                                  hint="SGLang runs attention-TP = tp/dp consecutive ranks: dp must divide tp")
    if batch is not None and batch % d:
        raise CostgraphValueError(f"--batch {batch} does not split over {d} attention DP ranks",
                                  hint=f"--batch is the whole deployment's sequences: a multiple of {d}")
    if sv.ep > 1:
        groups = expert_groups(cg)
        if not groups:
            raise CostgraphValueError(f"--ep {sv.ep}: model '{cg.name}' has no routed experts",
                                      hint="expert parallelism splits the routed experts of a mixture")
        if sv.ep != sv.tp:
            raise CostgraphValueError(f"--ep {sv.ep} must equal --tp {sv.tp}",
                                      hint="the experts are spread over the whole TP group (SGLang ep_size = "
                                           "tp_size; vLLM EP = TP × DP): give --tp e --ep e [--dp-attention d]")
        for g in groups.values():
            E = g.count.xreplace(values or {})
            if E.is_Integer and int(E) % sv.ep:
                raise CostgraphValueError(f"--ep {sv.ep} does not divide the {E} experts of {g.path}",
                                          hint="each device holds E/e whole experts")
    if sv.pp > 1:
        from ..parallel.layer_split import check_split

        top = [g for path, g in cg.groups.items() if "/" not in path]
        total = sympy.Add(*[g.count for g in top]).xreplace(values or {})
        if not top:
            raise CostgraphValueError(f"--pp {sv.pp}: model '{cg.name}' has no repeated layers to split")
        if total.is_Integer:
            try:
                check_split(int(total), sv.pp)
            except CostgraphValueError as err:
                divisors = [n for n in range(2, int(total) + 1) if int(total) % n == 0][:8]
                raise CostgraphValueError(err.message,
                                          hint=f"--pp dividing the {total} layers: "
                                               + ", ".join(map(str, divisors))) from None


def serving_inference(model, serving: Serving, values: dict | None = None, hardware=None, **settings):
    """The inference analysis of ``model`` under ``serving``: a plain
    :class:`~costgraph.inference.phases.Inference` when the layout is trivial,
    else a :class:`ServingInference` (same methods). ``values``: the model's
    dimension values (the replicated K/V heads and the checks need them);
    ``settings``: those of :class:`Inference` but ``t`` and ``replicate``;
    ``hardware``: a preset name, for the link each collective crosses.

    Raises
    ------
    CostgraphValueError
        :func:`check_serving`'s refusals.
    """
    from ..parallel.tensor import kv_replication

    cg = getattr(model, "graph", model)
    check_serving(cg, serving, values)
    if serving.trivial:
        return Inference(model, t=serving.tp, replicate=kv_replication(cg, serving.tp, values), **settings)
    return ServingInference(model, serving, values, hardware=hardware, **settings)


def _scale_op(o: OpCost, f, sub: dict) -> OpCost:
    return OpCost(o.path, o.kind, *(sympy.expand(getattr(o, k).xreplace(sub) * f) for k in
                                    ("flops", "weight_bytes", "kv_bytes", "activation_bytes")))


class ServingInference:
    """:class:`~costgraph.inference.phases.Inference`'s methods under a
    :class:`Serving` layout, per device (module docstring). Composed of two
    analyses: the attention side at TP ``tp/d`` with ``b/d`` sequences, the
    rest at TP ``tp`` with all ``b``."""

    def __init__(self, model, serving: Serving, values: dict | None = None, hardware=None, **settings):
        from ..parallel.placement import expert_groups
        from ..parallel.tensor import kv_replication

        self.serving = sv = serving
        self._values = dict(values or {})
        self._hw = None
        if hardware is not None:
            from ..hardware import preset

            self._hw = preset(hardware)
        cg = getattr(model, "graph", model)
        at = sv.tp // sv.dp_attention
        self.attn = Inference(model, t=at, replicate=kv_replication(cg, at, values), **settings)
        self.full = self.attn if at == sv.tp else \
            Inference(model, t=sv.tp, replicate=kv_replication(cg, sv.tp, values), **settings)
        a = self.attn
        self.model, self.cg, self.b, self.s = a.model, a.cg, a.b, a.s
        self.weights, self.kv, self.states, self.kv_entries = a.weights, a.kv, a.states, a.kv_entries
        self.once, self.fixed = a.once, a.fixed   # once per request (inference/request.py)
        self.convention, self.causal, self.activations = a.convention, a.causal, a.activations   # a draft's settings
        self.t = sv.tp
        self.tp = self.full.tp if self.full.tp is not None else a.tp   # warnings of the TP walk
        self.experts = expert_groups(cg) if sv.ep > 1 else {}
        self.attention = {p for p, _ in cg.ops() if self._on_attention(p)}
        self._rank = {self.b: self.b / sv.dp_attention}
        self.stages = None
        if sv.pp > 1:
            from ..parallel.pipeline import pipeline_stages

            self.stages = pipeline_stages(cg, sv.pp)

    # ------------------------------------------------------------ sides
    def _routed(self, path: str) -> bool:
        return any(path.startswith(g + "/") for g in self.experts)

    def _block(self, path: str) -> str | None:
        """The MLP/MoE block holding an operator: the outermost scope under a
        top-level layer whose operators include a matrix product and no
        ``cache`` (None: the operator is in none)."""
        parts = path.split("/")
        if parts[0] not in self.cg.groups:
            return None
        ffn = self._ffn_scopes()
        return next(("/".join(parts[:i]) for i in range(2, len(parts)) if "/".join(parts[:i]) in ffn), None)

    def _on_attention(self, path: str) -> bool:
        if self.serving.ep > 1:
            return not self._routed(path)
        if self.serving.dp_attention == 1:
            return True
        return self._block(path) is None

    def _ffn_scopes(self) -> set[str]:
        if not hasattr(self, "_ffn"):
            scopes: dict[str, list[bool]] = {}
            for path, d in self.cg.ops():
                parts = path.split("/")
                for i in range(2, len(parts)):
                    has = scopes.setdefault("/".join(parts[:i]), [False, False])
                    has[0] |= has_role(d["kind"], "cache")
                    has[1] |= d["cost"].forward.matmul != 0
            self._ffn = {k for k, (cache, mm) in scopes.items() if mm and not cache}
        return self._ffn

    # ------------------------------------------------------------ memory
    def _stage_factor(self, path: str, stage) -> sympy.Expr:
        """The share of ``path``'s instances (an operator or weight id) held by ``stage``."""
        if stage is None:
            return ONE
        for g, held in stage.layers.items():
            if path.startswith(g + "/"):
                return held / self.cg.groups[g].count
        return ONE if path in stage.nodes or path in stage.weights else ZERO

    def _weight_owner(self, wid: str) -> str:
        readers = [p for p, d in self.cg.ops() if wid in d["cost"].weights or wid in d["cost"].tied]
        return readers[-1] if readers else wid

    def weight_memory(self, stage=None) -> sympy.Expr:
        """Bytes of every weight a device holds (all its experts): the most loaded stage under PP."""
        if stage is None and self.stages:
            stage = self._loaded_stage()
        out = []
        for wid, w in self.cg.weights.items():
            side = self.attn if self._weight_owner(wid) in self.attention else self.full
            out.append(w.count * side.weight_copy_bytes(wid) * self._stage_factor(wid, stage))
        return expand_sum(out)

    def kv_cache_bytes(self, positions=None, batch=None, page=None, stage=None) -> sympy.Expr:
        """The KV cache of a device: its DP rank's ``batch/d`` sequences, the
        layers of the most loaded stage for ``p`` micro-batches in flight."""
        from ..engine.symbols import as_expr

        batch = self.b if batch is None else as_expr(batch)
        if stage is None and self.stages:
            stage = self._loaded_stage()
        if stage is None:
            return self.attn.kv_cache_bytes(positions, batch / self.serving.dp_attention, page)
        parts = []
        for e in self.cg.caches:
            one = _Only(self.attn, e)
            parts.append(self._stage_factor(e.path, stage) * self.serving.pp *
                         one.kv_cache_bytes(positions, batch / self.serving.dp_attention, page))
        return expand_sum(parts)

    def kv_cache_bytes_per_token(self) -> sympy.Expr:
        """One position of one sequence, per device (the device holding it; under PP the
        most loaded stage's layers)."""
        if not self.stages:
            return self.attn.kv_cache_bytes_per_token()
        stage = self._loaded_stage()
        return expand_sum([self._stage_factor(e.path, stage) * self.attn._entry_position_bytes(e)
                           for e in self.kv_entries])

    def state_bytes(self, batch=None) -> sympy.Expr:
        """The recurrent states of the DP rank's ``batch/d`` sequences, per device."""
        from ..engine.symbols import as_expr

        batch = self.b if batch is None else as_expr(batch)
        return self.attn.state_bytes(batch / self.serving.dp_attention)

    def _loaded_stage(self):
        """The stage with the most weight bytes (ties: the first)."""
        if not hasattr(self, "_stage"):
            best, key = self.stages[0], None
            for st in self.stages:
                w = self.weight_memory(st).xreplace(self._values)   # at the model's values
                probe = w.xreplace({s: 1 for s in w.free_symbols}) if w.free_symbols else w
                val = sympy.N(probe)
                if key is None or val > key:
                    best, key = st, val
            self._stage = best
        return self._stage

    # ------------------------------------------------------------ steps
    def step(self, q=None, n=None) -> Step:
        """One step per device under the layout (module docstring)."""
        from .phases import N, Q

        q = Q if q is None else q
        n = N if n is None else n
        sa = self.attn.step(q, n)
        sf = sa if self.full is self.attn else self.full.step(q, n)
        ops = [_scale_op(o, ONE, self._rank) for o in sa.ops if o.path in self.attention]
        ops += [o for o in sf.ops if o.path not in self.attention]
        colls = self._collectives(sa, sf)
        kv_read, kv_written = sa.kv_read.xreplace(self._rank), sa.kv_written.xreplace(self._rank)
        act = expand_sum([o.activation_bytes for o in ops])
        return Step(sa.q, sa.n, flops=expand_sum([o.flops for o in ops]),
                    weight_bytes=sympy.Add(*[o.weight_bytes for o in ops]), kv_read=kv_read,
                    kv_written=kv_written, activation_bytes=act, with_activations=sa.with_activations,
                    ops=ops, allreduce=[], collectives=colls, overlap=self.serving.tp_overlap)

    def _collectives(self, sa: Step, sf: Step) -> list[Collective]:
        sv, out = self.serving, []
        at = sv.tp // sv.dp_attention
        for ar in sa.allreduce:
            if ar.path in self.attention and at > 1:
                out.append(Collective("all-reduce", ar.path, ar.calls, ar.bytes.xreplace(self._rank), at))
        blocks = {}
        for ar in sf.allreduce:
            if ar.path in self.attention or self._routed(ar.path):
                continue
            if sv.dp_attention == 1:
                out.append(Collective("all-reduce", ar.path, ar.calls, ar.bytes, sv.tp))
            else:
                blocks.setdefault(self._block(ar.path), ar)
        for blk, ar in blocks.items():   # the DP gather around each MLP/MoE block (module docstring)
            calls = self.cg.groups[blk.split("/")[0]].count
            if sa.q == 1:   # decode: MAX_LEN
                out += [Collective("all-gather", blk, calls, ar.bytes, sv.tp),
                        Collective("reduce-scatter", blk, calls, ar.bytes, sv.tp)]
            else:           # prefill (extend): SUM_LEN
                out += [Collective("all-reduce", blk, calls, ar.bytes, sv.tp)] * 2
        for g in self.experts.values():
            x = self.cg.tensors[g.inputs[0]]
            per_token = x.numel / (x.shape[0] * x.shape[-2]) * self.attn._act.bytes(x.role)
            size = self.b * sa.q * g.active * per_token / sv.tp
            out += [Collective("all-to-all", g.path + " dispatch", g.calls, size, sv.ep),
                    Collective("all-to-all", g.path + " combine", g.calls, size, sv.ep)]
        if sv.pp > 1:
            out.append(Collective("send/recv", "pipeline", sympy.Integer(sv.pp - 1), self._boundary_bytes(sa.q),
                                  2))
        return [self._linked(c) for c in out]

    def _linked(self, c: Collective) -> Collective:
        """``c`` with the link its group crosses (:func:`costgraph.parallel.placement.link`):
        consecutive ranks for TP, attention-TP and EP; ranks ``tp`` apart for a pipeline send;
        ``tp·pp`` devices in all. A TP all-reduce that leaves the node is NCCL's ring (vLLM's custom
        all-reduce is single-node: vllm/distributed/device_communicators/custom_all_reduce.py refuses a
        group across nodes), over the NICs of its members on each node (``ring``:
        :func:`costgraph.parallel.ranks.ring_scale_out`); inside a node the link is NVLink either way.
        Serving keeps the line rates (``rate="line"``; training's ``--link-rate`` default is NCCL's busbw).
        An all-to-all's latency is training's NCCL p2p rounds
        (:func:`costgraph.parallel.ep_time.alltoall_latency`: one NIC step across nodes, ⌈(e − 1)/8⌉
        NVLink steps inside one), not the ring's ``e − 1`` steps."""
        if self._hw is None:
            return c
        from ..parallel.ep_time import alltoall_latency
        from ..parallel.placement import link

        stride = self.serving.tp if c.kind == "send/recv" else 1
        c = replace(c, link=link(stride, c.group, self._hw, self.serving.devices, ring=c.kind == "all-reduce",
                                 rate="line"))
        if c.kind == "all-to-all":
            c = replace(c, latency=alltoall_latency(self._hw, c.group, world=self.serving.devices))
        return c

    def _boundary_bytes(self, q) -> sympy.Expr:
        """Bytes of the activations one stage sends the next: the tensors the
        first layer group reads from outside it (the residual stream), ``b`` sequences."""
        cg = self.cg
        top = next(g for path, g in cg.groups.items() if "/" not in path)
        inside = [p for p, _ in cg.ops() if p.startswith(top.path + "/")]
        produced = {tid for p in inside for tid in cg.nodes[p]["outputs"]}
        seen, total = set(), []
        for p in inside:
            for x in cg.nodes[p]["inputs"]:
                ten = cg.tensors[x]
                if x in produced or x in seen or ten.role == "index":
                    continue
                if ten.producer is None or ten.producer.startswith(top.path + "/"):
                    continue
                seen.add(x)
                total.append(ten.numel * self.attn._act.bytes(ten.role))
        return sympy.Add(*total).xreplace({self.s: q, **self._rank})   # the DP rank's sequences

    def stage_steps(self, q=None, n=None) -> list[Step]:
        """Each pipeline stage's share of :meth:`step` (its layers' operators and
        collectives; the sends apart)."""
        st = self.step(q, n)
        out = []
        for stage in self.stages or [None]:
            ops = [_scale_op(o, self._stage_factor(o.path, stage), {}) for o in st.ops]
            colls = [replace(c, calls=c.calls * self._stage_factor(c.path, stage)) for c in st.collectives
                     if c.kind != "send/recv"]
            out.append(replace(st, ops=ops, collectives=colls))
        return out

    def prefill(self, prompt=None) -> Step:
        """The prompt's step: ``q = prompt`` (default ``P``), ``n = 0``."""
        from .phases import P

        return self.step(P if prompt is None else prompt, 0)

    def decode(self, n=None) -> Step:
        """One decode step against ``n`` cached positions (default ``P + G − 2``)."""
        from .phases import G, P

        return self.step(1, P + G - 2 if n is None else n)


class _Only:
    """An :class:`Inference` restricted to one cache entry (a stage's share of the KV cache)."""

    def __init__(self, inf: Inference, entry):
        self.inf, self.entry = inf, entry

    def kv_cache_bytes(self, positions, batch, page):
        inf = self.inf
        kv, st, fx = inf.kv_entries, inf.states, inf.fixed
        inf.kv_entries = [e for e in kv if e is self.entry]
        inf.states = [e for e in st if e is self.entry]
        inf.fixed = [e for e in fx if e is self.entry]   # K/V of a fixed length per request
        try:
            return inf.kv_cache_bytes(positions, batch, page)
        finally:
            inf.kv_entries, inf.states, inf.fixed = kv, st, fx
