"""Measurement probes (the functions live in ``costgraph/verify.py``): what PyTorch + Hugging Face ``transformers`` count.

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
    flops_and_saved_bytes(model, 1, 1024)  # (flops(...), saved_bytes(...)) from one forward and backward

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

import time
from collections import defaultdict

# The measuring functions are the package's (costgraph.torch_measure); this module keeps the survey.
from costgraph.torch_measure import (  # noqa: F401
    TORCH_VERSION,
    TRANSFORMERS_VERSION,
    INSTALL_COMMAND,
    SEQ2SEQ_TYPES,
    ENCODER_TYPES,
    build_meta,
    build_model,
    param_count,
    make_inputs,
    meta_forward,
    native_dropout,
    grouped_mm_flops_mapping,
    GROUPED_MM_FLOPS,
    flops,
    kv_cache_bytes,
)
from costgraph.torch_saved import (  # noqa: E402,F401  (re-exported for the tier's tests)
    storage_key,
    saved_bytes,
    flops_and_saved_bytes,
    layer_bytes,
    summarize_storages,
)

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
        "olmo2": dict(llama_like),
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
