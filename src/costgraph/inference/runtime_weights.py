"""Weights as a serving runtime loads them: vLLM's ``Model loading took X GiB`` (V1:
``model weights take X GiB``), beside the checkpoint's bytes (issue 29 item 2).

vLLM measures the memory the model takes once loaded on each rank (the torch allocator's
increase around ``load_model``), so its figure is each rank's shard of the parameters plus
what the layers allocate beside them. :func:`vllm_weights` names each term:

* **parameters** — the rank's shard as the placement splits it under TP (costgraph's
  ``weight_bytes``: column/row/vocabulary-parallel weights ÷ t, norms whole, K/V heads
  replicated when fewer than t).
* **vocabulary padding** — ``VocabParallelEmbedding`` and ``ParallelLMHead`` pad the vocabulary
  to a multiple of 64, then split it (vllm @ 7f5d141a,
  ``vllm/model_executor/layers/vocab_parallel_embedding.py``: ``DEFAULT_VOCAB_PADDING_SIZE = 64``,
  ``pad_vocab_size = ceil(V / 64) · 64``, ``num_embeddings_per_partition = divide(padded, tp)``,
  rows beyond the vocabulary filled with 0): every weight with a vocabulary axis holds
  ``(pad(V) − V) / t`` rows more per rank (a table kept whole: ``pad(V) − V``).
* **rotary cos/sin cache** — ``RotaryEmbeddingBase`` registers ``cos_sin_cache`` of shape
  ``[max_position_embeddings, rotary_dim]`` (cos and sin halves concatenated) in the model dtype
  (vllm @ 072d10a0, ``vllm/model_executor/layers/rotary_embedding/base.py::
  _compute_cos_sin_cache``, ``cache.to(dtype)``; the dtype ``torch.get_default_dtype()``, set to
  the model's while loading: ``rotary_embedding/__init__.py::get_rope`` @ 926c71f6), and
  ``get_rope`` returns one object per distinct (head size, rotary dim, max position, scaling,
  dtype) key (``_ROPE_DICT``): one buffer per distinct rotary table of the graph, replicated on
  every rank. Llama-3.1: 131,072 × 128 × 2 B = 32 MiB. ``yarn``/``deepseek_yarn`` scaling builds
  ``original_max_position × factor`` rows instead: the caller passes the rows.

* **attention scalars** (V1, ``--vllm-engine v1``) — each attention layer creates seven fp32
  scalars on the GPU while the model is built (under the loader's target device): the KV-cache
  quantization scales ``_k_scale``, ``_v_scale``, ``_q_scale``, ``_prob_scale`` and the ranges
  ``q_range``, ``k_range``, ``v_range`` (vllm @ 004a5da0 ``vllm/attention/layer.py``:
  ``set_default_quant_scales`` registers the four buffers, ``Attention.__init__`` /
  ``MLAAttention.__init__`` the three ranges; the mid-2025 ``Attention.__init__`` creates the same
  seven). PyTorch's caching allocator rounds every block up to 512 B (pytorch
  ``c10/cuda/CUDACachingAllocator.cpp``: ``kMinBlockSize = 512``, "all sizes are rounded to at least
  512 bytes"; ``memory_allocated`` counts the rounded blocks), so each scalar takes 512 B: 7 × 512 =
  3,584 B per layer, 114,688 B for Llama-3.1-8B's 32 layers — the 14.9888 → 14.9889 GiB between the
  V0 log of vllm issue #10517 and the V1 log of PR #17122 (same model). V0 as of v0.6.4 kept the
  scales as Python floats (``self._k_scale = 1.0``): ``--vllm-engine v0`` counts none.

Not modelled: the padded or repacked shapes of quantized kernels (Marlin, MXFP4 per GPU
class): the parameters term is the checkpoint's packed bytes (docs/peers.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..choices import VLLM_ENGINE
from ..engine.symbols import as_expr

VOCAB_PADDING = 64   # vllm vocab_parallel_embedding.py::DEFAULT_VOCAB_PADDING_SIZE
#: fp32 scalars each vLLM V1 attention layer creates on the GPU (module docstring: vllm @ 004a5da0
#: attention/layer.py: _k_scale, _v_scale, _q_scale, _prob_scale, q_range, k_range, v_range)
ATTENTION_SCALARS = 7
#: the smallest block of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp kMinBlockSize)
MIN_BLOCK = 512


@dataclass(frozen=True)
class WeightTerm:
    """One term of a runtime's weight figure: ``name``, ``bytes`` per rank, ``source``."""

    name: str
    bytes: int
    source: str

    def to_dict(self) -> dict:
        return {"name": self.name, "bytes": self.bytes, "source": self.source}


@dataclass(frozen=True)
class RuntimeWeights:
    """A runtime's weight memory per rank (``terms``, summed in :attr:`bytes`) beside the
    checkpoint's bytes (``checkpoint_bytes``: every weight once, in the dtype served, all ranks
    together); ``runtime`` names it, ``log_line`` the start-up line it reproduces; ``absent``:
    terms not counted, each with its reason."""

    runtime: str
    log_line: str
    terms: tuple[WeightTerm, ...]
    checkpoint_bytes: int
    absent: tuple[str, ...] = ()

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.terms)

    def to_dict(self) -> dict:
        return {"runtime": self.runtime, "log_line": self.log_line, "bytes": self.bytes,
                "gib": round(self.bytes / 2**30, 4), "terms": [t.to_dict() for t in self.terms],
                "checkpoint_bytes": self.checkpoint_bytes, "absent": list(self.absent)}

    def lines(self) -> list[str]:
        """The text ``costgraph infer`` prints."""
        gib = lambda x: f"{x / 2**30:.4f} GiB"   # noqa: E731
        out = ["", f"weights as {self.runtime} loads them, per rank ({self.log_line})",
               f"  {'total':<26}{self.bytes:,} bytes ({gib(self.bytes)})"]
        out += [f"  {t.name:<26}{t.bytes:,} bytes ({gib(t.bytes)})" for t in self.terms]
        out.append(f"  {'checkpoint (all ranks)':<26}{self.checkpoint_bytes:,} bytes ({gib(self.checkpoint_bytes)})")
        out += [f"  not counted: {a}" for a in self.absent]
        return out


def _int(x, subs) -> int | None:
    v = as_expr(x).xreplace(subs)
    return None if v.free_symbols else int(sympy.ceiling(v))


def vocabulary(inf) -> list:
    """The vocabulary sizes of the model (the last axis of its outputs)."""
    cg = inf.cg
    return [cg.tensors[o].shape[-1] for o in cg.outputs if cg.tensors[o].shape]


def vocab_padding_bytes(inf, subs: dict, pad: int = VOCAB_PADDING) -> int | None:
    """Bytes per rank that padding the vocabulary to a multiple of ``pad`` adds to every weight
    with a vocabulary axis (module docstring); None without values."""
    cg, total = inf.cg, 0
    vocab = [as_expr(v) for v in vocabulary(inf)]
    for wid, w in cg.weights.items():
        axes = [as_expr(d) for d in w.shape]
        hit = next((v for v in vocab for d in axes if d == v), None)
        if hit is None:
            continue
        v = _int(hit, subs)
        per = _int(w.count * inf.weight_copy_bytes(wid), subs)
        if v is None or per is None:
            return None
        padded = -(-v // pad) * pad
        total += per * (padded - v) // v
    return total


def rotary_tables(inf, subs: dict) -> list[int]:
    """The rotary dims of the graph's distinct rotary tables (``rope`` nodes by ``table`` and
    rotated entries: vLLM's ``get_rope`` cache keys)."""
    seen = {}
    for _, d in inf.cg.ops():
        if d["kind"] != "rope":
            continue
        x = inf.cg.tensors[d["inputs"][0]]
        dims = _int(d["attrs"].get("dims") or x.shape[-1], subs)
        table = d["attrs"].get("table") or "shared"
        seen[(table if table != "own" else "shared", dims)] = dims
    return list(seen.values())


def attention_layers(inf, subs: dict) -> int | None:
    """vLLM's attention layers on each rank: the modules holding cached K/V (or MLA's latent),
    times their layer count (every rank builds every layer under TP); None without values."""
    modules = {}
    for e in inf.kv_entries:
        path = e.path.rsplit("/", 1)[0]
        modules[path] = _int(inf.cg.nodes[e.path]["count"], subs)
    return None if None in modules.values() else sum(modules.values())


def vllm_weights(inf, subs: dict, max_position: int | None, dtype_bytes: int = 2,
                 engine: str = VLLM_ENGINE.default) -> RuntimeWeights | None:
    """vLLM's ``model weights take`` per rank (module docstring) for the analysis ``inf`` at
    ``subs``; ``max_position``: the cos/sin cache's rows (``max_position_embeddings``; None: the
    term is named absent); ``dtype_bytes``: the model dtype's; ``engine``: ``v1`` adds the attention
    layers' fp32 scalars (:data:`ATTENTION_SCALARS` blocks of :data:`MIN_BLOCK` bytes each), ``v0``
    (or None: another runtime) none. None when a size has no value."""
    params = _int(inf.weight_memory(), subs)
    whole = _int(sum((inf.cg.weights[w].count * inf.weight_copy_bytes(w) * inf._wdiv(w) for w in inf.cg.weights),
                     sympy.Integer(0)), subs)
    pad = vocab_padding_bytes(inf, subs)
    if params is None or whole is None or pad is None:
        return None
    terms = [WeightTerm("parameters (rank shard)", params, "the placement's TP shard (costgraph weight_bytes)"),
             WeightTerm("vocabulary padding", pad, "vllm vocab_parallel_embedding.py: pad to 64, then / tp")]
    absent = []
    tables = rotary_tables(inf, subs)
    if tables and max_position is not None:
        terms.append(WeightTerm("rotary cos/sin cache", sum(max_position * r * dtype_bytes for r in tables),
                                f"vllm rotary_embedding/base.py: {len(tables)} x [max_position {max_position:,}, "
                                f"rotary_dim {', '.join(map(str, tables))}] x {dtype_bytes} B"))
    elif tables:
        absent.append("rotary cos/sin cache: max_position_embeddings unknown (give a config.json)")
    layers = attention_layers(inf, subs) if engine == "v1" else 0
    if layers:
        terms.append(WeightTerm("attention scalars", layers * ATTENTION_SCALARS * MIN_BLOCK,
                                f"vllm attention/layer.py (V1): {layers} layer(s) x {ATTENTION_SCALARS} fp32 scalars "
                                f"(k/v/q/prob scales, q/k/v ranges) x {MIN_BLOCK} B (PyTorch's smallest block)"))
    absent.append("quantized kernels' padded/repacked shapes (Marlin, MXFP4): checkpoint's packed bytes counted")
    return RuntimeWeights("vLLM", "Model loading took / model weights take", tuple(terms), whole, tuple(absent))


def attach(rep, inf, max_position, engine: str = VLLM_ENGINE.default) -> None:
    """Set ``rep.runtime_weights`` (an :class:`~costgraph.inference.roofline.InferenceReport`) to
    :func:`vllm_weights` for plain TP (``inf`` an :class:`~costgraph.inference.phases.Inference`;
    None for the parallel serving layouts), the model dtype's bytes from the compute dtype; ``engine``:
    vLLM's (``--vllm-engine``)."""
    from .phases import Inference

    if not isinstance(inf, Inference):
        return
    mp = None if max_position is None else int(max_position)
    width = 4 if rep.settings.compute in ("fp32", "tf32") else 2
    rep.runtime_weights = vllm_weights(inf, rep.subs, mp, width, engine)
