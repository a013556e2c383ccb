"""The sampler's buffers in vLLM V0's profile run: the logits of ``max_num_seqs`` rows and what sampling
them holds at once, beside the forward's activation peak (:mod:`costgraph.inference.profile_peak`).

V0's profile run (vllm @ 00f5ff34 ``vllm/worker/model_runner.py::profile_run``) runs one forward of
``max_num_batched_tokens`` tokens over ``max_num_seqs`` dummy sequences with ``SamplingParams(top_p=0.99,
top_k=vocab_size - 1)``, then samples one token of each: the logits have ``R = min(max_num_seqs, tokens)``
rows of the vocabulary ``V`` (gathered whole on the driver rank). Its sampler (vllm @ 00f5ff34
``vllm/model_executor/layers/sampler.py::Sampler.forward``) turns them into fp32 (``logits.to(torch.float)``,
temperature divided in place) and, with top-k and top-p on, ``_apply_top_k_top_p`` holds at its last line
(every local name alive until it returns) the values per logit of :data:`LIVE`: the model runner's logits
in the model's dtype, the fp32 copy, ``logits.sort``'s values and int64 indices, the top-k mask, the top-p
``softmax`` and ``cumsum`` (not in place at that commit), the top-p mask and the re-sorted ``empty_like``;
4 + 4 + 8 + 1 + 4 + 4 + 1 + 4 = 30 bytes besides the logits' own. The model runner still holds the
forward's last hidden states ``[T, h]``. Later, ``softmax``, ``log_softmax`` and the multinomial's copy and
noise hold fewer (22 bytes a logit). Not counted: ``torch.sort``'s own workspace (CUB's double buffers, freed
before it returns), which no kernel-level source sizes here.

V0's ``max_num_seqs`` default is 256 (vllm @ 001999d2 ``vllm/engine/arg_utils.py::EngineArgs.__post_init__``:
``256 if not envs.VLLM_USE_V1 else 1024``): :data:`V0_MAX_NUM_SEQS`. V1's sampler is not counted: its path
changed between versions (FlashInfer's top-k/top-p sampling where installed, no sort; ``cumsum`` in place
later), and no V1 log in ``bench/bench_serving_logs.py`` prints its activation peak to check one against.
"""

from __future__ import annotations

import sympy

from ..engine.symbols import as_expr
from ..ops.registry import has_role
from .kv_parts import SamplerPeak

#: bytes per logit alive at once at the end of V0's ``_apply_top_k_top_p`` (module docstring), by name; the
#: logits in the model's dtype are the first term (its bytes: the activation dtype's)
LIVE = (("logits fp32 copy (temperature)", 4), ("sorted logits", 4), ("sort indices (int64)", 8),
        ("top-k mask (bool)", 1), ("top-p softmax", 4), ("top-p cumsum", 4), ("top-p mask (bool)", 1),
        ("re-sorted logits", 4))
#: vLLM V0's default max_num_seqs (module docstring)
V0_MAX_NUM_SEQS = 256


def sampler_peak(inf, subs: dict, tokens: int, seqs: int) -> SamplerPeak | None:
    """A :class:`~costgraph.inference.kv_parts.SamplerPeak` (bytes, rows, vocab, per_logit, hidden_bytes): what V0's sampler holds at its peak in the profile
    run (module docstring) for ``tokens`` batched tokens and ``seqs`` sequences, on the driver rank: the
    last hidden states ``[T, h]`` and ``rows · vocab · per_logit`` bytes (``per_logit``: the model dtype's
    bytes + Σ :data:`LIVE`). ``vocab`` and ``h``: the output head's (the operator whose outputs nothing
    reads), whole (V0 gathers the logits). None where the graph has no such head or a size has no value."""
    cg = inf.cg
    ops = [(p, d) for p, d in cg.ops() if not has_role(d["kind"], "view") and d["outputs"]]
    read = {t for _, d in cg.ops() for t in d["inputs"]}
    one = {**subs, inf.b: sympy.Integer(1), inf.s: sympy.Integer(1)}
    best = None
    for _, d in ops:
        if any(o in read for o in d["outputs"]) or not d["inputs"]:
            continue
        out, x = cg.tensors[d["outputs"][0]], cg.tensors[d["inputs"][0]]
        vocab = as_expr(out.numel).xreplace(one)
        if vocab.free_symbols or (best is not None and vocab <= best[0]):
            continue
        best = (vocab, x, out)
    if best is None:
        return None
    vocab, x, out = best
    hidden = as_expr(x.numel * inf._act.bytes(x.role)).xreplace({**one, inf.s: sympy.Integer(tokens)})
    own = inf._act.bytes(out.role)
    if hidden.free_symbols or as_expr(own).free_symbols:
        return None
    rows = min(seqs, tokens)
    per_logit = own + sum(b for _, b in LIVE)
    return SamplerPeak(int(sympy.ceiling(hidden + rows * vocab * per_logit)), rows, int(vocab), per_logit,
                       int(sympy.ceiling(hidden)))
