"""``costgraph import`` (issue 28 item 1): a model file drafted from the transformers model, exact
against PyTorch.

For each family a tiny config is drafted (:func:`costgraph.drafting.api.draft_model`: two probe
configurations of distinct primes, a traced meta forward each, std blocks recognised) and

(a) at both probes the draft's parameters equal ``sum(p.numel())`` of the transformers model and its
    forward FLOPs (``matmul`` convention) equal ``torch.utils.flop_counter.FlopCounterMode``'s, and
    the second probe drafts the same text (``Draft.exact``);
(b) at the config's own sizes (the file's ``config imported``) the draft's parameters and forward
    FLOPs equal the PyTorch agreement tier's (:mod:`costgraph.torch_measure`: ``param_count``,
    ``flops(...)["forward"]``, experts by ``grouped_mm``, as ``costgraph verify`` measures);
(c) where costgraph bundles the family (GPT-2 → models/gpt.cg, Llama → models/llama.cg) the draft's
    closed forms of parameters and forward FLOPs are the bundled file's, symbol for symbol.

Families: Llama (GQA, head_dim of its own), GPT-2 (fused Conv1D QKV, learned positions, tied head),
Mixtral and Qwen3-MoE (mixture of experts; Qwen3's QK-norm), and three families costgraph does not
bundle: Phi (parallel attention and MLP on one LayerNorm, biases, a head with a bias), GPT-NeoX
(fused QKV with rotary, parallel residual with two norms) and BERT (post-norm, the norms inside
submodules; BertLMHeadModel's prediction head); OLMo 2 (norms after the blocks, QK-norm over the
whole projections: a block the draft defines); RecurrentGemma (Griffin's recurrent block with the RG-LRU, a
block the draft defines; block_types folded into ``repeat l as layers[j]`` with ``j % 3`` conditions; the MLP
of intermediate_size // 2); Mamba and FalconMamba (the mixer as models/mamba.cg's, FalconMamba's weightless
norms on Δ, B and C); DeepSeek-V3 (std mla, a dense first layer, shared_moe with the router's buffer); Qwen2-MoE (a shared
expert scaled by sigmoid(shared_expert_gate(x)): a block the draft defines); Whisper's decoder
(WhisperForCausalLM: K's projection without bias, the cross-attention it never calls as ``param``s); Mamba-2,
Falcon-H1 and Granite 4 hybrid (the Mamba-2 mixer with the SSD scan's chunked torch path, a block the draft
defines; Falcon-H1's parallel Mamba and attention on one norm; Granite's shared MLP of ``input_linear``); Jamba
(attention and experts every 2nd layer: a period fold); Qwen3-Next (Gated DeltaNet and gated attention, blocks
the draft defines, the delta rule's chunks of 64 checked beyond one chunk); Granite SWA (attention sinks, a block
the draft defines); Ministral's default config (a head_dim it leaves None).

Item 2: a config.json of an unbundled family (Phi) read by ``from_hf_config``/``derive`` is drafted,
checked, cached by the config's hash and named as drafted; one whose draft is not exact (Doge:
its attention is no std block) is refused with what differs.

Pinned: torch 2.13.0, transformers 5.24.0. Skipped when either is not installed.
"""

from __future__ import annotations

import functools
import json
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import costgraph  # noqa: E402
from costgraph import torch_measure  # noqa: E402
from costgraph.drafting.api import draft_model  # noqa: E402

TOK = dict(bos_token_id=0, eos_token_id=1, pad_token_id=2)
DENSE = dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, vocab_size=128, max_position_embeddings=64)
CASES = {
    "llama": dict(model_type="llama", **DENSE, num_key_value_heads=2, head_dim=32, intermediate_size=96, **TOK),
    "gpt2": dict(model_type="gpt2", n_embd=64, n_head=4, n_layer=2, vocab_size=128, n_positions=64,
                 bos_token_id=0, eos_token_id=1),
    "mixtral": dict(model_type="mixtral", **DENSE, num_key_value_heads=2, intermediate_size=96,
                    num_local_experts=4, num_experts_per_tok=2, **TOK),
    "qwen3_moe": dict(model_type="qwen3_moe", **DENSE, num_key_value_heads=2, head_dim=16, intermediate_size=96,
                      moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2, **TOK),
    "phi": dict(model_type="phi", **DENSE, intermediate_size=96, **TOK),
    "gpt_neox": dict(model_type="gpt_neox", **DENSE, intermediate_size=96, **TOK),
    "bert": dict(model_type="bert", **DENSE, intermediate_size=96, is_decoder=True, pad_token_id=0),
    "olmo2": dict(model_type="olmo2", **DENSE, num_key_value_heads=2, intermediate_size=96, **TOK),
    # multi-head latent attention, one dense layer then shared + routed experts (e_score_correction_bias a buffer)
    "deepseek_v3": dict(model_type="deepseek_v3", hidden_size=64, num_attention_heads=4, num_key_value_heads=4,
                        q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8,
                        n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, intermediate_size=96,
                        first_k_dense_replace=1, num_hidden_layers=3, n_group=1, topk_group=1, vocab_size=128,
                        max_position_embeddings=64, **TOK),
    # routed experts and a shared expert scaled by sigmoid(shared_expert_gate(x))
    "qwen2_moe": dict(model_type="qwen2_moe", **DENSE, num_key_value_heads=2, intermediate_size=96,
                      moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=4,
                      num_experts_per_tok=2, **TOK),
    # the decoder alone (WhisperForCausalLM): K's projection without bias, learned positions of
    # max_target_positions, the cross-attention built but never called (parameters only)
    "whisper": dict(model_type="whisper", d_model=64, decoder_attention_heads=4, encoder_attention_heads=4,
                    decoder_ffn_dim=96, encoder_ffn_dim=96, decoder_layers=2, encoder_layers=2, vocab_size=128,
                    max_target_positions=64, max_source_positions=64, decoder_start_token_id=0, **TOK),
    # Mamba's mixer; FalconMamba's with weightless RMSNorms on Δ, B and C
    "mamba": dict(model_type="mamba", hidden_size=64, state_size=8, num_hidden_layers=2, vocab_size=128, expand=2,
                  conv_kernel=4, time_step_rank=8, **TOK),
    "falcon_mamba": dict(model_type="falcon_mamba", hidden_size=64, state_size=8, num_hidden_layers=2, vocab_size=128,
                         expand=2, conv_kernel=4, time_step_rank=8, **TOK),
    # 5 layers of block_types (recurrent, recurrent, attention) repeated: 4 recurrent blocks, 1 attention
    "recurrent_gemma": dict(model_type="recurrent_gemma", hidden_size=64, num_attention_heads=4, num_key_value_heads=1,
                            head_dim=16, lru_width=48, conv1d_width=4, num_hidden_layers=5, intermediate_size=96,
                            vocab_size=128, **TOK),
    # Mamba-2 mixers (transformers' Mamba2Mixer and the hybrids' copies): the SSD scan's chunked torch path is what
    # FlopCounterMode counts, chunk 8 below s = 24 (three chunks); groups of B and C dividing the heads
    "mamba2": dict(model_type="mamba2", hidden_size=64, num_heads=8, head_dim=16, expand=2, n_groups=2, state_size=8,
                   conv_kernel=4, chunk_size=8, num_hidden_layers=2, vocab_size=128, **TOK),
    # Falcon-H1: Mamba-2 (d_ssm of its own, no norm) and attention in parallel on one norm, µP multipliers
    "falcon_h1": dict(model_type="falcon_h1", **DENSE, num_key_value_heads=2, intermediate_size=96, mamba_d_ssm=64,
                      mamba_n_heads=8, mamba_d_head=8, mamba_n_groups=1, mamba_d_state=8, mamba_d_conv=4,
                      mamba_chunk_size=8, **TOK),
    # Granite 4 hybrid: Mamba-2 layers and attention by layer_types, experts plus a shared MLP (input_linear of 2·i_s)
    "granitemoehybrid": dict(model_type="granitemoehybrid", **DENSE, num_key_value_heads=2, intermediate_size=32,
                             shared_intermediate_size=48, num_local_experts=4, num_experts_per_tok=2, mamba_n_heads=8,
                             mamba_n_groups=1, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=8,
                             layer_types=["mamba", "mamba"], **TOK),
    # Jamba: attention every 2nd layer from 1 and experts every 2nd from 0 of 4 (a period the probe's 17 layers fold)
    "jamba": dict(model_type="jamba", **DENSE, num_key_value_heads=2, intermediate_size=96, num_experts=4,
                  num_experts_per_tok=2, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                  expert_layer_offset=0, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=8,
                  use_mamba_kernels=False, **TOK),
    # Granite SWA: a learned sink logit per head (sinks [a]), sliding and full attention layers (the window above
    # the s = 24 compared with eager attention, which computes every pair: see the window test below)
    "granite_swa": dict(model_type="granite_swa", **DENSE, num_key_value_heads=2, intermediate_size=96,
                        sliding_window=32, **TOK),
    # Qwen3-Next: Gated DeltaNet (chunks of 64) and gated attention every 4th layer, Qwen2-MoE's experts
    "qwen3_next": dict(model_type="qwen3_next", **{**DENSE, "num_hidden_layers": 4}, num_key_value_heads=2,
                       head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                       linear_value_head_dim=8, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=32, shared_expert_intermediate_size=48, intermediate_size=96, **TOK),
    # Nemotron-H: the config's fixed list of layer kinds (hybrid_override_pattern: Mamba-2, MoE, attention, MLP,
    # MoE) folded with index lists; squared-ReLU experts without gate behind a sigmoid router plus a shared expert
    "nemotron_h": dict(model_type="nemotron_h", hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                       head_dim=16, intermediate_size=96, n_routed_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=32, moe_shared_expert_intermediate_size=48, mamba_num_heads=8,
                       mamba_head_dim=16, n_groups=2, ssm_state_size=8, conv_kernel=4, chunk_size=8,
                       hybrid_override_pattern="ME*-E", vocab_size=128, max_position_embeddings=64, **TOK),
    # MiniMax: lightning attention (blocks of 8 below s = 24: the blockwise form FlopCounterMode counts) in every
    # other layer, softmax attention in the rest, Mixtral's experts
    "minimax": dict(model_type="minimax", **{**DENSE, "num_hidden_layers": 4}, num_key_value_heads=2, head_dim=16,
                    intermediate_size=32, num_local_experts=4, num_experts_per_tok=2, block_size=8, **TOK),
    # Phi-MoE: sparsemixer routes every token to two experts whatever num_experts_per_tok (3 here: torch runs 2)
    "phimoe": dict(model_type="phimoe", **DENSE, num_key_value_heads=2, intermediate_size=32, num_local_experts=4,
                   num_experts_per_tok=3, **TOK),
    # Persimmon: fused QKV with a LayerNorm on each head's q and k, partial rotary
    "persimmon": dict(model_type="persimmon", **DENSE, intermediate_size=96, **TOK),
    # Kimi Linear: Kimi Delta Attention (chunks of 64) and NoPE MLA every 4th layer after a first dense layer
    # (a prefix, then a period), DeepSeek-V3's experts behind a sigmoid router with its correction bias
    "kimi_linear": dict(model_type="kimi_linear", **{**DENSE, "num_hidden_layers": 5}, num_key_value_heads=4,
                        kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8, linear_num_heads=2,
                        linear_head_dim=8, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
                        moe_intermediate_size=16, intermediate_size=96, **TOK),
}
#: what each draft must say: the std blocks and structure recognised (the rest is checked by numbers)
EXPECTED = {
    "llama": "x = x + gqa_attention(rmsnorm(x, name = input_layernorm), a, kv, d, name = self_attn)",
    "gpt2": "x = x + attention(layernorm(x, name = ln_1), a, bias = true, name = attn)",
    "mixtral": "x = x + moe(rmsnorm(x, name = post_attention_layernorm), E, k, i, name = mlp)",
    "qwen3_moe": "x = x + moe(rmsnorm(x, name = post_attention_layernorm), E, k, m, name = mlp)",
    "phi": "y1 = layernorm(x, name = input_layernorm)",
    "gpt_neox": "qkv_bias = true, out_bias = true, name = attention)\n        + mlp(layernorm(x, name = post_attention_layernorm)",
    "bert": "x = layernorm(x + dropout(gqa_attention(x, a, a, h / a, qkv_bias = true, out_bias = true, rotary = false",
    "olmo2": "x = x + rmsnorm(proj_norm_attention(x, a, kv, h / a, name = self_attn), name = post_attention_layernorm)",
    "deepseek_v3": "x = x + mla(rmsnorm(x, name = input_layernorm), a, r_q, r_kv, d_n, d_r, d_v, name = self_attn)",
    "qwen2_moe": "x = x + gated_shared_moe(rmsnorm(x, name = post_attention_layernorm), E, k, m, i_s, name = mlp)",
    "whisper": "gqa_attention(layernorm(x, name = self_attn_layer_norm), a, a, h / a, qkv_bias = true, k_bias = false, "
               "out_bias = true, rotary = false, name = self_attn)\n    x = x + mlp(layernorm(x, name = final_layer_norm), "
               "i, bias = true, dropout = false, name = mlp)\n    # built but never called by the forward (parameters "
               "only): encoder_attn, encoder_attn_layer_norm\n    param encoder_attn_k_proj_weight[h, h]",
    "mamba": "x = x + mamba_mixer(rmsnorm(x, name = norm), i, N, R, K, name = mixer)",
    "falcon_mamba": "x = x + mamba_mixer(rmsnorm(x, name = norm), i, N, R, K, inner_norms = true, norm_weight = false, "
                    "name = mixer)",
    "recurrent_gemma": "  if j % 3 == 2 {\n      x = x + gqa_attention(rmsnorm(x, name = temporal_pre_norm_at2), a, kv, d, "
                       "out_bias = true, window = W, name = temporal_block_at2)\n      x = x + geglu(rmsnorm(x, name = "
                       "channel_pre_norm_at2), floor(i / 2), bias = true, name = mlp_block_at2)\n    } else {\n"
                       "      x = x + griffin_recurrent(rmsnorm(x, name = temporal_pre_norm), w, a, K, name = temporal_block)",
    "mamba2": "x = x + mamba2_mixer(rmsnorm(x, name = norm), h * e, hm, ng, N, K, chunk = C, name = mixer)",
    "falcon_h1": "y1 = rmsnorm(x, name = input_layernorm)\n    x = x\n        + mamba2_mixer(y1, di, hm, ng, N, K, chunk = C, "
                 "norm = false, name = mamba)\n        + gqa_attention(y1, a, kv, h / a, name = self_attn)",
    "granitemoehybrid": "x = x + moe(y1, E, k, i, name = block_sparse_moe) + swiglu(y1, i_s, name = shared_mlp)",
    "jamba": "repeat l as layers[j] {   # layer j drafted as layer j % 2: a pattern of period 2\n    if j % 2 == 1 {\n"
             "      x = x + gqa_attention(rmsnorm(x, name = input_layernorm_at1), a, kv, h / a, rotary = false, "
             "name = self_attn_at1)",
    "granite_swa": "sink_attention(rmsnorm(x, name = input_layernorm), a, kv, h / a, window = W, name = self_attn)",
    "nemotron_h": "repeat 5 as layers[j] {   # the config's list of 5 layers\n    if j in [3] {\n      x = x + "
                  "relu2_mlp(rmsnorm(x, name = norm_at3), i, name = mixer_at3)\n    } else {\n      if j in [2] {\n"
                  "        x = x + gqa_attention(rmsnorm(x, name = norm_at2), a, kv, d, rotary = false, name = mixer_at2)"
                  "\n      } else {\n        if j in [0] {\n          x = x + mamba2_mixer(rmsnorm(x, name = norm_at0), "
                  "hm * dm, hm, ng, N, K, chunk = C, name = mixer_at0)\n        } else {\n          x = x + relu2_moe("
                  "rmsnorm(x, name = norm), E, k, m, i_s, name = mixer)",
    "minimax": "x = x + lightning(rmsnorm(x, name = input_layernorm_at1), a, d, block = Cl, name = self_attn_at1)",
    "phimoe": "x = x + moe(layernorm(x, name = post_attention_layernorm), E, 2, i, name = mlp)",
    "persimmon": "x = x + ln_qk_attention(layernorm(x, name = input_layernorm), a, h / a, name = self_attn)",
    "kimi_linear": "    if j in [0] {\n      x = x + kda(rmsnorm(x, name = input_layernorm_first0), hl, dl, K, chunk = 64, "
                   "name = self_attn_first0)\n      x = x + swiglu(rmsnorm(x, name = post_attention_layernorm_first0), i, "
                   "name = mlp_first0)\n    } else {\n      if j % 4 == 0 {\n        x = x + mla_nope(rmsnorm(x, name = "
                   "input_layernorm_at0), a, r_kv, d_n, d_r, d_v, name = self_attn_at0)",
    "qwen3_next": "x = x + gated_deltanet(rmsnorm(x, name = input_layernorm), hk, hv, dk, dv, K, chunk = 64, "
                  "name = linear_attn)",
}
POINTS = [(2, 24)]     # the probes compare at two more (b, s)


@functools.lru_cache(maxsize=None)
def drafted(family: str):
    return draft_model(CASES[family])


@pytest.mark.parametrize("family", sorted(CASES))
def test_draft_exact_at_both_probes(family):
    d = drafted(family)
    assert d.todos == [] and d.confirmed, d.warnings
    assert len(d.checks) == 2
    for c in d.checks:
        assert (c.params_draft, c.forward_flops_draft) == (c.params_torch, c.forward_flops_torch), c
    assert EXPECTED[family] in d.text
    assert d.exact


@pytest.mark.parametrize("family", sorted(CASES))
def test_draft_agrees_with_the_torch_tier_at_the_config(family):
    d = drafted(family)
    cfg = {k: v for k, v in CASES[family].items() if k != "model_type"}
    tm = torch_measure.build_meta(family, cfg, train=False)
    m = costgraph.loads(d.text, path=f"<{family}>", config="imported")
    for b, s in POINTS:
        values = {str(k): int(v) for k, v in m.values("imported", b=b, s=s).items()}
        got = m.costs("model", convention="matmul").evaluate(None, values)
        assert int(got["params"]) == torch_measure.param_count(tm)
        assert int(got["flops_forward"]) == torch_measure.flops(tm, b, s)["forward"]


def test_draft_probes_a_head_dim_the_config_leaves_none():
    """MinistralConfig's default ``head_dim`` is None, which its attention cannot build with (transformers 5.24
    modeling_ministral.py: ``self.head_dim**-0.5``): the probes set it to h / a, and the draft reads it so."""
    d = draft_model("ministral")
    assert d.exact, d.warnings
    assert "gqa_attention(rmsnorm(x, name = input_layernorm), a, kv, h / a, window = W, name = self_attn)" in d.text


def test_qwen3_next_draft_counts_the_chunks_beyond_one():
    """At s = 70 the gated delta rule's torch path runs two chunks of 64 (the sequence padded to 128): the draft's
    forward FLOPs still equal FlopCounterMode's."""
    d = drafted("qwen3_next")
    cfg = {k: v for k, v in CASES["qwen3_next"].items() if k != "model_type"}
    tm = torch_measure.build_meta("qwen3_next", cfg, train=False)
    m = costgraph.loads(d.text, path="<qwen3_next>", config="imported")
    values = {str(k): int(v) for k, v in m.values("imported", b=1, s=70).items()}
    got = m.costs("model", convention="matmul").evaluate(None, values)
    assert int(got["flops_forward"]) == torch_measure.flops(tm, 1, 70)["forward"]


@pytest.mark.parametrize("family, bundled", [("gpt2", "gpt"), ("llama", "llama")])
def test_draft_closed_forms_are_the_bundled_files(family, bundled):
    """GPT-2's draft is models/gpt.cg's costs and Llama's models/llama.cg's, as closed forms."""
    d = costgraph.loads(drafted(family).text, path=f"<{family}>").costs("model", convention="matmul")
    b = costgraph.load(bundled).costs("model", convention="matmul")
    for q in ("params", "flops_forward", "flops_backward", "kv_cache_bytes"):
        assert (d[q] - b[q]).expand() == 0, q


def test_config_mapping_names_the_json_keys():
    """GPT-2's config.json says n_embd, n_head, n_layer, n_positions: the draft maps those keys."""
    d = drafted("gpt2")
    assert d.mapping == {"h": "n_embd", "a": "n_head", "l": "n_layer", "V": "vocab_size", "s_max": "n_positions"}
    assert d.values == {"h": 64, "a": 4, "l": 2, "V": 128, "s_max": 64}
    assert "config imported { h = 64, a = 4, l = 2, V = 128, s_max = 64, s = 64, b = 1 }" in d.text
    assert json.loads(json.dumps(d.to_dict()))["exact"] is True


def _cli(capsys, *args):
    """``costgraph ARGS`` in this process (torch is imported once for the file): (status, stdout, stderr)."""
    from costgraph.cli import main

    status = main(list(args))
    out = capsys.readouterr()
    return SimpleNamespace(returncode=status, stdout=out.out, stderr=out.err)


def test_cli_writes_a_file_derive_reads(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CASES["phi"]))
    out = tmp_path / "phi.cg"
    r = _cli(capsys, "import", str(cfg), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"wrote {out}: model phi drafted from transformers PhiForCausalLM")
    assert "parameters exact" in r.stdout and "second probe: the same file" in r.stdout
    d = _cli(capsys, "derive", str(out), "--config", "imported", "--format", "json")
    assert d.returncode == 0, d.stderr
    tm = torch_measure.build_meta("phi", {k: v for k, v in CASES["phi"].items() if k != "model_type"})
    assert json.loads(d.stdout)["quantities"]["params"]["value"] == torch_measure.param_count(tm)


def test_cli_refuses_an_unknown_model_type(capsys):
    r = _cli(capsys, "import", "no_such_model_type")
    assert r.returncode == 2
    assert "transformers cannot build a config of model_type 'no_such_model_type'" in r.stderr
    assert "Traceback" not in r.stderr


# ------------------------------------------------ issue 28 item 2: derive config.json of an unmapped family


def test_unmapped_config_is_drafted_checked_and_cached(tmp_path, monkeypatch):
    """Phi is no bundled family: from_hf_config drafts it, checks it, and caches the draft by the config's hash."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cfg = dict(CASES["phi"])
    hf = costgraph.from_hf_config(cfg, source="phi.json")
    assert hf.origin == f"drafted from transformers {transformers.__version__} `PhiForCausalLM`"
    assert hf.values == {"h": 64, "a": 4, "kv": 4, "i": 96, "l": 2, "V": 128, "s": 64, "b": 1}
    tm = torch_measure.build_meta("phi", {k: v for k, v in cfg.items() if k != "model_type"})
    got = hf.model.costs("model", convention="matmul").evaluate(None, {**hf.values, "b": 2, "s": 24})
    assert int(got["params"]) == torch_measure.param_count(tm)
    assert int(got["flops_forward"]) == torch_measure.flops(tm, 2, 24)["forward"]
    cached = list((tmp_path / "costgraph" / "drafts").glob("*.json"))
    assert len(cached) == 1
    again = costgraph.from_hf_config(cfg, source="phi.json")     # from the cache
    assert again.model.costs("model")["params"] == hf.model.costs("model")["params"]


def test_unmapped_config_whose_draft_is_not_exact_is_refused(tmp_path, monkeypatch):
    """Doge's attention (dynamic mask attention: A and dt_proj of its own beside Q, K, V, O) is no std block: the
    draft has a TODO, so derive refuses and says what differs."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cfg = dict(model_type="doge", hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
               vocab_size=128, intermediate_size=96, **TOK)
    with pytest.raises(costgraph.CostgraphValueError) as e:
        costgraph.from_hf_config(cfg, source="p.json")
    msg = str(e.value)
    assert "model_type 'doge' is not bundled, and its draft (drafted from transformers" in msg
    assert "not exact: not recognised: model.layers.0.self_attn" in msg and "parameters at probe 1: torch" in msg
    assert not (tmp_path / "costgraph" / "drafts").exists() or not list((tmp_path / "costgraph" / "drafts").iterdir())


def test_derive_names_the_draft(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CASES["phi"]))
    r = _cli(capsys, "derive", str(cfg))
    assert r.returncode == 0, r.stderr
    assert f"model_type phi → model 'phi', drafted from transformers {transformers.__version__} `PhiForCausalLM`" \
        in r.stdout


def test_recurrent_gemma_draft_keeps_the_recurrent_state_per_sequence():
    """transformers 5.24 ``RecurrentGemmaRecurrentBlock._setup_cache``: the RG-LRU's ``recurrent_states``
    ``[b, lru_width]`` in fp32 per recurrent block (with the convolution's state), whatever s; the
    attention blocks' K and V per token (MQA: kv = 1)."""
    d = drafted("recurrent_gemma")
    m = costgraph.loads(d.text, path="<recurrent_gemma>", config="imported")
    c = m.costs("model")
    one, long = (c.evaluate("imported", b=2, s=s) for s in (16, 1024))
    recurrent, attention = 4, 1                      # of 5 layers, j % 3 == 2 (layer 2) is attention
    state = long["kv_cache_bytes"] - long["kv_cache_bytes_per_token"] * 2 * 1024
    assert state == one["kv_cache_bytes"] - one["kv_cache_bytes_per_token"] * 2 * 16
    assert state == recurrent * 2 * (48 * 4 + 48 * 4 * 2)      # fp32 [b, w] and the conv's [b, w, K] in bf16
    assert long["kv_cache_bytes_per_token"] == attention * 2 * 16 * 1 * 2


#: sliding windows (issue 28's item 3): tiny Mistral (every layer windowed, the window its config's) and Gemma 2
#: (layer_types alternate sliding and full attention), window 8 below the s = 24 of the check
WINDOWED = {
    "mistral": dict(model_type="mistral", **DENSE, num_key_value_heads=2, intermediate_size=96, sliding_window=8,
                    **TOK),
    "gemma2": dict(model_type="gemma2", **DENSE, num_key_value_heads=2, head_dim=16, intermediate_size=96,
                   sliding_window=8, **TOK),
}


@pytest.mark.parametrize("family, sliding, head_dim", [("mistral", 2, 16), ("gemma2", 1, 16)])
def test_draft_window_reaches_the_cache_and_the_flops(family, sliding, head_dim):
    """Beyond the window (s = 24 > w = 8) the draft's attention is banded and its cache windowed.

    transformers 5.24 ``DynamicSlidingWindowLayer.update`` (cache_utils.py): "Only cache the last
    ``self.sliding_window - 1`` tokens" after a prefill; costgraph's ``cache(window = w)`` keeps ``Min(s, w)``, the w
    keys the next token attends (the new one appended): one token more per sliding layer. Eager attention computes
    every (query, key) pair and masks those beyond the window: FlopCounterMode counts ``s²`` pairs per head where the
    draft's banded products count ``s·w`` (two products, QKᵀ and scores·V, of ``2·b·a·d`` FLOPs per pair)."""
    d = draft_model(WINDOWED[family])
    assert d.exact and "window = W" in d.text and d.mapping["W"] == "sliding_window"
    cfg = {k: v for k, v in WINDOWED[family].items() if k != "model_type"}
    tm = torch_measure.build_meta(family, cfg, train=False)
    m = costgraph.loads(d.text, path=f"<{family}>", config="imported")
    b, s, w, kv, a = 2, 24, 8, 2, 4
    values = {str(k): int(v) for k, v in m.values("imported", b=b, s=s).items()}
    got = m.costs("model", convention="matmul").evaluate(None, values)
    per_token = b * 2 * kv * head_dim * 2                       # K and V, bf16, per sliding layer
    assert int(got["kv_cache_bytes"]) - torch_measure.kv_cache_bytes(tm, b, s) == sliding * per_token
    masked = sliding * 2 * 2 * b * a * head_dim * s * (s - w)
    assert torch_measure.flops(tm, b, s)["forward"] - int(got["flops_forward"]) == masked


def _state_bytes(model, b: int, s: int) -> int:
    """Bytes of the recurrent layers' ``conv_states`` and ``recurrent_states`` of transformers' ``DynamicCache``
    after a ``[b, s]`` prefill on meta (cache_utils.py ``LinearAttentionLayer``)."""
    from transformers import DynamicCache

    model.train(False)
    cache = DynamicCache(config=model.config)
    with torch.no_grad(), torch_measure.meta_forward():
        model(input_ids=torch.zeros((b, s), dtype=torch.long, device="meta"), cache=cache, use_cache=True)
    return sum(t.numel() * t.element_size() for layer in cache.layers
               for states in (getattr(layer, "conv_states", {}), getattr(layer, "recurrent_states", {}))
               for t in (states or {}).values() if t is not None)


@pytest.mark.parametrize("family", ["mamba", "mamba2"])
def test_draft_recurrent_state_is_what_transformers_keeps(family):
    """Mamba's and Mamba-2's decode state as transformers 5.24 keeps it, per layer: the convolution's last
    ``conv_kernel`` inputs per channel, ``[b, C, K]`` bf16 (``update_conv_state`` keeps "the last
    ``conv_kernel_size`` tokens": K, not K − 1), and the scan's state in fp32 (``[b, D, N]``; Mamba-2
    ``[b, H, P, N]``): the draft's cache bytes, whatever s."""
    d = drafted(family)
    cfg = {k: v for k, v in CASES[family].items() if k != "model_type"}
    tm = torch_measure.build_meta(family, cfg, train=False)
    m = costgraph.loads(d.text, path=f"<{family}>", config="imported")
    for s in (5, 24):
        got = m.costs("model").evaluate("imported", b=2, s=s)
        assert got["kv_cache_bytes_per_token"] == 0
        assert int(got["kv_cache_bytes"]) == _state_bytes(tm, 2, s)
