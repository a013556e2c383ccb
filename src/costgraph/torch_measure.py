"""What PyTorch measures on a Hugging Face model, for ``costgraph verify``
(:mod:`costgraph.verify`) and the PyTorch agreement tier.

Builds the Hugging Face ``transformers`` model of a ``config.json`` on the
*meta* device (no weights are allocated or downloaded, no arithmetic is done:
shapes, dtypes and the autograd graph only) and compares, at a few small
``(b, s)``, what costgraph compares with:

* parameters: ``sum(p.numel() for p in model.parameters())``;
* forward and backward FLOPs counted by ``torch.utils.flop_counter.
  FlopCounterMode`` (matrix products; costgraph's ``matmul`` convention), with
  ``aten._grouped_mm`` (MoE experts in transformers 5) counted by
  :data:`GROUPED_MM_FLOPS`;
* the KV cache: bytes of the ``DynamicCache`` tensors after a prefill of
  ``s`` tokens;
* bytes autograd saves for backward (``saved_tensors_hooks``, each storage
  once; bf16, eager attention, train mode, 1-byte dropout masks as on a GPU)
  against ``activation_bytes`` of the ``pytorch`` profile.

Needs the ``torch`` extra (``pip install -e '.[torch]'``: torch 2.13.0,
transformers 5.24.0); this module imports without it and says how to install
it when it is first needed. ``tests/torch_probe.py`` (the PyTorch agreement
tier) and :mod:`costgraph.verify` use the measuring functions here.

    model = build_meta("gpt2", {"n_embd": 768, "n_layer": 12, "n_head": 12,
                                "vocab_size": 50257, "n_positions": 1024})
    param_count(model)           # 124_439_808
    flops(model, 1, 1024)        # {"forward": 291_648_307_200, ...}
    saved_bytes(model, 1, 1024)  # {"bytes": ..., "storages": [...], ...}  (costgraph.torch_saved)

What the probes do that a plain ``model(input_ids)`` would not:

* No ``attention_mask`` is passed (full-length sequences), and the forward runs
  inside :func:`meta_forward`: with no mask transformers 5 scans ``position_ids``
  for packed sequences with a data-dependent ``(...).all()``, which raises
  ``Tensor.item() cannot be called on meta tensors``; on meta that scan returns
  None, its answer for ``arange`` positions.
* ``use_cache=False``: a training-style forward, no KV cache.
* :func:`costgraph.torch_saved.saved_bytes` (the bytes saved for backward, in its own module)
  runs training-time dropout as ``native_dropout`` (1-byte
  bool mask, what CUDA runs) instead of the CPU/meta fallback that keeps the
  mask in bf16; see :func:`native_dropout`.
"""
from __future__ import annotations

import time

from .errors import CostgraphValueError
from .torch_meta import meta_forward  # noqa: F401  (re-exported: the meta forward of every measurement)

TORCH_VERSION = "2.13.0"
TRANSFORMERS_VERSION = "5.24.0"
INSTALL_COMMAND = f"pip install torch=={TORCH_VERSION} transformers=={TRANSFORMERS_VERSION}"

#: model types built with a seq2seq class rather than ...ForCausalLM
SEQ2SEQ_TYPES = frozenset({"t5", "mt5", "umt5", "bart", "mbart", "pegasus"})


class TorchMissing(CostgraphValueError):
    """``costgraph verify`` without the ``torch`` extra."""


def require():
    """Import torch and transformers, or raise :class:`TorchMissing` saying how to install them."""
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        raise TorchMissing(
            f"costgraph verify needs PyTorch and Hugging Face transformers ({e.name or 'torch'} is not installed)",
            hint="install the torch extra: pip install -e '.[torch]' (from a checkout; or "
                 f"{INSTALL_COMMAND})") from None
    return torch


def _torch():
    return require()


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


# ------------------------------------------------------ encoder-only models

#: model types with no causal-LM class: built as AutoModel's class (BertModel for bert)
ENCODER_TYPES = frozenset({"bert", "vit", "dinov2"})
#: image encoders: their input is ``pixel_values`` [b, c, H, W] (:func:`costgraph.torch_vision.build_vision`)
VISION_TYPES = frozenset({"vit", "dinov2"})
#: image-text pairs: ``input_ids`` [b, s] and ``pixel_values`` (:func:`costgraph.torch_vision.build_pair`)
PAIR_TYPES = frozenset({"clip", "siglip"})
#: speech encoder-decoders: a spectrogram into the encoder (:func:`costgraph.torch_speech.build_speech`)
SPEECH_TYPES = frozenset({"whisper"})


def build_model(model_type: str, config_dict: dict, **build_kwargs):
    """:func:`build_meta`, except for :data:`ENCODER_TYPES`: the class ``AutoModel`` builds
    (BertModel with its pooler), on meta, bf16, eager attention, train mode, wrapped so that
    the probes' forward returns its output as ``logits``: the pooled output (the last hidden
    state without a pooler), from whose sum backward starts. The wrapper adds no parameters
    and no operations; its class name starts with the family's."""
    if model_type in PAIR_TYPES:
        from .torch_vision import build_pair

        return build_pair(_torch(), model_type, config_dict, **build_kwargs)
    if model_type in SPEECH_TYPES:
        from .torch_speech import build_speech

        return build_speech(_torch(), model_type, config_dict, **build_kwargs)
    if model_type not in ENCODER_TYPES:
        return build_meta(model_type, config_dict, **build_kwargs)
    if model_type in VISION_TYPES:
        from .torch_vision import build_vision

        return build_vision(_torch(), model_type, config_dict, **build_kwargs)
    from types import SimpleNamespace

    torch = _torch()
    from transformers import AutoConfig, AutoModel

    train = build_kwargs.pop("train", True)
    config = AutoConfig.for_model(model_type, **dict(config_dict))
    with torch.device("meta"):
        inner = AutoModel.from_config(config, attn_implementation=build_kwargs.get("attn_implementation", "eager"),
                                      dtype=getattr(torch, build_kwargs.get("dtype", "bfloat16")))

    class BertModelOutputAsLogits(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.config = model.config

        def forward(self, input_ids, use_cache=False, **kwargs):
            out = self.model(input_ids=input_ids)
            pooled = getattr(out, "pooler_output", None)
            return SimpleNamespace(logits=out.last_hidden_state if pooled is None else pooled)

    model = BertModelOutputAsLogits(inner)
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
    """Keyword arguments for one training-style forward of ``[b, s]`` token ids, on meta
    (an image encoder, :mod:`costgraph.torch_vision`: ``pixel_values`` of ``b`` images, ``s`` unused).

    For encoder-decoders the decoder also gets ``[b, s]`` ids. ``labels=True``
    adds ``labels`` so the model computes its own loss (cross-entropy, which
    upcasts the logits to float32 in transformers).
    """
    torch = _torch()
    pair = getattr(model, "inputs_for", None)
    if pair is not None:    # an image-text pair (torch_vision.build_pair): [b, s] ids and b images
        return pair(torch, b, s)
    image = getattr(model, "image_shape", None)
    if image is not None:   # an image encoder (torch_vision): b images; s is fixed by the image size
        dtype = next(model.parameters()).dtype
        return {"pixel_values": torch.zeros((b, *image), dtype=dtype, device="meta")}
    ids = torch.zeros((b, s), dtype=torch.long, device="meta")
    # No attention_mask: every sequence is full length, as in pre-training. A 2-D padding
    # mask would send mask creation through data-dependent `padding_mask.all()` checks.
    kw = {"input_ids": ids, "use_cache": False}
    if _is_seq2seq(model):
        kw["decoder_input_ids"] = torch.zeros((b, s), dtype=torch.long, device="meta")
    if labels:
        kw["labels"] = torch.zeros((b, s), dtype=torch.long, device="meta")
    return kw


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


def flop_counter(count_grouped_mm: bool = True):
    """A fresh ``torch.utils.flop_counter.FlopCounterMode`` (no display) as every measurement here uses it:
    matmul FLOPs, 2 per multiply-add, PyTorch's own per-op formulas; with ``count_grouped_mm`` it also
    counts ``aten._grouped_mm`` (MoE experts: :func:`grouped_mm_flops_mapping`), which PyTorch leaves out."""
    from torch.utils.flop_counter import FlopCounterMode

    return FlopCounterMode(display=False, custom_mapping=grouped_mm_flops_mapping() if count_grouped_mm else None)


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
    t0 = time.perf_counter()
    inputs = make_inputs(model, b, s, labels=labels)
    fwd, bwd = flop_counter(count_grouped_mm), flop_counter(count_grouped_mm)
    with torch.enable_grad(), meta_forward():
        with fwd:
            out = model(**inputs)
        loss = _loss(out, labels)
        with bwd:
            loss.backward()
    model.zero_grad(set_to_none=True)
    return flop_result(fwd, bwd, time.perf_counter() - t0)


def flop_result(fwd, bwd, seconds: float) -> dict:
    """:func:`flops`'s dict from the forward's and the backward's FlopCounterMode."""
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
        "seconds": seconds,
    }


# ------------------------------------------------------------- KV cache


def kv_cache_bytes(model, b: int, s: int) -> int:
    """Bytes of the ``DynamicCache`` keys, values (and DeepSeek-V3.2's indexer_keys) after a [b, s] prefill."""
    torch = _torch()
    from transformers import DynamicCache

    was_training = model.training
    model.train(False)   # inference mode (nn.Module.eval): no dropout; nothing is evaluated as code
    try:
        cache = DynamicCache(config=model.config)
        ids = torch.zeros((b, s), dtype=torch.long, device="meta")
        import warnings

        with torch.no_grad(), meta_forward(), warnings.catch_warnings():
            warnings.simplefilter("ignore")   # the past_key_values keyword's deprecation notice
            model(input_ids=ids, past_key_values=cache, use_cache=True)
    finally:
        model.train(was_training)
    total = 0
    for layer in cache.layers:
        for t in (getattr(layer, n, None) for n in ("keys", "values", "indexer_keys")):
            if t is not None and hasattr(t, "numel"):
                total += t.numel() * t.element_size()
    return int(total)
