"""Hugging Face config.json import: the bundled real configs (examples/hf/,
provenance in SOURCES.md) and the errors for bad ones."""

import json
from pathlib import Path

import pytest

import costgraph
from costgraph.language.hf_config import supported_model_types
from costgraph.cli import main
from costgraph.errors import CostgraphValueError

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"

# Published totals of these checkpoints (model cards; issue 3 table).
KNOWN = {
    "gpt2.json": (124_439_808, 124_439_808),
    "llama-2-7b.json": (6_738_415_616, 6_738_415_616),
    "llama-2-70b.json": (68_976_648_192, 68_976_648_192),
    "llama-3-8b.json": (8_030_261_248, 8_030_261_248),
    "llama-3.1-8b.json": (8_030_261_248, 8_030_261_248),   # Llama 3.1 8B: Llama 3 8B's shapes (Meta's model card)
    "mistral-7b.json": (7_241_732_096, 7_241_732_096),
    "mixtral-8x7b.json": (46_702_792_704, 12_879_925_248),
    "qwen2-7b.json": (7_615_616_512, 7_615_616_512),
    "qwen3-8b.json": (8_190_735_360, 8_190_735_360),
    "qwen3-30b-a3b.json": (30_532_122_624, 3_353_032_704),
    "gemma-2b.json": (2_506_172_416, 2_506_172_416),
    "gemma-2-9b.json": (9_241_705_984, 9_241_705_984),
    "phi-3-mini-4k-instruct.json": (3_821_079_552, 3_821_079_552),
    "pythia-1b.json": (1_011_781_632, 1_011_781_632),
    "deepseek-v3.json": (671_026_404_352, 37_552_282_624),   # transformers' count: the 14,848 router buffers apart
    "t5-small.json": (60_506_624, 60_506_624),
    # transformers 5.24 on the meta device (sum of numel; tests/models/test_hf_families_b.py)
    "gemma-3-1b-it.json": (999_885_952, 999_885_952),
    "qwen2-57b-a14b.json": (57_408_658_944, 14_249_270_784),
    # transformers 5.24 on meta (tests/models/test_hf_families_c.py); active: all but the E − k idle experts
    "gpt-oss-120b.json": (116_829_156_672, 5_711_982_912),
    # transformers 5.24 on meta (tests/models/test_hf_families_a.py; bert: BertModel with its pooler, AutoModel's class)
    "starcoder2-3b.json": (3_030_371_328, 3_030_371_328),
    "nemotron-4-mini-hindi-4b-instruct.json": (4_190_509_056, 4_190_509_056),
    "command-r-08-2024.json": (32_296_476_672, 32_296_476_672),
    "bert-base-uncased.json": (109_482_240, 109_482_240),
    # transformers 5.24 on meta (sum of numel); the same number is the released checkpoint's
    # model.safetensors.index.json "total_size" 54_864_793_600 bytes / 4 (float32), in the
    # repository the config was copied from (examples/hf/SOURCES.md)
    "olmo-2-1124-13b.json": (13_716_198_400, 13_716_198_400),
    # transformers 5.24 on meta (sum of numel; tests/models/test_mamba.py MAMBA_2_8B)
    "mamba-2.8b-hf.json": (2_768_345_600, 2_768_345_600),
    # issue 19's 2025–26 text families: transformers 5.24 on meta, sum of numel, the sigmoid routers'
    # e_score_correction_bias buffers not parameters, as transformers counts (tests/models/test_families_2025_torch.py);
    # active: all but the E − k idle experts
    "olmo3-defaults.json": (6_888_624_128, 6_888_624_128),
    "gemma4-text-defaults.json": (5_077_177_856, 5_077_177_856),   # = transformers on meta (tests/models/test_gemma4.py)
    "seed_oss-defaults.json": (28_921_040_896, 28_921_040_896),
    "glm-4.5-air.json": (106_852_245_504, 13_424_123_904),
    "ernie4_5_moe-defaults.json": (21_825_437_888, 3_352_150_208),
    "minimax_m2-defaults.json": (228_689_748_992, 11_030_537_216),
    # issue 19 (ALiBi, NoPE): transformers 5.24 on meta (sum of numel; `costgraph verify --hf` and
    # tests/models/test_torch_released*.py at full size). Not released copies: built from the config classes'
    # defaults with the published sizes (examples/hf/SOURCES.md). BLOOM-560M's 559,214,592 and
    # BLOOM-7B1's 7,069,016,064 are the model cards' counts too.
    "bloom-560m.json": (559_214_592, 559_214_592),
    "bloom-7b1.json": (7_069_016_064, 7_069_016_064),
    "mpt-7b.json": (6_649_286_656, 6_649_286_656),
    "smollm3-3b.json": (3_075_098_624, 3_075_098_624),
    # transformers 5.24 on meta (sum of numel; ViTForImageClassification, tests/models/test_vit.py)
    "vit-base-patch16-224.json": (86_567_656, 86_567_656),
    # transformers 5.24 on meta (sum of numel; `costgraph verify`, tests/models/test_hybrids_torch.py); the total
    # and active counts quoted for Qwen3-Coder-Next, the same architecture and sizes (examples/hf/SOURCES.md)
    "qwen3-next-80b-a3b-instruct.json": (79_674_391_296, 3_874_929_408),
    # FalconH1Config's defaults (no released config.json at hand); transformers 5.24 on meta (sum of numel)
    "falcon-h1-config-defaults.json": (8_514_961_408, 8_514_961_408),
    # GraniteMoeHybridConfig's defaults + a written layer_types; transformers 5.24 on meta (sum of numel)
    "granitemoehybrid-config-defaults.json": (38_311_240_704, 12_340_110_336),
    # transformers 5.24 on meta (sum of numel; CLIPModel, tests/models/test_clip_siglip.py)
    "clip-vit-base-patch32.json": (151_277_313, 151_277_313),
    # transformers 5.24 on meta (sum of numel; SiglipModel, tests/models/test_clip_siglip.py)
    "siglip-base-patch16-224.json": (203_155_970, 203_155_970),
    # transformers 5.24 on meta (sum of numel; LlavaForConditionalGeneration, tests/models/test_llava.py)
    "llava-1.5-7b-hf.json": (7_063_427_072, 7_063_427_072),
    # diffusers 0.42.1 on meta (sum of numel; DiTTransformer2DModel, SD3Transformer2DModel; tests/models/test_dit.py)
    "dit-xl-2-256.json": (749_826_464, 749_826_464),
    "sd3-medium.json": (2_028_328_000, 2_028_328_000),
    # transformers 5.24 on meta (sum of numel; MllamaForConditionalGeneration of MllamaConfig()'s defaults,
    # Gemma3ForConditionalGeneration of gemma-3-4b-it; tests/models/test_mllama_gemma3mm.py)
    "mllama-config-defaults.json": (10_642_941_475, 10_642_941_475),
    "gemma-3-4b-it.json": (4_300_079_472, 4_300_079_472),
    # transformers 5.24 on meta (sum of numel, the routers' e_score_correction_bias buffers apart;
    # tests/models/test_attn_variants.py): DeepSeek-V3's counts plus 61 lightning indexers of 13,959,424
    "deepseek-v3.2.json": (671_877_929_216, 38_403_807_488),
    # transformers 5.24 on meta (sum of numel, the routers' e_score_correction_bias buffers apart;
    # tests/models/test_attn_variants.py); "48B total, 3B active" on the model card
    "kimi-linear-48b-a3b-instruct.json": (49_122_675_072, 3_484_453_248),
    # transformers 5.24 on meta (sum of numel; tests/models/test_attn_variants.py); "456B total" in MiniMax-01's
    # report (its 45.9B active leave out the embedding and the output head, 2·200064·6144)
    "minimax-text-01.json": (456_089_655_296, 48_403_306_496),
}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_bundled_config_derives_published_counts(name):
    m = costgraph.load_hf_config(str(HF / name))
    v = m.costs().evaluate(**m.values)
    assert (v["params"], v["params_active"]) == KNOWN[name]
    # an encoder (bert) keeps no KV cache; Mamba keeps a fixed-size state (no bytes per token)
    assert v["flops_forward"] > 0 and (v["kv_cache_bytes_per_token"] > 0 or not m.model.graph.caches
                                       or (m.model_type == "mamba" and v["kv_cache_bytes"] > 0))


def test_every_bundled_config_is_covered():
    assert sorted(p.name for p in HF.glob("*.json")) == sorted(KNOWN)


def test_mixtral_config_without_window_is_not_windowed():
    # its released config has "sliding_window": null
    m = costgraph.load_hf_config(str(HF / "mixtral-8x7b.json"))
    assert m.model.graph.options["sliding_window"] is False and "w" not in m.values


def test_from_dict_and_head_dim_default():
    cfg = json.loads((HF / "llama-2-7b.json").read_text())
    m = costgraph.from_hf_config(cfg)
    assert m.values["d"] == 4096 // 32     # no head_dim key: h / a


def test_a_per_layer_key_of_other_digits_is_no_layer_number():
    # Gemma 4's per_layer_config is keyed by layer numbers ("05"); a key '²' ('²'.isdigit() is true, int('²') fails)
    # was an internal error (issue 30): a key is a layer number only in the ASCII digits 0-9, else not that layer's
    cfg = json.loads((HF / "gemma4-text-defaults.json").read_text())
    cfg["per_layer_config"] = {"²": {"head_dim": 4}, "０５": {"head_dim": 4}, "05": {"head_dim": 256}}
    m = costgraph.from_hf_config(cfg, source="g4.json")
    assert m.values["dg"] == 256


def test_unknown_model_type_lists_supported():
    # a model_type neither bundled nor known to transformers (an unbundled one that transformers knows, such as
    # roberta, is drafted from transformers with the torch extra: tests/drafting/test_import_torch.py, issue 28)
    with pytest.raises(costgraph.CostgraphValueError) as e:
        costgraph.from_hf_config({"model_type": "no_such_family"}, source="cfg.json")
    assert "unsupported model_type 'no_such_family'" in str(e.value)
    for t in ("llama", "mixtral", "t5"):
        assert t in str(e.value)
    assert set(supported_model_types()) >= {"gpt2", "llama", "mistral", "mixtral", "qwen2", "qwen3",
                                           "qwen3_moe", "gemma", "gemma2", "phi3", "gpt_neox",
                                           "falcon", "opt", "deepseek_v3", "t5"}


def test_missing_and_ill_typed_keys_are_named_with_the_file():
    cfg = json.loads((HF / "llama-2-7b.json").read_text())
    del cfg["hidden_size"]
    with pytest.raises(costgraph.CostgraphValueError, match=r"my\.json: missing key 'hidden_size'"):
        costgraph.from_hf_config(cfg, source="my.json")
    # trial 9: a key written null (DeepseekV2Config()'s num_experts_per_tok) is not "missing"
    cfg = json.loads((HF / "llama-2-7b.json").read_text())
    cfg["hidden_size"] = None
    with pytest.raises(costgraph.CostgraphValueError, match=r"my\.json: key 'hidden_size' is null: the config leaves "
                                                             r"it unset") as e:
        costgraph.from_hf_config(cfg, source="my.json")
    assert "write the released model's value" in e.value.hint
    cfg = json.loads((HF / "llama-2-7b.json").read_text())
    cfg["num_hidden_layers"] = "32"
    with pytest.raises(costgraph.CostgraphValueError, match=r"my\.json: key 'num_hidden_layers' must be a positive whole number, got '32'"):
        costgraph.from_hf_config(cfg, source="my.json")


def test_heads_that_do_not_divide_the_width_name_both_keys():
    # trial6: 30 heads on a 4096-wide llama said "d: 4096 is not divisible by 30" without a hint or the keys
    cfg = json.loads((HF / "llama-2-7b.json").read_text())
    cfg["num_attention_heads"] = 30
    with pytest.raises(costgraph.CostgraphValueError) as e:
        costgraph.from_hf_config(cfg, source="my.json")
    assert e.value.message == "my.json: d: hidden_size = 4096 is not divisible by num_attention_heads = 30"
    assert e.value.hint


def test_a_glm4_moe_config_whose_heads_do_not_divide_hints_at_import(tmp_path, capsys):
    """Session 42 trial: transformers' own Glm4MoeConfig (no head_dim, 4096 wide, 96 heads) builds a model
    (transformers 5.24 modeling_glm4_moe.py Glm4MoeAttention: head_dim = hidden_size // num_attention_heads), which
    the bundled model file cannot read; derive's hint now names the command that drafts it from that PyTorch code
    (costgraph import: floor(h / a), tests/drafting/test_import_derived_sizes.py)."""
    cfg = json.loads((HF / "glm-4.5-air.json").read_text())
    del cfg["head_dim"]   # GLM-4.5-Air: hidden_size 4096, 96 heads, head_dim 128 given
    path = tmp_path / "glm.json"
    path.write_text(json.dumps(cfg, indent=2))
    assert main(["derive", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    line = path.read_text().splitlines().index('  "hidden_size": 4096,') + 1   # at the quotient's first key
    assert err[0] == f"{path}:{line}:3: error: d: hidden_size = 4096 is not divisible by num_attention_heads = 96"
    assert err[-1].startswith("hint: the bundled model file reads a whole quotient") and \
        f"costgraph import {path} -o model.cg drafts this model from its PyTorch code" in err[-1]
    with pytest.raises(costgraph.CostgraphValueError) as e:   # a dict: no file to name
        costgraph.from_hf_config(cfg)
    assert "costgraph import CONFIG.json -o model.cg" in e.value.hint


def test_unsupported_variant_is_an_error():
    cfg = json.loads((HF / "t5-small.json").read_text())
    cfg["feed_forward_proj"] = "gated-gelu"
    with pytest.raises(costgraph.CostgraphValueError, match="feed_forward_proj"):
        costgraph.from_hf_config(cfg, source="t5.json")


def test_cli_on_config_json_prints_units(cg, tmp_path):
    r = cg("derive", str(HF / "mixtral-8x7b.json"))
    assert r.returncode == 0, r.stderr
    assert "46,702,792,704 (46.70 G)" in r.stdout and "12,879,925,248 (12.88 G)" in r.stdout
    assert "KV cache bytes" in r.stdout
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama",\n "hidden_size": }')
    r = cg("derive", str(bad))
    assert r.returncode == 2 and f"{bad}:2:17" in r.stderr and "Traceback" not in r.stderr


def test_dropout_follows_the_config_rates():
    # dropout is on when any of the config's dropout rates is above 0 (GPT-2: 0.1; T5: dropout_rate 0.1),
    # off when they are 0 or absent (LLaMA-3: attention_dropout 0.0); dropout=True/False forces it
    from costgraph.language.hf_config import dropout_in

    gpt2 = json.loads((HF / "gpt2.json").read_text())
    llama = json.loads((HF / "llama-3-8b.json").read_text())
    assert dropout_in(gpt2) and not dropout_in(llama)
    assert not dropout_in(dict(gpt2, attn_pdrop=0.0, embd_pdrop=0.0, resid_pdrop=0.0, summary_first_dropout=0.0))
    assert dropout_in(dict(llama, attention_dropout=0.1))
    on = costgraph.from_hf_config(gpt2, profile="pytorch")
    off = costgraph.from_hf_config(gpt2, profile="pytorch", dropout=False)
    assert on.model.settings.dropout and not off.model.settings.dropout
    v = {**on.values, "b": 1, "s": 1024}
    # GPT-2 small at b = 1, s = 1024, pytorch profile: what PyTorch keeps in train mode (masks and the
    # attention dropout's output) and in eval mode, with gelu_pytorch_tanh (tests/TORCH_NOTES.md)
    assert on.costs().evaluate(**v)["activation_bytes"] == 1_079_992_320
    assert off.costs().evaluate(**v)["activation_bytes"] == 607_346_688
    forced = costgraph.from_hf_config(llama, dropout=True)
    assert forced.model.settings.dropout


def test_cli_derive_no_dropout_on_a_config_json(cg):
    base = ["derive", str(HF / "gpt2.json"), "--format", "json", "--no-breakdown", "--set", "s=128"]
    runs = [cg(*base, *extra) for extra in ([], ["--no-dropout"])]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    on, off = (json.loads(r.stdout) for r in runs)
    assert on != off


# DeepSeek-V2-Lite's sizes (no released config.json of DeepSeek-V2 was found for examples/hf/):
# "q_lora_rank": null means a full-rank q_proj, no longer refused as a missing key
DEEPSEEK_V2_LITE = {"model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944,
                    "num_hidden_layers": 27, "num_attention_heads": 16, "num_key_value_heads": 16,
                    "vocab_size": 102400, "max_position_embeddings": 163840, "tie_word_embeddings": False,
                    "q_lora_rank": None, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                    "v_head_dim": 128, "n_routed_experts": 64, "num_experts_per_tok": 6, "n_shared_experts": 2,
                    "moe_intermediate_size": 1408, "first_k_dense_replace": 1}


def test_deepseek_v2_lite_without_query_compression():
    m = costgraph.from_hf_config(DEEPSEEK_V2_LITE)
    assert m.model.graph.options["q_lora"] is False and "r_q" not in m.values
    v = m.costs().evaluate(**m.values)
    assert v["params"] == 15_706_484_224            # = DeepseekV2ForCausalLM's parameter count (transformers 5.24)
    # MLA caches the latent and the shared rotary key: (512 + 64) bf16 per token per layer
    assert v["kv_cache_bytes_per_token"] == 27 * (512 + 64) * 2
    q = costgraph.from_hf_config(dict(DEEPSEEK_V2_LITE, q_lora_rank=1536))
    assert q.model.graph.options["q_lora"] is True and q.values["r_q"] == 1536


# --- issue 30 item 1: a config.json that is a symbolic link ------------------------------------------------

def _hub_snapshot(root: Path, config: dict, planted=None) -> Path:
    """A Hub cache entry as huggingface_hub writes it (docs "Understand caching": snapshot files are
    relative links into ``blobs/``), plus a second snapshot whose config.json links to ``planted``."""
    import hashlib
    import os

    entry = root / "hub" / "models--meta-llama--Llama-3-8B"
    (entry / "blobs").mkdir(parents=True)
    data = json.dumps(config).encode()
    blob = hashlib.sha256(data).hexdigest()
    (entry / "blobs" / blob).write_bytes(data)
    for commit, target in (("a" * 40, os.path.join("..", "..", "blobs", blob)), ("b" * 40, planted)):
        if target is not None:
            (entry / "snapshots" / commit).mkdir(parents=True)
            os.symlink(target, entry / "snapshots" / commit / "config.json")
    return entry / "snapshots"


@pytest.mark.parametrize("target", ["/etc/passwd", "/proc/self/environ", "json"])
def test_snapshot_links_lead_only_into_the_cache_blobs(tmp_path, capsys, monkeypatch, target):
    """A snapshot's config.json linked to /etc/passwd or /proc/self/environ printed about 100
    characters of it in the "invalid JSON" error; a link to a JSON file echoed its values. A
    snapshot link may only lead into the cache entry's blobs/ (huggingface_hub's layout); anything
    else is refused unread."""
    from costgraph.cli import main
    from costgraph.errors import CostgraphValueError

    monkeypatch.setenv("MYSECRET", "hunter2-do-not-print")
    if target == "json":
        target = tmp_path / "secret.json"
        target.write_text('{"model_type": "hunter2-do-not-print"}')
    config = json.loads((HF / "llama-3-8b.json").read_text())
    snaps = _hub_snapshot(tmp_path, config, target)
    for source in (snaps / ("b" * 40), snaps / ("b" * 40) / "config.json"):
        assert main(["derive", str(source)]) == 2
        err = capsys.readouterr().err
        assert "leads out of the cache's" in err and "blobs" in err, err
        assert "hunter2" not in err and "root:" not in err
        with pytest.raises(CostgraphValueError, match="symbolic link"):
            costgraph.load(str(source))
    # the cache's own links still read (Llama 3 8B: 8,030,261,248 parameters, its model card)
    assert costgraph.load(str(snaps / ("a" * 40))).costs().evaluate("hf")["params"] == 8_030_261_248


def test_a_model_folder_link_may_not_leave_the_folder(tmp_path, capsys, monkeypatch):
    """Outside a Hub cache a config.json link leading out of its folder is refused; one inside it is
    read; a file holding NUL bytes (JSON holds none) is refused without a quote."""
    import os

    from costgraph.cli import main

    monkeypatch.setenv("MYSECRET", "hunter2-do-not-print")
    (tmp_path / "m").mkdir()
    os.symlink("/proc/self/environ", tmp_path / "m" / "config.json")
    assert main(["derive", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "leads out of its folder" in err and "hunter2" not in err
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "real.json").write_text((HF / "llama-3-8b.json").read_text())
    os.symlink("real.json", tmp_path / "ok" / "config.json")
    assert costgraph.load(str(tmp_path / "ok")).costs().evaluate("hf")["params"] == 8_030_261_248
    (tmp_path / "nul.json").write_bytes(b'{"model_type": "hunter2-do-not-print\x00"}')
    assert main(["derive", str(tmp_path / "nul.json")]) == 2
    err = capsys.readouterr().err
    assert "NUL" in err and "hunter2" not in err


def test_quoted_config_values_are_cut_and_cleaned(tmp_path, capsys):
    """A config's string values repeated in a message are cut (60 characters) and their control
    characters replaced (issue 30 item 1): a 500-character model_type with an escape sequence."""
    from costgraph.cli import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "A" * 500 + "\x1b[31mred"}))
    assert main(["derive", str(path)]) == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert "unsupported model_type '" + "A" * 58 + "…" in first and "\x1b" not in first, first


# --- rotary_pct above 1; duplicate keys warned with the value used (issue 18) ----------------------------------------

PYTHIA = {"model_type": "gpt_neox", "hidden_size": 768, "num_attention_heads": 12, "rotary_pct": 0.25,
          "intermediate_size": 3072, "num_hidden_layers": 12, "vocab_size": 50304,
          "max_position_embeddings": 2048, "use_parallel_residual": True}


def _cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_rotary_pct_above_one_in_config_json(tmp_path, capsys):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**PYTHIA, "rotary_pct": 2.0}))
    code, out, err = _cli(capsys, "derive", str(p))
    assert code == 2 and "Traceback" not in err
    col = p.read_text().index('"rotary_pct"') + 1   # the key's JSON position (hf_json.key_offset)
    assert f"{p}:1:{col}: error: key 'rotary_pct' is the fraction of each head that is rotated, at most 1, got 2.0" in err
    assert "hint: write a number in (0, 1]" in err
    p.write_text(json.dumps({**PYTHIA, "rotary_pct": 1.0}))
    code, out, err = _cli(capsys, "derive", str(p))
    assert code == 0 and "r=64," in out                 # 1.0 · 768/12


def test_duplicate_key_warns_with_key_file_and_value_used(tmp_path):
    from costgraph.language.hf_config import DuplicateKeyWarning

    text = json.dumps(PYTHIA)[:-1] + ',\n "hidden_size": 1024,\n "hidden_size": 384}'
    p = tmp_path / "config.json"
    p.write_text(text)
    with pytest.warns(DuplicateKeyWarning) as record:
        hf = costgraph.load_hf_config(str(p))
    assert hf.values["h"] == 384 and hf.values["r"] == 8          # the last value, as json.loads takes: 0.25·384/12
    assert [str(w.message) for w in record] == [
        f"duplicate key 'hidden_size' in {p}: it is given 3 times; the last value, 384, is used "
        "(as Python and Transformers do)"]
    assert record[0].filename == str(p) and record[0].lineno == 3


def test_no_warning_without_duplicates(tmp_path, recwarn):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(PYTHIA))
    assert costgraph.load_hf_config(str(p)).values["h"] == 768
    assert not [w for w in recwarn if "duplicate" in str(w.message)]


# --- nested configs that are not objects, and config files that are not JSON, refused with a hint (issue 19 trial) ---

def run(argv, capsys):
    status = main(argv)
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.mark.parametrize("nested", [None, [1], "x", 7])
def test_a_nested_config_that_is_not_an_object_is_refused(tmp_path, nested):
    # before: llava's vision tower silently took CLIPVisionConfig's defaults (224/32/768), which is
    # not even what LlavaConfig builds for a missing vision_config (1024 wide, 24 layers, patch 14)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llava", "vision_config": nested, "text_config": {}}))
    with pytest.raises(CostgraphValueError, match=r"key 'vision_config' must be an object") as e:
        costgraph.load_hf_config(str(path))
    assert e.value.hint


def test_a_missing_nested_config_is_refused(tmp_path):
    path = tmp_path / "config.json"
    # LlavaConfig builds its own tower for a missing vision_config, not CLIPVisionConfig's defaults;
    # CLIPConfig builds CLIPTextConfig() (its mapping entry's nested_defaults: read as the defaults)
    path.write_text(json.dumps({"model_type": "llava", "text_config": {}}))
    with pytest.raises(CostgraphValueError, match=r"key 'vision_config' must be an object .*missing or null"):
        costgraph.load_hf_config(str(path))


def test_config_file_errors_carry_a_hint(tmp_path, capsys):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    status, _, err = run(["derive", str(empty)], capsys)
    assert status == 2 and "invalid JSON" in err and "hint: " in err
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    status, _, err = run(["derive", str(binary)], capsys)
    assert status == 2 and "not UTF-8 text" in err and "hint: " in err
    frac = tmp_path / "frac.json"
    frac.write_text(json.dumps({"model_type": "vit", "image_size": 224.5}))
    status, _, err = run(["derive", str(frac)], capsys)
    assert status == 2 and "positive whole number" in err and "hint: " in err


# --- dropout rates are probabilities; a byte-order mark is read (new-user trial) -------------------------------------

def _err(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return err


# config.json dropout rates are probabilities, checked like the other keys and named with the file
@pytest.mark.parametrize("file, key, value, shown", [
    ("llama-2-7b.json", "attention_dropout", "0.1", "'0.1'"),
    ("llama-2-7b.json", "attention_dropout", -0.1, "-0.1"),
    ("gpt2.json", "attn_pdrop", 1.5, "1.5"),
    ("gpt2.json", "resid_pdrop", True, "True"),
])
def test_hf_config_dropout_rates_are_probabilities(tmp_path, capsys, file, key, value, shown):
    from pathlib import Path

    config = json.loads((Path(__file__).parents[2] / "examples" / "hf" / file).read_text())
    path = tmp_path / file
    path.write_text(json.dumps({**config, key: value}))
    err = _err(capsys, ["derive", str(path)])
    col = path.read_text().index(f'"{key}":') + 1   # the key's JSON position (hf_json.key_offset)
    assert err.splitlines()[0] == \
        f"{path}:1:{col}: error: key '{key}' must be a dropout probability, a number in [0, 1), got {shown}"
    # the released value passes (GPT-2's 0.1, LLaMA's absent key)
    assert main(["derive", str(Path(__file__).parents[2] / "examples" / "hf" / file)]) == 0


def test_config_json_with_a_byte_order_mark(tmp_path):
    # some editors write a UTF-8 byte-order mark; Python's json refuses it ("decode using utf-8-sig")
    import costgraph

    p = tmp_path / "gpt2.json"
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "examples" / "hf" / "gpt2.json"
    p.write_bytes(b"\xef\xbb\xbf" + src.read_bytes())
    hf = costgraph.load_hf_config(str(p))
    assert hf.costs().evaluate(**hf.values)["params"] == 124_439_808   # GPT-2 small, tied head


# --- malformed model_type, variants that change costs, --config with a config.json (a new user's README run) ---------

ROOT = Path(__file__).resolve().parents[2]


def test_malformed_model_type_and_non_string_model():
    with pytest.raises(costgraph.CostgraphValueError, match="unsupported model_type"):
        costgraph.from_hf_config({"model_type": ["llama"]})
    with pytest.raises(costgraph.CostgraphValueError, match="no 'model_type' key"):
        costgraph.from_hf_config({})
    with pytest.raises(costgraph.CostgraphValueError, match="not int"):
        costgraph.load(5)


def test_hf_variants_that_change_costs_are_refused():
    cfg = json.loads((ROOT / "examples" / "hf" / "gpt2.json").read_text())
    cfg["tie_word_embeddings"] = False
    with pytest.raises(costgraph.CostgraphValueError, match="tie_word_embeddings"):
        costgraph.from_hf_config(cfg)
    cfg = json.loads((ROOT / "examples" / "hf" / "llama-2-7b.json").read_text())
    cfg["hidden_act"] = "gelu"
    with pytest.raises(costgraph.CostgraphValueError, match="hidden_act"):
        costgraph.from_hf_config(cfg)


def test_config_flag_with_config_json_is_an_error(cg):
    r = cg("derive", str(ROOT / "examples/hf/gpt2.json"), "--config", "gpt2")
    assert r.returncode == 2 and "a config.json is one already" in r.stderr


# --- a config.json key's bad value at FILE:LINE:COLUMN (reliability: the file and key were named, no position) ----
@pytest.mark.parametrize("file, old, new, line, column, words", [
    # examples/hf/llama-3-8b.json line 16: '  "num_hidden_layers": 32,' (the key's quote at column 3)
    ("llama-3-8b.json", '"num_hidden_layers": 32', '"num_hidden_layers": -3', 16, 3,
     "key 'num_hidden_layers' must be a positive whole number, got -3"),
    ("llama-3-8b.json", '"num_hidden_layers": 32', '"num_hidden_layers": "three"', 16, 3,
     "key 'num_hidden_layers' must be a positive whole number, got 'three'"),
    # examples/hf/clip-vit-base-patch32.json line 15: text_config's '    "hidden_size": 512,' (column 5); the
    # vision_config's hidden_size (line 31) is another key
    ("clip-vit-base-patch32.json", '"hidden_size": 512', '"hidden_size": 0', 15, 5,
     "key 'text_config.hidden_size' must be a positive whole number, got 0"),
], ids=["negative", "string", "nested"])
def test_a_bad_key_value_is_refused_at_its_line_and_column(tmp_path, capsys, file, old, new, line, column, words):
    text = (HF / file).read_text()
    assert text.count(old) == 1 and text.splitlines()[line - 1].strip().startswith(old)
    path = tmp_path / file
    path.write_text(text.replace(old, new))
    err = _err(capsys, ["derive", str(path)]).splitlines()
    assert err[0] == f"{path}:{line}:{column}: error: {words}"
    assert err[1].strip().startswith(new) and err[2].index("^") == err[1].index('"')   # the caret under the key
    assert err[-1].startswith("hint: write '")
    with pytest.raises(costgraph.CostgraphValueError) as e:   # a dict (from_hf_config): no file, so no position
        costgraph.from_hf_config(json.loads(path.read_text()), source="cfg")
    assert e.value.message == f"cfg: {words}" and e.value.loc is None


def test_key_offset_follows_the_nesting_and_takes_the_last_duplicate():
    from costgraph.language.hf_json import key_offset

    text = '{"a": {"b": 1, "c": "x}\\": ["}, "b": [1, {"b": 2}], "d": {"b": 3}, "b": 4}'
    at = {k: key_offset(text, k) for k in ("a", "a.b", "a.c", "b", "d.b", "x", "a.b.c", "c")}
    assert {k: (text[v:v + 4] if v is not None else None) for k, v in at.items()} == {
        "a": '"a":', "a.b": '"b":', "a.c": '"c":', "b": '"b":', "d.b": '"b":', "x": None, "a.b.c": None, "c": None}
    assert at["a.b"] == 7 and at["b"] == text.rindex('"b": 4') and at["d.b"] == text.index('"b": 3')


# transformers 5.24 AlbertConfig() defaults (configuration_albert.py): a model_type no bundled file maps, drafted
ALBERT = {"model_type": "albert", "vocab_size": 30000, "embedding_size": 128, "hidden_size": 4096,
          "num_hidden_layers": 12, "num_hidden_groups": 1, "num_attention_heads": 64, "intermediate_size": 16384,
          "max_position_embeddings": 512, "encoder_config": {"hidden_size": 8}}


@pytest.mark.parametrize("key, value, shown", [
    ("hidden_size", -5, "-5"), ("hidden_size", 0, "0"), ("hidden_size", float("nan"), "NaN"), ("num_hidden_layers", float("inf"), "Infinity"),
    ("hidden_size", "big", '"big"'), ("hidden_size", 4096.5, "4096.5"), ("hidden_size", True, "true"),
    ("encoder_config.hidden_size", -3, "-3"),
])
def test_a_drafted_config_with_a_size_no_model_has_is_refused_at_its_key(tmp_path, capsys, key, value, shown):
    """Session 45 trial: a config.json of a type costgraph drafts (no bundled file) handed its sizes to transformers
    as they were: hidden_size -5 failed in PyTorch's constructor ("Trying to create tensor with negative dimension"),
    NaN or "big" in transformers' StrictDataclassFieldValidationError, with no FILE:LINE:COLUMN. Now refused at the
    key before transformers reads it (costgraph.language.hf_sizes), for derive and import alike."""
    from costgraph.language.hf_sizes import refuse_bad_sizes

    cfg = json.loads(json.dumps(ALBERT))
    table, field = (cfg["encoder_config"], "hidden_size") if "." in key else (cfg, key)
    table[field] = value
    path = tmp_path / "albert.json"
    path.write_text(json.dumps(cfg, indent=2))
    lines = path.read_text().splitlines()
    indent = 4 if "." in key else 2
    line = next(n for n, x in enumerate(lines, 1) if x.startswith(" " * indent + f'"{field}":'))
    assert main(["derive", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    least = 1 if value == 0 or key.endswith("hidden_size") else 0   # hf_sizes.NEVER_ZERO: hidden_size
    assert err[0] == f"{path}:{line}:{indent + 1}: error: key '{key}' must be a whole number of {least} or more, got " \
                     f"{shown}"
    assert err[-1].startswith(f"hint: write '{field}' as the released config.json does")
    assert "Traceback" not in "\n".join(err)
    ok = dict(ALBERT, num_experts=0, intermediate_size=[16384, 8192], chunk_size=-1)   # a part left out, per-layer
    assert refuse_bad_sizes(ok, "ok") is None                                          # sizes, a -1 switch: let through


def test_import_reads_the_same_refusal(tmp_path):
    """``costgraph import`` reads the file itself (costgraph.drafting.configs._read): the same FILE:LINE:COLUMN."""
    pytest.importorskip("transformers")
    from costgraph.drafting.configs import _read

    path = tmp_path / "albert.json"
    path.write_text(json.dumps(dict(ALBERT, hidden_size=-5), indent=2))
    with pytest.raises(CostgraphValueError) as e:
        _read(str(path))
    line = path.read_text().splitlines().index('  "hidden_size": -5,') + 1
    assert str(e.value).startswith(f"{path}:{line}:3: error: key 'hidden_size' must be a whole number of 1 or more, "
                                   "got -5")


def test_a_missing_or_huge_config_says_what_to_do(tmp_path, capsys):
    """Session 45 trial: "no such file: X" and "X is too large for a config.json" came without a hint (every
    refusal: what was expected, a hint, exit status 2); the same for a missing hardware TOML (datafiles.read)."""
    missing = tmp_path / "nope.json"
    assert main(["derive", str(missing)]) == 2
    assert capsys.readouterr().err == f"error: no such file: {missing}\n" \
                                      "hint: check the path: give the path of a config.json file\n"
    huge = tmp_path / "huge.json"
    huge.write_text('{"model_type": "llama", "x": "' + "a" * (1 << 24) + '"}')
    assert main(["derive", str(huge)]) == 2
    assert capsys.readouterr().err.splitlines()[1] == \
        "hint: a config.json is a few kB of settings: give the model's config.json, not its weights or a log"
    toml = tmp_path / "nope.toml"
    assert main(["train", "gpt", "--config", "gpt2", "--gpus", "1", "--hardware", str(toml)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: no such file: {toml}",
                                                    "hint: check the path: give the path of a TOML file of hardware "
                                                    "presets"]
