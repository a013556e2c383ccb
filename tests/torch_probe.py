"""Measurement probes: what PyTorch + Hugging Face ``transformers`` count.

A small library for the test tier that compares costgraph's derived costs with
real models. Nothing here is a test. Every model lives on the *meta* device:
no weights are allocated or downloaded, no arithmetic is done, only shapes,
dtypes and the autograd graph exist, so even GPT-2 small probes in about a
second on a laptop CPU.

    model = build_meta("gpt2", {"n_embd": 768, "n_layer": 12, "n_head": 12,
                                "vocab_size": 50257, "n_positions": 1024})
    param_count(model)           # 124_439_808
    flops(model, 1, 1024)        # {"forward": 291_648_307_200, ...}
    saved_bytes(model, 1, 1024)  # {"bytes": ..., "storages": [...], ...}

Pinned, tested versions (see TORCH_NOTES.md beside this file)::

    pip install torch==2.13.0 transformers==5.24.0

The module imports without torch; torch and transformers are imported on first
use, so a test should ``pytest.importorskip("torch")`` and
``pytest.importorskip("transformers")`` before calling anything here.

What the probes do that a plain ``model(input_ids)`` would not:

* No ``attention_mask`` is passed (full-length sequences), and the forward runs
  inside :func:`meta_forward`: with no mask transformers 5 scans ``position_ids``
  for packed sequences with a data-dependent ``(...).all()``, which raises
  ``Tensor.item() cannot be called on meta tensors``; on meta that scan returns
  None, its answer for ``arange`` positions. (A 2-D all-ones mask is no way out:
  SDPA's and T5's bidirectional mask code call ``padding_mask.all()`` too.)
* ``use_cache=False``: a training-style forward, no KV cache.
* FlopCounterMode counts only matmul-like aten ops (mm, addmm, bmm, baddbmm,
  convolution, SDPA/flash/efficient attention, _scaled_mm). Mixture-of-experts
  layers in transformers 5 default to ``experts_implementation="grouped_mm"``
  (``aten._grouped_mm``), which FlopCounterMode does not know and would count
  as 0; :func:`flops` adds a formula for it (:func:`GROUPED_MM_FLOPS`), reported
  under its own op name ``aten._grouped_mm`` so it can be told apart.
* :func:`saved_bytes` runs training-time dropout as ``native_dropout`` (1-byte
  bool mask, what CUDA runs) instead of the CPU/meta fallback that keeps the
  mask in bf16; see :func:`native_dropout`.
"""
from __future__ import annotations

import contextlib
import time
from collections import defaultdict

TORCH_VERSION = "2.13.0"
TRANSFORMERS_VERSION = "5.24.0"
INSTALL_COMMAND = f"pip install torch=={TORCH_VERSION} transformers=={TRANSFORMERS_VERSION}"

#: model types built with a seq2seq class rather than ...ForCausalLM
SEQ2SEQ_TYPES = frozenset({"t5", "mt5", "umt5", "bart", "mbart", "pegasus"})


def _torch():
    import torch

    return torch


# ---------------------------------------------------------------- building


def build_meta(
    model_type: str,
    config_dict: dict,
    *,
    dtype: str = "bfloat16",
    attn_implementation: str = "eager",
    experts_implementation: str | None = None,
    train: bool = True,
):
    """A transformers model for ``model_type`` built from ``config_dict`` on the meta device.

    ...ForCausalLM through AutoModelForCausalLM, or the seq2seq LM class
    (T5ForConditionalGeneration for ``t5``). Parameters are meta tensors in
    ``dtype`` (bfloat16 by default) and require grad. ``train=True`` (the
    default) leaves the model in training mode, so dropout runs (and saves its
    masks) wherever the config's dropout probabilities are non-zero; pass
    ``train=False`` or zero the probabilities in ``config_dict`` to drop them.
    ``experts_implementation`` is passed through for MoE models (None: the
    library default, ``grouped_mm`` in transformers 5; ``"batched_mm"`` gathers
    one weight matrix per routed token and multiplies with bmm).
    """
    torch = _torch()
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    config = AutoConfig.for_model(model_type, **dict(config_dict))
    kwargs = {"attn_implementation": attn_implementation, "dtype": getattr(torch, dtype)}
    if experts_implementation is not None:
        kwargs["experts_implementation"] = experts_implementation
    auto = AutoModelForSeq2SeqLM if model_type in SEQ2SEQ_TYPES else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config, **kwargs)
    model.train(train)
    for p in model.parameters():
        p.requires_grad_(True)
    return model


def param_count(model) -> int:
    """Exact number of parameters; a tied weight (shared Parameter) counts once."""
    return int(sum(p.numel() for p in model.parameters()))


# ------------------------------------------------------------------ inputs


def _is_seq2seq(model) -> bool:
    return bool(getattr(model.config, "is_encoder_decoder", False))


def make_inputs(model, b: int, s: int, *, labels: bool = False) -> dict:
    """Keyword arguments for one training-style forward of ``[b, s]`` token ids, on meta.

    For encoder-decoders the decoder also gets ``[b, s]`` ids. ``labels=True``
    adds ``labels`` so the model computes its own loss (cross-entropy, which
    upcasts the logits to float32 in transformers).
    """
    torch = _torch()
    ids = torch.zeros((b, s), dtype=torch.long, device="meta")
    # No attention_mask: every sequence is full length, as in pre-training. A 2-D padding
    # mask would send mask creation through data-dependent `padding_mask.all()` checks.
    kw = {"input_ids": ids, "use_cache": False}
    if _is_seq2seq(model):
        kw["decoder_input_ids"] = torch.zeros((b, s), dtype=torch.long, device="meta")
    if labels:
        kw["labels"] = torch.zeros((b, s), dtype=torch.long, device="meta")
    return kw


@contextlib.contextmanager
def meta_forward():
    """Context for a forward on meta tensors: mask creation without data-dependent branches.

    With no attention_mask, transformers 5 scans ``position_ids`` for packed sequences
    (``find_packed_sequence_indices``) and branches on ``(...).all()``, which cannot run
    on meta. Our position ids are ``arange(s)``, for which that function returns None
    (not packed); on meta tensors this context returns None directly. Nothing else in
    the model changes: SDPA models then get ``is_causal=True`` and no mask, as in training.
    """
    from transformers import masking_utils

    real = masking_utils.find_packed_sequence_indices

    def find_packed_sequence_indices(position_ids, *args, **kwargs):
        if position_ids.device.type == "meta":
            return None
        return real(position_ids, *args, **kwargs)

    masking_utils.find_packed_sequence_indices = find_packed_sequence_indices
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = real


def native_dropout():
    """Context in which ``F.dropout`` in training runs ``torch.native_dropout``, as it does on CUDA.

    ATen's ``dropout`` takes its fused kernel, ``native_dropout``, only for CUDA, XPU, lazy
    and privateuse1 tensors; that kernel saves a **bool** mask (1 byte per element).
    Elsewhere, CPU and meta included, it computes ``input * (bernoulli noise / (1 - p))``
    and ``MulBackward0`` saves the noise in the input's dtype (2 bytes in bf16). On meta
    we want the GPU's bytes, so this mode routes training-time dropout (0 < p < 1) to
    ``native_dropout``. Other dropouts (p = 0, eval, SDPA's internal dropout) are untouched.
    """
    import inspect

    torch = _torch()
    from torch.overrides import TorchFunctionMode

    sig = inspect.signature(torch.nn.functional.dropout)

    class _NativeDropout(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.nn.functional.dropout:
                a = sig.bind(*args, **kwargs)
                a.apply_defaults()
                x, p, training = a.arguments["input"], a.arguments["p"], a.arguments["training"]
                if training and 0 < p < 1:
                    return torch.native_dropout(x, p, True)[0]
            return func(*args, **kwargs)

    return _NativeDropout()


def _loss(out, labels: bool):
    """The scalar that backward starts from: the model's loss, or the sum of the logits."""
    if labels:
        return out.loss
    return out.logits.sum()


# ------------------------------------------------------------------- FLOPs


def _grouped_mm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """FLOPs of ``aten._grouped_mm`` (2 per multiply-add), assuming the groups cover every row.

    2-D x 3-D (tokens x K) @ (G x K x N): 2 M K N. 3-D x 2-D: 2 M K N with N the total
    over groups. 2-D x 2-D (groups along K, e.g. a weight gradient): 2 M K N. 3-D x 3-D:
    a plain batch, 2 G M K N.
    """
    if len(a_shape) == 2 and len(b_shape) == 3:
        return 2 * a_shape[0] * a_shape[1] * b_shape[2]
    if len(a_shape) == 3 and len(b_shape) == 2:
        return 2 * a_shape[1] * a_shape[2] * b_shape[1]
    if len(a_shape) == 2 and len(b_shape) == 2:
        return 2 * a_shape[0] * a_shape[1] * b_shape[1]
    return 2 * a_shape[0] * a_shape[1] * a_shape[2] * b_shape[2]


def grouped_mm_flops_mapping() -> dict:
    """``custom_mapping`` for FlopCounterMode that counts ``aten._grouped_mm`` (MoE experts)."""
    torch = _torch()
    return {torch.ops.aten._grouped_mm: _grouped_mm_flop}


GROUPED_MM_FLOPS = _grouped_mm_flop


def _counts(mode) -> tuple[dict, dict]:
    """(per op over the whole model, per module per op) from a FlopCounterMode, string keys."""
    raw = mode.get_flop_counts()
    by_op = {str(op): int(n) for op, n in raw.get("Global", {}).items()}
    by_module = {
        mod: {str(op): int(n) for op, n in ops.items()}
        for mod, ops in raw.items()
        if mod != "Global"
    }
    return by_op, by_module


def flops(model, b: int, s: int, *, labels: bool = False, count_grouped_mm: bool = True) -> dict:
    """FLOPs that ``torch.utils.flop_counter.FlopCounterMode`` counts for ``[b, s]`` tokens.

    Returns ``forward``, ``backward`` and ``forward_backward`` (ints), the per-op
    breakdown of each (``forward_ops``, ``backward_ops``: ``{"aten.mm": n, ...}``,
    FlopCounterMode's ``get_flop_counts()["Global"]``), and the per-module
    breakdown (``forward_by_module``, ``backward_by_module``; keys are
    FlopCounterMode's dotted module paths, each counting its submodules too), and
    ``seconds``. Backward starts from ``logits.sum()`` (or the model's loss with
    ``labels=True``) and computes every parameter's gradient; gradients are
    cleared afterwards.
    """
    torch = _torch()
    from torch.utils.flop_counter import FlopCounterMode

    mapping = grouped_mm_flops_mapping() if count_grouped_mm else None
    t0 = time.perf_counter()
    inputs = make_inputs(model, b, s, labels=labels)
    fwd = FlopCounterMode(display=False, custom_mapping=mapping)
    with torch.enable_grad(), meta_forward():
        with fwd:
            out = model(**inputs)
        loss = _loss(out, labels)
        bwd = FlopCounterMode(display=False, custom_mapping=mapping)
        with bwd:
            loss.backward()
    model.zero_grad(set_to_none=True)
    f_ops, f_mod = _counts(fwd)
    b_ops, b_mod = _counts(bwd)
    f, bk = int(fwd.get_total_flops()), int(bwd.get_total_flops())
    return {
        "forward": f,
        "backward": bk,
        "forward_backward": f + bk,
        "forward_ops": f_ops,
        "backward_ops": b_ops,
        "forward_by_module": f_mod,
        "backward_by_module": b_mod,
        "seconds": time.perf_counter() - t0,
    }


# ------------------------------------------------------ saved activations


def storage_key(t) -> int:
    """Identity of the storage behind tensor ``t``, valid on meta where ``data_ptr()`` is 0.

    ``untyped_storage()._cdata`` is the address of the C++ StorageImpl: views of one
    tensor share it, distinct tensors do not. An address can be reused once a
    storage is freed, so keep the tensors alive while comparing keys (the probes do).
    """
    return t.untyped_storage()._cdata


def _storage_nbytes(t) -> int:
    return int(t.untyped_storage().nbytes())


class _ModuleStack:
    """The innermost module currently running its forward, by qualified name."""

    def __init__(self, model):
        self.stack: list[str] = []
        self.handles = []
        for name, mod in model.named_modules():
            self.handles.append(mod.register_forward_pre_hook(self._enter(name or "<root>")))
            self.handles.append(mod.register_forward_hook(self._leave(), always_call=True))

    def _enter(self, name):
        def hook(mod, args):
            self.stack.append(name)

        return hook

    def _leave(self):
        def hook(mod, args, out):
            if self.stack:
                self.stack.pop()

        return hook

    @property
    def current(self) -> str:
        return self.stack[-1] if self.stack else ""

    def remove(self):
        for h in self.handles:
            h.remove()


def _walk_graph(roots):
    """Every autograd node reachable from ``roots`` (grad_fns), each once."""
    seen, order, todo = set(), [], [r for r in roots if r is not None]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        for nxt, _ in getattr(node, "next_functions", ()):
            if nxt is not None and id(nxt) not in seen:
                todo.append(nxt)
    return order


def saved_bytes(model, b: int, s: int, *, labels: bool = False, cuda_dropout: bool = True) -> dict:
    """Bytes of the tensors autograd saves for backward during one forward of ``[b, s]`` tokens.

    Tensors are caught with ``torch.autograd.graph.saved_tensors_hooks``; each
    *storage* counts once at its full size (``untyped_storage().nbytes()``), however
    many views of it or ops keep it. Storages of parameters and buffers are not
    activations and are left out of ``bytes`` (reported under ``excluded``).
    ``cuda_dropout=True`` (the default) makes training-time dropout keep a 1-byte
    bool mask, as on a GPU, instead of the CPU/meta fallback's mask in the
    activation dtype (see :func:`native_dropout`).

    Returns:
        bytes: total of the kept storages (activations, plus the token ids the
            model saves for its embedding backward, as costgraph counts them).
        bytes_by_kind: ``{"activation": n, "input": n}``; ``input`` is the storages
            of the tensors passed in (token ids, labels).
        storages: one dict per storage, in the order first saved: ``shape`` and
            ``dtype`` of the first tensor saved from it, ``bytes``, ``kind``,
            ``saved_by`` (names of the autograd nodes that keep it, e.g.
            ``MmBackward0``), ``produced_by`` (the grad_fn of the saved tensor, or
            None for a tensor that needs no grad), ``module`` (innermost module
            running when it was first saved) and ``saves`` (how many times it was
            packed).
        excluded: the same for parameter and buffer storages.
        by_module: ``{module: bytes}`` over ``storages``.
        seconds.
    """
    torch = _torch()

    t0 = time.perf_counter()
    param_keys = {storage_key(p) for p in model.parameters()}
    buffer_keys = {storage_key(x) for x in model.buffers()}
    inputs = make_inputs(model, b, s, labels=labels)
    input_keys = {storage_key(v) for v in inputs.values() if isinstance(v, torch.Tensor)}

    packed: list = []  # strong refs: storages stay alive, so their keys stay unique
    entries: dict[int, dict] = {}
    current_node: list[str] = []
    mods = _ModuleStack(model)

    def pack(t):
        key = storage_key(t)
        e = entries.get(key)
        if e is None:
            if key in param_keys:
                kind = "parameter"
            elif key in buffer_keys:
                kind = "buffer"
            elif key in input_keys:
                kind = "input"
            else:
                kind = "activation"
            gf = t.grad_fn
            e = entries[key] = {
                "shape": tuple(t.shape),
                "dtype": str(t.dtype).replace("torch.", ""),
                "bytes": _storage_nbytes(t),
                "kind": kind,
                "saved_by": [],
                "produced_by": type(gf).__name__ if gf is not None else None,
                "module": mods.current,
                "saves": 0,
            }
        e["saves"] += 1
        packed.append((key, t))
        return len(packed) - 1

    def unpack(i):
        key, t = packed[i]
        if current_node:
            names = entries[key]["saved_by"]
            if current_node[-1] not in names:
                names.append(current_node[-1])
        return t

    try:
        dropout = native_dropout() if cuda_dropout else contextlib.nullcontext()
        with torch.enable_grad(), meta_forward(), dropout, \
                torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            out = model(**inputs)
    finally:
        mods.remove()
    loss = _loss(out, labels)

    # Name the nodes that keep each storage: reading a node's saved tensors runs unpack.
    for node in _walk_graph([loss.grad_fn]):
        current_node.append(node.name())
        try:
            for attr in dir(node):
                if attr.startswith("_saved_"):
                    try:
                        getattr(node, attr)
                    except Exception:  # a saved scalar or an already freed buffer
                        pass
            if hasattr(node, "saved_tensors"):  # custom autograd.Function
                try:
                    node.saved_tensors
                except Exception:
                    pass
        finally:
            current_node.pop()

    kept = [e for e in entries.values() if e["kind"] in ("activation", "input")]
    excluded = [e for e in entries.values() if e["kind"] in ("parameter", "buffer")]
    by_kind: dict[str, int] = defaultdict(int)
    by_module: dict[str, int] = defaultdict(int)
    for e in kept:
        by_kind[e["kind"]] += e["bytes"]
        by_module[e["module"]] += e["bytes"]
    result = {
        "bytes": sum(e["bytes"] for e in kept),
        "bytes_by_kind": dict(by_kind),
        "storages": kept,
        "excluded": excluded,
        "by_module": dict(by_module),
        "seconds": time.perf_counter() - t0,
    }
    del out, loss
    packed.clear()
    return result


def layer_bytes(saved: dict, layer_prefix: str) -> int:
    """Bytes of the saved storages first kept inside modules under ``layer_prefix`` (e.g. ``"transformer.h.0"``)."""
    return sum(
        e["bytes"]
        for e in saved["storages"]
        if e["module"] == layer_prefix or e["module"].startswith(layer_prefix + ".")
    )


def summarize_storages(saved: dict) -> list[tuple]:
    """``(shape, dtype, bytes, saved_by, module)`` per kept storage, for printing a breakdown."""
    return [
        (e["shape"], e["dtype"], e["bytes"], ",".join(e["saved_by"]) or e["produced_by"], e["module"])
        for e in saved["storages"]
    ]


# --------------------------------------------------------------- a survey


def probe(model_type: str, config_dict: dict, b: int = 2, s: int = 32, **build_kwargs) -> dict:
    """Build, count parameters, FLOPs and saved bytes; each stage's result or its error, and timings."""
    res: dict = {"model_type": model_type}
    t0 = time.perf_counter()
    try:
        model = build_meta(model_type, config_dict, **build_kwargs)
    except Exception as exc:  # noqa: BLE001 - a survey records what fails
        res["build_error"] = f"{type(exc).__name__}: {exc}"
        return res
    res["class"] = type(model).__name__
    res["build_seconds"] = time.perf_counter() - t0
    res["params"] = param_count(model)
    try:
        res["flops"] = flops(model, b, s)
    except Exception as exc:  # noqa: BLE001
        res["flops_error"] = f"{type(exc).__name__}: {exc}"
    try:
        res["saved"] = saved_bytes(model, b, s)
    except Exception as exc:  # noqa: BLE001
        res["saved_error"] = f"{type(exc).__name__}: {exc}"
    res["seconds"] = time.perf_counter() - t0
    return res


def _tiny(h=64, layers=2, heads=4, kv_heads=2, vocab=128, inter=128, positions=512) -> dict:
    """Tiny configs, one per model type: hidden 64, 2 layers, 4 heads, vocab 128, intermediate 128."""
    llama_like = dict(
        hidden_size=h,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        vocab_size=vocab,
        intermediate_size=inter,
        max_position_embeddings=positions,
    )
    return {
        "gpt2": dict(n_embd=h, n_layer=layers, n_head=heads, vocab_size=vocab, n_positions=positions, n_inner=inter,
                     bos_token_id=0, eos_token_id=0),
        "llama": dict(llama_like),
        "mistral": dict(llama_like, sliding_window=8),
        "mixtral": dict(llama_like, num_local_experts=4, num_experts_per_tok=2, sliding_window=None),
        "qwen2": dict(llama_like),
        "qwen3": dict(llama_like, head_dim=h // heads),
        "qwen3_moe": dict(llama_like, head_dim=h // heads, num_experts=4, num_experts_per_tok=2,
                          moe_intermediate_size=inter // 2, decoder_sparse_step=1, mlp_only_layers=[]),
        "gemma": dict(llama_like, head_dim=h // heads),
        "gemma2": dict(llama_like, head_dim=h // heads, sliding_window=8, query_pre_attn_scalar=h // heads),
        "phi3": dict(llama_like, pad_token_id=0, bos_token_id=1, eos_token_id=2),
        "gpt_neox": dict(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads, vocab_size=vocab,
                         intermediate_size=inter, max_position_embeddings=positions),
        "falcon": dict(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads, num_kv_heads=kv_heads,
                       vocab_size=vocab, new_decoder_architecture=True, ffn_hidden_size=inter),
        "opt": dict(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads, vocab_size=vocab,
                    ffn_dim=inter, word_embed_proj_dim=h, max_position_embeddings=positions),
        "deepseek_v3": dict(hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
                            num_key_value_heads=heads, vocab_size=vocab, intermediate_size=inter,
                            moe_intermediate_size=inter // 2, n_routed_experts=4, num_experts_per_tok=2,
                            n_shared_experts=1, n_group=1, topk_group=1, first_k_dense_replace=1,
                            q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
                            v_head_dim=16, max_position_embeddings=positions, rope_scaling=None),
        "t5": dict(d_model=h, num_layers=layers, num_decoder_layers=layers, num_heads=heads, d_kv=h // heads,
                   d_ff=inter, vocab_size=vocab),
    }


TINY_CONFIGS = _tiny()

GPT2_SMALL = {"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}


def _fmt(n) -> str:
    return f"{n:,}" if isinstance(n, int) else str(n)


def _gpt2_small_report() -> None:
    """GPT-2 small at b = 1, s = 1024 against nanoGPT's and Korthikanti et al.'s closed forms."""
    t0 = time.perf_counter()
    b, s, h, a, l = 1, 1024, 768, 12, 12
    m = build_meta("gpt2", GPT2_SMALL)
    print(f"\n== GPT-2 small (b={b}, s={s}): params {_fmt(param_count(m))} (expected 124,439,808)")
    f = flops(m, b, s)
    print(f"  flops fwd {_fmt(f['forward'])} (nanoGPT matmul count 291,648,307,200)"
          f" bwd {_fmt(f['backward'])} fwd+bwd {_fmt(f['forward_backward'])} ({f['seconds']:.2f}s)")
    print(f"    fwd ops {f['forward_ops']}\n    bwd ops {f['backward_ops']}")
    # Korthikanti per layer, plus what costgraph keeps outside the layers (token/position ids,
    # embedding dropout mask, ln_f and head inputs); LayerNorm mean/rstd are not in it.
    ref = {True: l * (34 * b * s * h + 5 * b * s * s * a) + 5 * b * s * h + 8 * b * s + 8 * s,
           False: l * (32 * b * s * h + 2 * b * s * s * a) + 4 * b * s * h + 8 * b * s + 8 * s}
    ln_stats = (2 * l + 1) * 2 * 4 * b * s
    for act in ("gelu_new", "gelu_pytorch_tanh"):
        m = build_meta("gpt2", dict(GPT2_SMALL, activation_function=act))
        for train in (True, False):
            m.train(train)
            for cuda_dropout in ((True, False) if train else (True,)):
                sv = saved_bytes(m, b, s, cuda_dropout=cuda_dropout)
                print(f"  saved act={act} train={train} cuda_dropout={cuda_dropout}: {_fmt(sv['bytes'])} B;"
                      f" layer h.1 {_fmt(layer_bytes(sv, 'transformer.h.1'))} B;"
                      f" minus costgraph {_fmt(ref[train])} = {_fmt(sv['bytes'] - ref[train])}"
                      f" (LayerNorm mean+rstd {_fmt(ln_stats)}) ({sv['seconds']:.2f}s)")
    print(f"  GPT-2 small total {time.perf_counter() - t0:.2f}s")


def main(argv=None) -> int:
    """``python tests/torch_probe.py [model_type ...]``: the survey behind TORCH_NOTES.md."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("types", nargs="*", default=list(TINY_CONFIGS))
    ap.add_argument("-b", type=int, default=2)
    ap.add_argument("-s", type=int, default=32)
    ap.add_argument("--gpt2-small", action="store_true", help="also GPT-2 small at b=1, s=1024")
    ap.add_argument("--storages", action="store_true", help="print every saved storage")
    args = ap.parse_args(argv)

    import torch
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    t_all = time.perf_counter()
    for mt in args.types:
        r = probe(mt, TINY_CONFIGS[mt], args.b, args.s)
        print(f"\n== {mt}  ({r.get('class', '-')})")
        for k in ("build_error", "flops_error", "saved_error"):
            if k in r:
                print(f"  {k}: {r[k]}")
        if "params" in r:
            print(f"  params {_fmt(r['params'])}  build {r['build_seconds']:.2f}s  total {r['seconds']:.2f}s")
        if "flops" in r:
            f = r["flops"]
            print(f"  flops fwd {_fmt(f['forward'])} bwd {_fmt(f['backward'])} ({f['seconds']:.2f}s)")
            print(f"    fwd ops {f['forward_ops']}")
            print(f"    bwd ops {f['backward_ops']}")
        if "saved" in r:
            sv = r["saved"]
            print(f"  saved {_fmt(sv['bytes'])} B {sv['bytes_by_kind']} in {len(sv['storages'])} storages"
                  f" ({sv['seconds']:.2f}s); excluded {len(sv['excluded'])} param/buffer storages")
            dts = defaultdict(int)
            for e in sv["storages"]:
                dts[e["dtype"]] += e["bytes"]
            print(f"    by dtype {dict(dts)}")
            if args.storages:
                for row in summarize_storages(sv):
                    print("     ", row)
    if args.gpt2_small:
        _gpt2_small_report()
    print(f"\nall probes {time.perf_counter() - t_all:.2f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
