"""What runs once per request and what runs once per token: read from the graph.

A served request is a prefill over its prompt, then one decode step per generated
token. Parts of a model do not depend on the tokens at all: a VLM's vision tower and
projector (LLaVA), an encoder-decoder's encoder and the K/V its cross-attention
computes from the encoder's output (Whisper). They run once per request, in the
prefill step, and never in a decode step; the K/V such a part caches keep a fixed
length (the encoder's ``e`` positions), whatever the number of generated tokens.

Nothing is written per model: the **token stream** is the model's inputs of role
``index`` (``input tokens[b, s]: index``, position ids), or every input where a
model has none of that role (a decoder written over embeddings). A tensor is
*per token* when it is computed from the token stream (or carries the sequence
symbol ``s`` or the key axis ``n_keys`` in its shape); an operator is **per
request** when it reads at least one model input and none of its inputs is per
token (the vision tower reads ``pixels``, the encoder reads ``features``).
Operators that read no input at all (a rotary table, a parameter's node) are left
per token, as before. So a VLM or encoder-decoder written in the language gets
the split for free.

Sources: transformers 5.24 ``models/whisper/modeling_whisper.py::WhisperAttention.forward``
(a cross-attention layer computes its K/V from the encoder's output once, stores them
in ``EncoderDecoderCache.cross_attention_cache`` and re-uses them while
``cache.is_updated[layer_idx]``), ``WhisperForConditionalGeneration.generate`` /
``GenerationMixin`` (the encoder runs once, its output passed as
``encoder_outputs`` to every decode step), and
``models/llava/modeling_llava.py::LlavaForConditionalGeneration.forward`` (the
vision tower runs only when ``pixel_values`` is given: the prefill step;
``prepare_inputs_for_generation`` passes ``pixel_values`` only on the first step).
"""

from __future__ import annotations

from ..engine.graph import CostGraph
from ..engine.symbols import as_expr


def _inputs(cg: CostGraph) -> list[str]:
    return [p for p, d in cg.nodes.items() if d["kind"] == "input"]


def _ancestors(cg: CostGraph, tid: str) -> set[str]:
    """The tensors ``tid`` is computed from (itself included), through their producers."""
    seen, stack = set(), [tid]
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        seen.add(t)
        x = cg.tensors.get(t)
        node = cg.nodes.get(x.producer) if x is not None else None
        if node is not None:
            stack.extend(node["inputs"])
    return seen


def token_roots(cg: CostGraph, seq=None) -> set[str]:
    """The input tensors that carry the token stream, with every input whose shape holds the
    sequence symbol ``seq``; every input where none is of role ``index``.

    The token stream is the ``index`` inputs the caches over ``seq`` are computed from (those
    that grow with the tokens), or every ``index`` input where ``seq`` is not given or those
    caches read none. So the index inputs of a part run once per request — Llama 3.2 Vision's
    tile and position rows, read by its vision tower only — are not the stream, and that part
    runs once per request."""
    inputs = _inputs(cg)
    index = {p for p in inputs if cg.tensors[p].role == "index"}
    if not index:
        return set(inputs)
    if seq is not None:
        grown = [e for e in cg.caches if not e.state and cg.tensors[e.tensor].shape[-2] == seq]
        index = set().union(*(_ancestors(cg, e.tensor) & index for e in grown)) or index
        index |= {p for p in inputs if any(z.has(seq) for z in cg.tensors[p].shape)}
    return index


def built_from_tokens(cg: CostGraph, tensor) -> bool:
    """Whether a cached ``tensor`` (``[B, ..., S, d]``, of a graph being built) grows with the
    token stream: an ancestor is an ``index`` input (or the graph has no ``index`` input: every
    input counts), and its sequence axis ``S`` is a dimension of its own. Used by
    :func:`costgraph.inference.phases.split_keys` to leave a per-request cache at its own length:

    * a cross-attention's K/V over an encoder's ``e`` positions (Whisper: computed from the
      audio features, no index input);
    * K/V over an axis derived from other dimensions, which no decoded token lengthens: Llama 3.2
      Vision's cross-attention over the image's ``M = nt·(pp² + 1)`` tokens (transformers 5.24
      ``models/mllama/modeling_mllama.py::MllamaTextCrossAttention.forward``: K/V projected from
      ``cross_attention_states`` at the prefill, then read from ``past_key_values`` at every decode
      step; vLLM caches them once per request, ``CrossAttentionSpec``)."""
    if len(tensor.shape) >= 2 and not as_expr(tensor.shape[-2]).is_Symbol:
        return False
    roots = token_roots(cg)
    if not roots or not any(cg.tensors[p].role == "index" for p in roots):
        return True
    return bool(_ancestors(cg, tensor.id) & roots)


def per_request_ops(cg: CostGraph, seq, keys) -> set[str]:
    """The operator paths that run once per request (module docstring): they read a model
    input, directly or not, and nothing computed from the token stream; no output of theirs
    has the sequence symbol ``seq`` or the key axis ``keys`` in its shape."""
    roots = token_roots(cg, seq)
    # by producing node: a tensor handed from one repeat iteration to the next (carried) is in no
    # node's outputs, its producer is the node that feeds the first iteration (engine/graph.py)
    token, reached = set(roots), set(_inputs(cg))
    once = set()

    def of(tid, nodes):
        t = cg.tensors.get(tid)
        return tid in nodes or (t is not None and t.producer in nodes)

    for path, d in cg.ops():
        ins = d["inputs"]
        outs = [cg.tensors[o] for o in d["outputs"]]
        if any(of(i, token) for i in ins) or any(z.has(seq) or z.has(keys) for t in outs for z in t.shape):
            token.add(path)
            reached.add(path)
        elif any(of(i, reached) for i in ins):
            reached.add(path)
            once.add(path)
    # a node reading no tensor (a `param`'s: Whisper's sinusoidal table) whose every reader runs
    # once per request runs with them
    readers: dict[str, list[str]] = {}
    for path, d in cg.ops():
        for i in d["inputs"]:
            readers.setdefault(cg.tensors[i].producer if i in cg.tensors else i, []).append(path)
    for path, d in cg.ops():
        if not d["inputs"] and readers.get(path) and all(r in once for r in readers[path]):
            once.add(path)
    return once


def phase_notes(inf) -> list[str]:
    """The assumptions :func:`costgraph.inference.roofline.infer` states about what runs at which
    rate: recurrent states, and the part of the model run once per request (``inf``: an
    :class:`~costgraph.inference.phases.Inference` or a parallel serving analysis)."""
    notes = []
    if inf.states:
        notes.append("recurrent state (conv1d, selective_scan): a fixed size per sequence whatever P + G, "
                     "in the activation dtype (not --kv); a step reads it (none at the prefill, which "
                     "starts from zeros) and writes it back; counted in the KV cache, not paged")
    once, fixed = getattr(inf, "once", ()), getattr(inf, "fixed", ())
    if once:
        notes.append(f"once per request, in the prefill only: the operators computed from inputs other "
                     f"than the tokens ({len(once)} graph nodes: a vision tower and projector, an encoder, "
                     "cross-attention K/V); decode steps run the rest")
    if fixed:
        notes.append("K/V computed once per request (cross-attention over the encoder's positions) keep "
                     "their own length whatever P + G: written by the prefill, read whole by each decode step, "
                     "counted in the KV cache beside the growing one (transformers' EncoderDecoderCache)")
    tp = getattr(inf, "tp", None)
    norms = list(getattr(tp, "split_norms", ())) if tp is not None else []
    if norms:
        names = sorted({p.rsplit("/", 1)[-1] for p in norms})
        notes.append(f"TP: norms over a projection split by heads ({', '.join(names)}; {len(norms)} graph nodes) "
                     "stay split, the K/V cache split by heads as vLLM keeps it: one all-reduce per norm of each "
                     "token's fp32 sum of squares (vLLM MiniMaxText01RMSNormTP; vLLM's OLMo 2 all-gathers Q "
                     "and K instead)")
    return notes


def report_notes(inf, t: int, compute_efficiency, bandwidth_efficiency) -> list[str]:
    """The assumptions :func:`costgraph.inference.roofline.infer` names (``inf``: the analysis)."""
    notes = [
        "roofline: each op max(FLOPs/peak, bytes/bandwidth), summed over ops, no overlap between ops; "
        f"efficiency: compute {compute_efficiency}, bandwidth {bandwidth_efficiency}",
        "weights: every weight read once per step (embedding tables whole); MoE: expected distinct experts "
        "E(1 - (1 - k/E)^(b q)) under uniform routing",
        "decode = one step at n = P + G - 2 cached positions (the last); mean TPOT over the G - 1 decode steps",
        "KV cache for P + G positions per sequence; paged: each cache's kept positions rounded up to blocks",
        "capacity: weights + paged KV cache <= (1 - reserve) x device memory; activations not counted",
    ]
    notes += phase_notes(inf)   # recurrent states; what runs once per request (inference/request.py)
    if t > 1:
        notes.append("TP: per device; one all-reduce per row-parallel linear per step on the scale-up link, "
                     "not overlapped")
    notes.append("decode total and mean TPOT: closed form over n = P .. P + G - 2 (Faulhaber sums of the step "
                 "time's linear pieces, split where each op's roofline switches and where a window fills; "
                 "crossings placed at the given values); G = 1: no decode step (its values null)")
    return notes
