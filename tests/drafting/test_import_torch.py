"""``costgraph import`` (issue 28 item 1): a model file drafted from the transformers model, exact
against PyTorch; item 2: ``derive config.json`` of an unmapped family.

For each family a tiny config is drafted (:func:`costgraph.drafting.api.draft_model`: two probe configurations of
distinct primes, a traced meta forward each, std blocks recognised) and checked as tests/draft_checks.py says: at
both probes against ``sum(p.numel())`` and ``FlopCounterMode``, at the config against the PyTorch agreement tier;
where costgraph bundles the family (GPT-2 → models/gpt.cg, Llama → models/llama.cg) the draft's closed forms of
parameters and forward FLOPs are the bundled file's, symbol for symbol.

Families here (dense ones; mixtures of experts, state-space and linear-attention families are in
test_import_moe.py, test_import_ssm.py and test_import_linear_attention.py, one draft per family and file):
Llama (GQA, head_dim of its own), GPT-2 (fused Conv1D QKV, learned positions, tied head), Phi (parallel attention
and MLP on one LayerNorm, biases, a head with a bias), GPT-NeoX (fused QKV with rotary, parallel residual with two
norms), BERT (post-norm, the norms inside submodules; BertLMHeadModel's prediction head), RoBERTa-PreLayerNorm,
XLM-RoBERTa-XL and MegatronBERT (BERT's pre-norm forms), CTRL (its MLP a Sequential), GPT-NeoX-Japanese (a last layer of its own), ModernBERT's
decoder (its first layer's attention norm an Identity),
BitNet (an RMSNorm before each output projection: blocks the draft defines), OLMo 2 (norms after the
blocks, QK-norm over the whole projections: a block the draft defines), Whisper's decoder (WhisperForCausalLM: K's
projection without bias, the cross-attention it never calls as ``param``s), Granite SWA (attention sinks, a block
the draft defines), Persimmon (a LayerNorm on each head's q and k: a block the draft defines), NanoChat
(weightless norms, QK-norm included; its one norm called before and after the layers), GPT-Neo (global and
local attention layers in turn: ``attention_types`` cycled to each probe's layers, ``window_size`` read as ``W``),
Ministral's default config
(a head_dim it leaves None); sliding windows beyond the window (Mistral, Gemma 2). DiffLlama's differential
attention, Gemma 4's layer_types period and per-layer inputs and XLM's parallel lists: test_import_torch_forms.py.

Drafts are made once per process (:func:`draft_model` keeps them by config): the tests below that import, derive or
read Phi's config.json (``CASES["phi"]``) reuse the family's draft instead of tracing it again.

Item 2: a config.json of an unbundled family (Phi) read by ``from_hf_config``/``derive`` is drafted, checked, cached
by the config's hash and named as drafted; one whose draft is not exact (Dory: its attention is no std block) is
refused with what differs.

Pinned: torch 2.13.0, transformers 5.24.0. Skipped when either is not installed.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import costgraph  # noqa: E402
from costgraph import torch_measure  # noqa: E402
from costgraph.drafting.api import draft_model  # noqa: E402
from draft_checks import DENSE, TOK, Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

CASES = {
    "llama": dict(model_type="llama", **DENSE, num_key_value_heads=2, head_dim=32, intermediate_size=96, **TOK),
    "gpt2": dict(model_type="gpt2", n_embd=64, n_head=4, n_layer=2, vocab_size=128, n_positions=64,
                 bos_token_id=0, eos_token_id=1),
    "phi": dict(model_type="phi", **DENSE, intermediate_size=96, **TOK),
    "gpt_neox": dict(model_type="gpt_neox", **DENSE, intermediate_size=96, **TOK),
    "bert": dict(model_type="bert", **DENSE, intermediate_size=96, is_decoder=True, pad_token_id=0),
    # BERT's pre-norm forms (transformers 5.24 modeling_roberta_prelayernorm.py, modeling_xlm_roberta_xl.py): a
    # LayerNorm before each block (attention.LayerNorm and intermediate.LayerNorm; attention.self_attn_layer_norm
    # and the layer's LayerNorm), each output adding the residual
    "roberta-prelayernorm": dict(model_type="roberta-prelayernorm", **DENSE, intermediate_size=96, is_decoder=True,
                                 pad_token_id=0),
    "xlm-roberta-xl": dict(model_type="xlm-roberta-xl", **DENSE, intermediate_size=96, is_decoder=True,
                           pad_token_id=0),
    "megatron-bert": dict(model_type="megatron-bert", **DENSE, intermediate_size=96, is_decoder=True, pad_token_id=0),
    # CTRL (transformers 5.24 modeling_ctrl.py): Wq, Wk, Wv and dense; the MLP a Sequential(Linear, ReLU, Linear) of dff
    "ctrl": dict(model_type="ctrl", n_embd=64, n_head=4, n_layer=2, dff=96, vocab_size=128, n_positions=64),
    # GPT-NeoX-Japanese (transformers 5.24 modeling_gpt_neox_japanese.py): the last layer's attention holds the output's
    # bias (dense_bias [h], use_bias only there): a last layer of its own, named from the end
    "gpt_neox_japanese": dict(model_type="gpt_neox_japanese", **DENSE, **TOK),
    # ModernBERT's decoder (transformers 5.24 modeling_modernbert_decoder.py): Wo, a GeGLU MLP of one Wi (input and
    # gate), a global layer every 3rd among sliding ones (layer_types' period); its first layer's attention norm an
    # Identity: pre-norm all the same (x + attn(x), then x + mlp(mlp_norm(x)))
    "modernbert-decoder": dict(model_type="modernbert-decoder", **DENSE, intermediate_size=96, sliding_window=32,
                               **TOK),
    # BitNet (transformers 5.24 modeling_bitnet.py): an RMSNorm before o_proj (attn_sub_norm) and before down_proj
    # (ffn_sub_norm, after relu²(gate) · up)
    "bitnet": dict(model_type="bitnet", **DENSE, num_key_value_heads=2, intermediate_size=96, **TOK),
    "olmo2": dict(model_type="olmo2", **DENSE, num_key_value_heads=2, intermediate_size=96, **TOK),
    # the decoder alone (WhisperForCausalLM): K's projection without bias, learned positions of
    # max_target_positions, the cross-attention built but never called (parameters only)
    "whisper": dict(model_type="whisper", d_model=64, decoder_attention_heads=4, encoder_attention_heads=4,
                    decoder_ffn_dim=96, encoder_ffn_dim=96, decoder_layers=2, encoder_layers=2, vocab_size=128,
                    max_target_positions=64, max_source_positions=64, decoder_start_token_id=0, **TOK),
    # Granite SWA: a learned sink logit per head (sinks [a]), sliding and full attention layers (the window above
    # the s = 24 compared with eager attention, which computes every pair: see the window test below)
    "granite_swa": dict(model_type="granite_swa", **DENSE, num_key_value_heads=2, intermediate_size=96,
                        sliding_window=32, **TOK),
    # Persimmon: fused QKV with a LayerNorm on each head's q and k, partial rotary
    "persimmon": dict(model_type="persimmon", **DENSE, intermediate_size=96, **TOK),
    # GPT-Neo: global and local (a causal band of window_size keys) attention layers in turn, as attention_types
    # lists them (one kind per layer); GPTNeoAttention wraps the attention of q/k/v/out_proj; no rotary
    "gpt_neo": dict(model_type="gpt_neo", hidden_size=64, num_heads=4, num_layers=2, vocab_size=128,
                    max_position_embeddings=64, attention_types=[[["global", "local"], 1]], window_size=32, **TOK),
    # NanoChat: RMSNorms without weight (QK-norm too), relu2 MLP, the one norm called before and after the layers
    "nanochat": dict(model_type="nanochat", **DENSE, num_key_value_heads=2, intermediate_size=96, **TOK),
}
#: what each draft must say: the std blocks and structure recognised (the rest is checked by numbers)
EXPECTED = {
    "llama": "x = x + gqa_attention(rmsnorm(x, name = input_layernorm), a, kv, d, name = self_attn)",
    "gpt2": "x = x + attention(layernorm(x, name = ln_1), a, bias = true, name = attn)",
    "phi": "y1 = layernorm(x, name = input_layernorm)",
    "gpt_neox": "qkv_bias = true, out_bias = true, name = attention)\n        + mlp(layernorm(x, name = post_attention_layernorm)",
    "bert": "x = layernorm(x + dropout(gqa_attention(x, a, a, h / a, qkv_bias = true, out_bias = true, rotary = false",
    "roberta-prelayernorm": "x = x + dropout(gqa_attention(layernorm(x, name = attention_LayerNorm), a, a, h / a, "
                            "qkv_bias = true, out_bias = true, rotary = false, name = attention), name = attention_dropout)"
                            "\n    x = x + dropout(mlp(layernorm(x, name = intermediate_LayerNorm), i, bias = true",
    "xlm-roberta-xl": "name = attention), name = attention_dropout)\n    x = x + mlp(layernorm(x, name = LayerNorm), i, "
                      "bias = true",
    "megatron-bert": "x = x + dropout(gqa_attention(layernorm(x, name = attention_ln), a, a, h / a, qkv_bias = true, "
                     "out_bias = true, rotary = false, name = attention), name = attention_dropout)\n    x = x + "
                     "dropout(mlp(layernorm(x, name = ln), i, bias = true",
    "ctrl": "x = x + gqa_attention(layernorm(x, name = layernorm1), a, a, h / a, qkv_bias = true, out_bias = true, "
            "rotary = false, name = multi_head_attention)\n    x = x + relu_mlp(layernorm(x, name = layernorm2), i, "
            "bias = true, name = ffn)",
    "gpt_neox_japanese": "repeat 1 as layers_last {   # layers l - 1..l - 1\n    x = x + gqa_attention(layernorm(x, "
                         "name = input_layernorm), a, a, h / a, out_bias = true, name = attention)",
    "modernbert-decoder": "x = x + gqa_attention(x, a, a, h / a, name = attn_first0)\n      x = x + geglu(layernorm(x, "
                          "bias = false, name = mlp_norm_first0), i, name = mlp_first0)",
    "bitnet": "x = x + subnorm_attention(rmsnorm(x, name = input_layernorm), a, kv, h / a, name = self_attn)\n    "
              "x = x + subnorm_glu(rmsnorm(x, name = post_attention_layernorm), i, name = mlp)",
    "olmo2": "x = x + rmsnorm(proj_norm_attention(x, a, kv, h / a, name = self_attn), name = post_attention_layernorm)",
    "whisper": "gqa_attention(layernorm(x, name = self_attn_layer_norm), a, a, h / a, qkv_bias = true, k_bias = false, "
               "out_bias = true, rotary = false, name = self_attn)\n    x = x + mlp(layernorm(x, name = final_layer_norm), "
               "i, bias = true, dropout = false, name = mlp)\n    # built but never called by the forward (parameters "
               "only): encoder_attn, encoder_attn_layer_norm\n    param encoder_attn_k_proj_weight[h, h]",
    "granite_swa": "sink_attention(rmsnorm(x, name = input_layernorm), a, kv, h / a, window = W, name = self_attn)",
    "nanochat": "qk_norm = true, qk_norm_weight = false, name = self_attn)\n    x = x + linear(relu2(linear(rmsnorm(x, "
                "weight = false, name = post_attention_layernorm), i, bias = false, name = fc1)), h, bias = false, "
                "name = fc2)\n  }\n  x = rmsnorm(x, weight = false, name = model_norm)",
    "gpt_neo": "    if j % 2 == 1 {\n      x = x + gqa_attention(layernorm(x, name = ln_1_at1), a, a, h / a, out_bias = true, "
               "rotary = false, window = W, name = attention_at1)",
    "persimmon": "x = x + ln_qk_attention(layernorm(x, name = input_layernorm), a, h / a, name = self_attn)\n    x = x + "
                 "linear(relu2(linear(layernorm(x, name = post_attention_layernorm), i, bias = true, name = "
                 "dense_h_to_4h)), h, bias = true, name = dense_4h_to_h)",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)


def test_draft_probes_a_head_dim_the_config_leaves_none():
    """MinistralConfig's default ``head_dim`` is None, which its attention cannot build with (transformers 5.24
    modeling_ministral.py: ``self.head_dim**-0.5``): the probes set it to h / a, and the draft reads it so."""
    d = draft_model("ministral")
    assert d.exact, d.warnings
    assert "gqa_attention(rmsnorm(x, name = input_layernorm), a, kv, h / a, window = W, name = self_attn)" in d.text


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


def test_a_probe_the_config_refuses_is_named_as_the_probe():
    """Trial 9: XLNetConfig().to_json_file's config keeps d_head = 64 while the probes set d_model and n_head; its
    validator's refusal was worded as the user's config refused ("give a model_type ..., or a config.json")."""
    cfg = transformers.XLNetConfig().to_dict()
    refused = r"(?s)transformers refuses the probe configuration \(h=\d+, .*\) of model_type 'xlnet': .*d_head"
    with pytest.raises(costgraph.CostgraphValueError, match=refused) as e:
        draft_model(cfg)
    assert "costgraph import xlnet" in e.value.hint


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
    """Dory's attention (transformers 5.24 modeling_dory.py ``DoryAttention``: unit-norm queries and keys, ``sqk`` and
    ``s_gate`` of its own beside Q, K, V, O and the gate) is no std block: the draft has a TODO, so derive refuses and
    says what differs."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cfg = dict(model_type="dory", hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
               vocab_size=128, intermediate_size=96, **TOK)
    with pytest.raises(costgraph.CostgraphValueError) as e:
        costgraph.from_hf_config(cfg, source="p.json")
    msg = str(e.value)
    assert "model_type 'dory' is not bundled, and its draft (drafted from transformers" in msg
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


def test_drafts_kept_are_bounded_least_recently_used(monkeypatch):
    """A process keeps at most DRAFT_CACHE_SIZE drafts, the least recently used dropped first (the review of
    drafting/api.py: the dict grew with every config drafted); a kept one is not traced again."""
    from collections import OrderedDict

    from costgraph.drafting import api

    traced = []
    monkeypatch.setattr(api, "_draft", lambda torch, cfg, cls, name, check: traced.append(cfg["n"]) or cfg["n"])
    monkeypatch.setattr(api, "_DRAFTED", OrderedDict())
    monkeypatch.setattr(api, "DRAFT_CACHE_SIZE", 2)
    assert [draft_model({"model_type": "llama", "n": n}) for n in (1, 2, 1, 3, 1, 2)] == [1, 2, 1, 3, 1, 2]
    assert traced == [1, 2, 3, 2]     # 1 used again before 3 came: 2 was dropped, then 3
    assert len(api._DRAFTED) == 2


def test_no_weights_built_refuses_only_in_the_drafting_thread():
    """A module built with CPU weights during the traced forward is refused, in that thread only: torch's
    parameter-registration hook, not a patched Module.register_parameter (the review: not thread-safe); meta
    weights pass, and the hook is gone on exit."""
    import threading

    from costgraph.drafting.api import _no_weights_built

    entered, built, other = threading.Event(), threading.Event(), []

    def elsewhere():
        entered.wait(10)
        other.append(torch.nn.Linear(2, 3).weight.device.type)   # another thread, meanwhile: untouched
        built.set()

    t = threading.Thread(target=elsewhere)
    t.start()
    with _no_weights_built(torch):
        entered.set()
        built.wait(10)
        with torch.device("meta"):
            torch.nn.Linear(2, 3)
        with pytest.raises(RuntimeError, match=r"builds Linear.weight with weights on cpu"):
            torch.nn.Linear(2, 3)
    t.join(10)
    assert other == ["cpu"]
    assert torch.nn.Linear(2, 3).weight.device.type == "cpu"   # the hook removed on exit


def test_meta_forward_answers_only_in_its_own_thread():
    """``torch_meta.meta_forward`` answers transformers' data-dependent mask branches (``find_packed_sequence_indices``
    on meta position ids: None) only in the thread inside it: another thread meanwhile runs transformers' own function
    (on meta ids it raises, as outside any context); two threads' contexts interleaved (the first leaves while the
    second is still inside) keep the second's answers, and the last exit restores transformers' functions."""
    import threading

    from transformers import masking_utils, modeling_utils

    from costgraph.torch_meta import meta_forward

    originals = (masking_utils.find_packed_sequence_indices, masking_utils._ignore_bidirectional_mask_sdpa,
                 modeling_utils.PreTrainedModel.warn_if_padding_and_no_attention_mask)
    ids = torch.arange(5, device="meta")[None]
    first_in, second_in, first_out, seen = threading.Event(), threading.Event(), threading.Event(), {}

    def ask(key):
        try:
            seen[key] = masking_utils.find_packed_sequence_indices(ids)
        except RuntimeError as e:
            seen[key] = type(e).__name__

    def outside():
        first_in.wait(10)
        ask("outside")

    def second():
        first_in.wait(10)
        with meta_forward():
            second_in.set()
            first_out.wait(10)
            ask("second after the first left")

    threads = [threading.Thread(target=outside), threading.Thread(target=second)]
    for t in threads:
        t.start()
    with meta_forward():
        first_in.set()
        second_in.wait(10)
        ask("first")
    first_out.set()
    for t in threads:
        t.join(10)
    assert seen == {"first": None, "outside": "RuntimeError", "second after the first left": None}
    assert (masking_utils.find_packed_sequence_indices, masking_utils._ignore_bidirectional_mask_sdpa,
            modeling_utils.PreTrainedModel.warn_if_padding_and_no_attention_mask) == originals
