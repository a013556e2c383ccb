"""The sampler's buffers in vLLM's profile run (V0 and V1): the logits of ``max_num_seqs`` rows and what
sampling them holds at once, beside the forward's activation peak (:mod:`costgraph.inference.profile_peak`).

**V0**'s profile run (vllm @ 00f5ff34 ``vllm/worker/model_runner.py::profile_run``) runs one forward of
``max_num_batched_tokens`` tokens over ``max_num_seqs`` dummy sequences with ``SamplingParams(top_p=0.99,
top_k=vocab_size - 1)``, then samples one token of each: the logits have ``R = min(max_num_seqs, tokens)``
rows of the vocabulary ``V`` (gathered whole on the driver rank). Its sampler (vllm @ 00f5ff34
``vllm/model_executor/layers/sampler.py::Sampler.forward``) turns them into fp32 (``logits.to(torch.float)``,
temperature divided in place) and, with top-k and top-p on, ``_apply_top_k_top_p`` holds at its last line
(every local name alive until it returns) the model runner's logits in the model's dtype, the fp32 copy,
``logits.sort``'s values and int64 indices, the top-k mask, the top-p ``softmax`` and ``cumsum`` (not in
place at that commit), the top-p mask and the re-sorted copy: 4 + 4 + 8 + 1 + 4 + 4 + 1 + 4 = 30 bytes
besides the logits' own. The model runner still holds the forward's last hidden states ``[T, h]``.

**V1**'s profile run (vllm @ 000fc94b ``vllm/v1/worker/gpu_model_runner.py::profile_run``) runs
``_dummy_run(max_num_batched_tokens)`` over ``R = min(tokens, max_num_seqs)`` requests (its ``num_reqs``),
keeps the hidden states ``[T, h]`` and the last token's of each request (a gather, ``[R, h]``), then
``_dummy_sampler_run``: ``torch.rand_like`` of those (``[R, h]``), their logits, and the sampler with
``top_k = V - 1``, ``top_p = 0.9``, temperature 0.5, no penalties and no logprobs, twice (the second time
with a generator, which takes ``forward_native``, the sorting path, whatever the first took: FlashInfer's
sampling is opt-in, ``VLLM_USE_FLASHINFER_SAMPLER``). Its sampler (vllm @ 3e342658
``vllm/v1/sample/sampler.py``) makes the fp32 copy and divides the temperature in place;
``apply_top_k_top_p`` (vllm @ 3babc05a ``vllm/v1/sample/ops/topk_topp_sampler.py``) holds V0's buffers but
the cumsum (``out=probs_sort``, in place): 26 bytes besides the logits' own. V1 reads the profile's peak as
PyTorch's ``allocated_bytes.all.peak`` right after ``profile_run`` returns
(``vllm/v1/worker/gpu_worker.py::determine_available_memory``): the sampler's buffers are in it.

The bytes per logit and the default ``max_num_seqs`` of V0 are data (``sampler_peak.toml``, each with its
source): :func:`live`, :func:`engine_max_num_seqs`. Later in each sampler, ``softmax`` and the random
sampling's noise hold fewer. Not counted: ``torch.sort``'s own workspace (CUB's double buffers, freed before it
returns), which no kernel-level source sizes here.
"""

from __future__ import annotations

import sympy

from .. import datafiles
from ..datafiles import Field, Kind, Schema
from ..engine.symbols import as_expr
from ..ops.registry import has_role
from .kv_parts import SamplerPeak

_TEXT = (Field("description", "text"),)
ENGINE = Kind("vLLM engine", (*_TEXT, Field("max_num_seqs", unit="sequences", required=False, positive=True),
                              Field("hidden_row_copies", unit="tensors", required=False)))
BUFFER = Kind("sampler buffer", (*_TEXT, Field("engines", "names"), Field("bytes", unit="B/logit", positive=True)))
SCHEMA = Schema("sampler_peak.toml", "costgraph.inference", groups=(("engine", ENGINE), ("buffer", BUFFER)))


def table() -> datafiles.DataSet:
    """``sampler_peak.toml`` (bundled only: the figures of vLLM's code, not of a user's run)."""
    return datafiles.load(SCHEMA)


def _engine(engine: str) -> datafiles.Entry:
    """The ``[engine.NAME]`` entry of ``engine`` (``v0``, ``v1``)."""
    return table().groups["engine"][engine]


def live(engine: str) -> tuple[tuple[str, int], ...]:
    """``((name, bytes per logit), ...)``: the buffers alive at once at the end of ``engine``'s top-k/top-p
    masking (module docstring), besides the logits in the model's dtype: V0's 30 bytes, V1's 26.

    >>> sum(b for _, b in live("v0")), sum(b for _, b in live("v1"))
    (30, 26)
    """
    return tuple((e["description"], e["bytes"]) for e in table().groups["buffer"].values() if engine in e["engines"])


def engine_max_num_seqs(engine: str) -> int | None:
    """``engine``'s default ``max_num_seqs`` where it is one number (V0: 256), else None (V1's by device:
    :func:`costgraph.inference.capacity.batch_defaults`)."""
    return _engine(engine).get("max_num_seqs")


def sampler_peak(inf, subs: dict, tokens: int, seqs: int, engine: str = "v0") -> SamplerPeak | None:
    """A :class:`~costgraph.inference.kv_parts.SamplerPeak` (bytes, rows, vocab, per_logit, hidden_bytes): what
    vLLM ``engine``'s (``v0``, ``v1``) sampler holds at its peak in the profile run (module docstring) for
    ``tokens`` batched tokens and ``seqs`` sequences, on the driver rank: the last hidden states ``[T, h]``
    (V1: and ``hidden_row_copies`` of ``[R, h]``) and ``rows · vocab · per_logit`` bytes (``per_logit``: the
    model dtype's bytes + Σ :func:`live`). ``vocab`` and ``h``: the output head's (the operator whose outputs
    nothing reads), whole (vLLM gathers the logits). None where the graph has no such head or a size has no
    value."""
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
    rows = min(seqs, tokens)
    state = as_expr(x.numel * inf._act.bytes(x.role))
    copies = _engine(engine).get("hidden_row_copies") or 0   # V1's [R, h] tensors beside the [T, h]
    hidden = state.xreplace({**one, inf.s: sympy.Integer(tokens)}) + copies * rows * state.xreplace(one)
    own = inf._act.bytes(out.role)
    if hidden.free_symbols or as_expr(own).free_symbols:
        return None
    per_logit = own + sum(b for _, b in live(engine))
    return SamplerPeak(int(sympy.ceiling(hidden + rows * vocab * per_logit)), rows, int(vocab), per_logit,
                       int(sympy.ceiling(hidden)))
