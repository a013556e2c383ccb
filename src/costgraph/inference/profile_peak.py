"""The activation peak of vLLM's profile run: the tensors alive at once in one forward.

vLLM sizes its KV cache from the memory PyTorch allocated at the peak of a profile forward of
``max_num_batched_tokens`` tokens (V0: vllm @ v0.6.4 ``vllm/worker/worker.py::
Worker.determine_num_available_blocks``, ``torch.cuda.memory_stats()["allocated_bytes.all.peak"]``
less the weights is its log's ``peak_torch_memory`` minus the weights; V1: ``gpu_worker.py``'s
"PyTorch activation peak memory"). The peak is not one operator's inputs and outputs: eager
PyTorch frees a tensor when the last Python name that holds it goes, so at an operator these
are alive (:func:`activation_estimate`):

1. the operator's inputs and outputs;
2. every tensor made before it and read after it (the residual stream);
3. in a module that calls no submodule, the inputs of the module, which the caller still holds (``hidden_states = self.mlp(
   hidden_states)`` keeps the normalised input until ``mlp`` returns);
4. in such a module, the tensors it made before the operator, held by its local names until it
   returns (a module that calls submodules, vLLM's decoder layer, rebinds ``hidden_states``):
   vLLM's ``LlamaMLP.forward`` (vllm @ e06c9ba2 ``vllm/model_executor/models/llama.py``) is
   ``gate_up, _ = self.gate_up_proj(x); x = self.act_fn(gate_up); x, _ = self.down_proj(x)``:
   ``gate_up`` [T, 2i] lives through ``down_proj``.

What never exists in vLLM's kernels counts nothing: views (their input is the storage), a
``glu_gate`` activation read only by a product (``SiluAndMul`` / ``GeluAndMul`` read
``gate_up`` and write the product), a ``kv_expand`` copy (fused attention reads the grouped
heads), attention scores (a tensor with both the query and the key axis). Llama-3.1-8B at the
peak (``down_proj``): ``[T, h]`` normalised input + ``[T, h]`` residual + ``[T, i]`` gate +
``[T, i]`` up + ``[T, i]`` product + ``[T, h]`` output = ``(3h + 3i) · 2`` B = 110,592 B per
token, which reproduces V0's ``peak_torch_memory`` of vllm issue #10517 (RTX 3090, 20,000 and
29,000 batched tokens: 17.06 and 17.98 GiB with 14.9888 GiB of weights; tests/inference/test_profile_peak.py).

The output head runs over ``min(max_num_seqs, tokens)`` rows (vLLM computes logits only for the
rows it samples). Routed experts run in vLLM's fused MoE kernel (vllm @ 000d1458
``vllm/model_executor/layers/fused_moe/fused_moe.py::fused_experts_impl``): at the experts the live
set is what the caller holds (the residual and the normalised input, into which the sum is written
in place) and the kernel's buffers for ``M = min(tokens, 32768)`` tokens — ``cache13`` of
``M·top_k·max(N, K)`` and ``intermediate_cache2`` of ``M·top_k·N/2`` values (``N`` the gate and up
width, ``K`` the hidden width, per device; :func:`_fused_moe`). Mixtral-8x7B at 8192 tokens:
``8192 · (2h + 2·(2i + i))`` bf16 values = 1,543,503,872 B. Not counted: the router's logits and the
top-k weights and ids (``[T, E]``, ``[T, k]``: under 0.1% of that), the sampler's buffers (V0's: :mod:`costgraph.inference.sampler_peak`, the larger of the two is the peak). Module scope: an operator's module is its path's parent; the model's top level
(``embed_tokens``, ``norm``, ``lm_head``) holds no locals (vLLM's model forward rebinds
``hidden_states``).
"""

from __future__ import annotations

import sympy

from ..engine.symbols import as_expr
from ..ops.registry import has_role


#: operators vLLM's kernels run in place or write in their input's layout: the rotary embedding
#: (vllm ``rotary_embedding/base.py::RotaryEmbedding.forward_cuda``: ``ops.rotary_embedding(positions,
#: query, key, ...)`` rotates ``query`` and ``key`` in place) and the heads' merge (the attention
#: backends write their output as ``[T, heads · head_dim]``: ``output = torch.empty(...)`` in
#: ``vllm/attention/layer.py::Attention.forward``)
IN_PLACE = ("rope", "merge_heads")


def _module(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _roots(cg, ops) -> dict:
    """Each tensor's storage: a view's is its input's (``Tensor.storage``), a ``kv_expand``
    copy's its input's (fused attention reads the grouped heads), an :data:`IN_PLACE` operator's
    its input's, a repeated block's carried
    ``@in`` / ``@out`` tensor the output of the operator that made it (``Tensor.producer``), a
    ``glu_gate`` activation's output read only by products None (the fused GLU never writes it:
    module docstring); any other tensor is its own."""
    readers: dict = {}
    for _, d in ops:
        for t in d["inputs"]:
            readers.setdefault(t, []).append(d["kind"])
    made = {t: p for p, d in ops for t in d["outputs"]}
    outputs = {p: d["outputs"] for p, d in ops}
    root: dict = {}

    def of(t):
        if t not in root:
            x = cg.tensors.get(t)
            if x is not None and x.storage != t:
                root[t] = of(x.storage)
            elif t not in made and x is not None and outputs.get(x.producer):
                root[t] = of(outputs[x.producer][0])
            else:
                root[t] = t
        return root[t]

    for p, d in ops:
        if (has_role(d["kind"], "kv_expand") or d["kind"] in IN_PLACE) and d["inputs"]:
            root.update({t: of(d["inputs"][0]) for t in d["outputs"]})
        elif has_role(d["kind"], "glu_gate") and all(
                readers.get(t) and all(k == "mul" for k in readers[t]) for t in d["outputs"]):
            root.update({t: None for t in d["outputs"]})
    for _, d in ops:
        for t in (*d["inputs"], *d["outputs"]):
            of(t)
    return root


def activation_estimate(inf, subs: dict, tokens: int, seqs: int) -> int:
    """Bytes of vLLM's profile-run activation peak (module docstring): the largest live set
    over the operators of a forward of ``tokens`` tokens of one sequence (``n = 0``), per
    device, in the activation dtype. ``inf``: the :class:`~costgraph.inference.phases.Inference`
    (its TP divisors apply); ``seqs``: ``max_num_seqs`` (the output head's rows)."""
    from .phases import KEYS

    cg = inf.cg
    ops = [(p, d) for p, d in cg.ops() if not as_expr(d["count"]).xreplace(subs).is_zero]
    root = _roots(cg, ops)
    base = {**subs, inf.b: sympy.Integer(1)}
    memo: dict = {}

    def size(tid, rows) -> sympy.Expr:
        if tid is None:
            return sympy.Integer(0)
        if (tid, rows) not in memo:
            x = cg.tensors[tid]
            dims = [as_expr(z) for z in x.shape]
            scores = any(z.has(inf.s) for z in dims) and any(z.has(KEYS) for z in dims)
            sub = {**base, inf.s: sympy.Integer(rows), KEYS: sympy.Integer(rows)}
            memo[tid, rows] = sympy.Integer(0) if scores else \
                as_expr(x.numel * inf._act.bytes(x.role) / inf._tdiv(tid)).xreplace(sub)
        return memo[tid, rows]

    share, made, last = {}, {}, {}
    for i, (p, d) in enumerate(ops):
        sh = as_expr(d["active"]).xreplace(subs) / as_expr(d["count"]).xreplace(subs)
        share[p] = sh if sh.is_number and sh < 1 else sympy.Integer(1)   # a routed expert: k/E of the tokens
        for t in d["outputs"]:
            made.setdefault(root[t], (i, p))
        for t in d["inputs"]:
            last[root[t]] = i
    read = set(last)
    peak = 0
    fused = _fused_moe(ops, share, root, size, subs)
    readers_routed: dict = {}   # storage -> whether every operator reading it is a routed one
    for q, d in ops:
        for t in d["inputs"]:
            readers_routed[root[t]] = readers_routed.get(root[t], True) and share[q] < 1
    for i, (p, d) in enumerate(ops):
        if _module(p) in fused:   # a routed expert: vLLM's fused kernel and its buffers instead (_fused_moe)
            first, buffers = fused[_module(p)]
            if i == first:
                # the experts' sum is written in place into the normalised input (``inplace=True``:
                # ``out_hidden_states = hidden_states``): what a routed operator makes, and an accumulator
                # only routed operators read (the graph's zeros), is not held besides
                total = buffers(tokens) + sum((size(t, tokens) for t in _held(ops, i, p, made, last, root)
                                               if t is not None and share[made[t][1]] == 1
                                               and not readers_routed.get(t)), sympy.Integer(0))
                if not total.free_symbols:
                    peak = max(peak, int(sympy.ceiling(total)))
            continue
        if has_role(d["kind"], "view") or not d["outputs"]:
            continue
        own = {root[t] for t in (*d["inputs"], *d["outputs"])}
        head = not any(root[o] in read for o in d["outputs"])   # the output head: the sampled rows only
        rows = min(seqs, tokens) if head else tokens
        total = share[p] * sum((size(t, rows) for t in own), sympy.Integer(0))
        if not head:
            total += sum((size(t, tokens) * share[made[t][1]] for t in _held(ops, i, p, made, last, root) - own
                          if t is not None), sympy.Integer(0))
        if not total.free_symbols:
            peak = max(peak, int(sympy.ceiling(total)))
    return peak


#: tokens per chunk of vLLM's fused MoE kernel (vllm @ 001f69f8 ``vllm/envs.py``: ``VLLM_FUSED_MOE_CHUNK_SIZE``
#: default "32768"); its buffers are sized by ``M = min(tokens, chunk)``
FUSED_MOE_CHUNK = 32768


def _fused_moe(ops, share: dict, root: dict, size, subs: dict) -> dict:
    """The routed experts' modules (every operator under the module runs on a share < 1 of the tokens)
    → ``(index of the module's first operator, buffers)``, ``buffers(T)`` the bytes vLLM's fused MoE
    kernel allocates for ``T`` tokens (vllm @ 000d1458 ``vllm/model_executor/layers/fused_moe/fused_moe.py
    ::fused_experts_impl``): ``M = min(T, chunk)``, ``cache13 = M·top_k·max(N, K)`` (``intermediate_cache1``
    [M, top_k, N] and ``intermediate_cache3`` [M, top_k, K] share it) and ``intermediate_cache2`` [M·top_k,
    N/2], in the activation dtype; ``N`` the gate and up projections' width (``w1.shape[1]``: the outputs of
    the module's operators that read from outside it), ``K`` the hidden width (what the module hands back),
    per device; ``top_k`` the module's active count over the count of the operator that made its input
    (Mixtral: ``k·l / l = 2``)."""
    groups: dict = {}
    for i, (p, d) in enumerate(ops):
        groups.setdefault(_module(p), []).append(i)
    producer = {t: q for q, d in ops for t in d["outputs"]}
    counts = {q: as_expr(d["count"]).xreplace(subs) for q, d in ops}
    out = {}
    for mod, idx in groups.items():
        if not mod or any(share[ops[j][0]] == 1 for j in idx):
            continue
        mine = {root[t] for j in idx for t in ops[j][1]["outputs"]}
        n_bytes = sum((size(t, 1) for j in idx for t in ops[j][1]["outputs"]
                       if all(root[x] not in mine for x in ops[j][1]["inputs"])), sympy.Integer(0))
        later = {root[x] for q, d in ops if _module(q) != mod for x in d["inputs"]}
        k_bytes = sum((size(t, 1) for j in idx for t in ops[j][1]["outputs"] if root[t] in later), sympy.Integer(0))
        first = ops[idx[0]]
        source = next((producer[x] for x in first[1]["inputs"] if x in producer), None)
        if source is None:
            continue
        top_k = as_expr(first[1]["active"]).xreplace(subs) / counts[source]

        def buffers(tokens, n=n_bytes, k=k_bytes, top=top_k):
            m = min(tokens, FUSED_MOE_CHUNK)
            return m * top * (sympy.Max(n, k) + n / 2)
        out[mod] = (idx[0], buffers)
    return out


def _held(ops, i: int, path: str, made: dict, last: dict, root: dict) -> set:
    """Storages alive at operator ``i`` (``path``) besides its own: made before and read after
    it (2); in a leaf module (one that calls no submodule: vLLM's attention, MLP, expert
    forwards, which name each intermediate), its inputs from outside the module (3) and its
    earlier outputs (4). A module that calls submodules (the decoder layer) rebinds
    ``hidden_states`` and holds neither."""
    mod = _module(path)
    held = {t for t, (j, _) in made.items() if j < i and last.get(t, -1) > i}
    inside = [j for j, (q, _) in enumerate(ops) if q.startswith(mod + "/")] if mod else []
    if inside and all(_module(ops[j][0]) == mod for j in inside):
        held |= {root[t] for j in inside for t in ops[j][1]["inputs"]
                 if root[t] in made and made[root[t]][0] < inside[0]}                    # (3)
        held |= {t for t, (j, q) in made.items() if j < i and _module(q) == mod}      # (4)
    return held
