"""Probe configurations that a config's validator accepts (costgraph.drafting.probe_fit, issue 28 item 2), and the
probe fields of encoder-decoder families whose decoder sizes have names of their own (ProphetNet's).

The validators are transformers 5.24's own (read at the source): configuration_moshi.py ``validate_architecture``
(``ffn_dim % 2 == 1`` refused), configuration_zamba.py (``(mamba_expand * hidden_size) % n_mamba_heads != 0``
refused), configuration_zaya.py (``num_experts_per_tok != 1`` refused); modeling_prophetnet.py
``ProphetNetNgramSelfAttention.__init__`` asserts ``hidden_size`` divisible by ``num_decoder_attention_heads``.
"""

from __future__ import annotations

import pytest

from costgraph.drafting.probe import Probe
from costgraph.drafting.probe_fit import doubled, dropped, fitted
from costgraph.errors import CostgraphValueError

FIELDS = ("hidden_size", "num_attention_heads", "intermediate_size", "num_experts_per_tok")


def _refusing(rule):
    def builds(probe):
        if not rule(probe.fields):
            raise CostgraphValueError("refused")
    return builds


def test_fitted_keeps_probes_that_build():
    probes = [Probe.make(FIELDS, i) for i in (0, 1)]
    assert fitted(probes, _refusing(lambda f: True)) is probes


def test_fitted_doubles_a_field_that_must_be_even():
    probes = [Probe.make(FIELDS, i) for i in (0, 1)]
    got = fitted(probes, _refusing(lambda f: f["intermediate_size"] % 2 == 0))
    assert [p.fields["intermediate_size"] for p in got] == [2 * 19, 2 * 31]     # probe.py's primes of i: 19, 31
    assert [p.symbols["i"] for p in got] == [(38, "intermediate_size"), (62, "intermediate_size")]
    assert got[0].cover(3 * 38) == "3 * i"        # read back as the field all the same
    assert [p.fields["hidden_size"] for p in got] == [p.fields["hidden_size"] for p in probes]


def test_fitted_leaves_a_field_at_the_config_value_when_no_doubling_helps():
    probes = [Probe.make(FIELDS, i) for i in (0, 1)]
    got = fitted(probes, _refusing(lambda f: f.get("num_experts_per_tok", 1) == 1))
    assert all("num_experts_per_tok" not in p.fields and "k" not in p.symbols for p in got)
    assert [len(p.fields) for p in got] == [len(FIELDS) - 1] * 2


def test_fitted_gives_the_probes_back_when_nothing_helps():
    probes = [Probe.make(FIELDS, i) for i in (0, 1)]
    assert fitted(probes, _refusing(lambda f: False)) is probes


def test_changes_copy_the_probe():
    p = Probe.make(FIELDS, 0)
    before = (dict(p.fields), dict(p.symbols))
    twice, left = doubled(p, "hidden_size"), dropped(p, "hidden_size")
    assert (p.fields, p.symbols) == before
    assert twice.fields["hidden_size"] == 2 * p.fields["hidden_size"] and "hidden_size" not in left.fields


@pytest.fixture(scope="module")
def hf():
    pytest.importorskip("torch")
    return pytest.importorskip("transformers")


def _fit(model_type: str):
    from costgraph.drafting.api import _probe_config
    from costgraph.drafting.configs import _config_object, present_fields, probed_config

    cfg = {"model_type": model_type}
    config = _config_object(cfg)
    present = present_fields(probed_config(config)[1])
    probes = [Probe.make(present, i) for i in (0, 1)]
    with pytest.raises(CostgraphValueError, match="cannot build a config"):
        _config_object(_probe_config(cfg, config, probes[0]))
    got = fitted(probes, lambda p: _config_object(_probe_config(cfg, config, p)))
    for p in got:      # the fitted probes build
        _config_object(_probe_config(cfg, config, p))
    return probes, got


def test_moshi_ffn_dim_doubled(hf):
    probes, got = _fit("moshi")
    assert [p.fields["ffn_dim"] for p in got] == [2 * p.fields["ffn_dim"] for p in probes]


def test_zamba_heads_left_at_the_config(hf):
    probes, got = _fit("zamba")
    assert all("n_mamba_heads" in p.fields for p in probes)
    assert all("n_mamba_heads" not in p.fields for p in got)


def test_zaya_one_expert_per_token(hf):
    probes, got = _fit("zaya")
    assert all("num_experts_per_tok" in p.fields for p in probes)
    assert all("num_experts_per_tok" not in p.fields for p in got)


def test_prophetnet_decoder_heads_probed(hf):
    from costgraph.drafting.api import _probe_config
    from costgraph.drafting.configs import _config_object, present_fields

    config = _config_object({"model_type": "prophetnet"})
    probe = Probe.make(present_fields(config), 0)
    built = _config_object(_probe_config({"model_type": "prophetnet"}, config, probe))
    assert built.num_decoder_attention_heads == probe.fields["num_attention_heads"] == 77
    assert built.hidden_size % built.num_decoder_attention_heads == 0
    assert built.num_decoder_layers == probe.fields["num_decoder_layers"] == 11     # probe.py's prime of l


@pytest.fixture(scope="module")
def deepseek_v2(hf):
    from costgraph.drafting.api import draft_model

    return draft_model("deepseek_v2")


def test_deepseek_v2_unset_top_k_probed(deepseek_v2):
    # transformers 5.24 configuration_deepseek_v2.py: num_experts_per_tok defaults to None, which
    # DeepseekV2Moe.route_tokens_to_experts passes to torch.topk: probed at the probe's k, left unset in the file
    d = deepseek_v2
    assert d.mapping["k"] == "num_experts_per_tok" and "k" not in d.values
    assert [(c.params_torch == c.params_draft, c.forward_flops_torch == c.forward_flops_draft) for c in d.checks] \
        == [(True, True)] * 2
    assert d.config_params[0] == d.config_params[1] and d.exact
    assert "num_experts_per_tok is None in the config" in d.text
    # session 42 trial: the warning said "set it"; it names the flag (and the config's field)
    assert "the draft's k has no value there; give it with --set k=N (or num_experts_per_tok in the config.json)" \
        in d.text
    config_line = next(line for line in d.text.splitlines() if line.startswith("config "))
    assert " k = " not in config_line


def test_params_at_config_refuses_a_count_that_sizes_weights():
    import costgraph
    from costgraph.drafting.probe_fit import params_at_config

    # RG-LRU's gates are [n, w/n, w/n] (tests/ops/test_recurrent.py): its parameters depend on n
    src = "model m {\n  dim b\n  dim s\n  dim w\n  dim n\n  input x[b, s, w]\n  return rg_lru(x, n, name = rg_lru)\n}\n"
    built = costgraph.loads(src, path="m.cg")
    assert params_at_config(built, {"w": 12, "n": 2}, {"w": "lru_width", "n": "num_attention_heads"}) \
        == 12 + 2 * 2 * 6 ** 2 + 2 * 2 * 6
    with pytest.raises(CostgraphValueError, match="depend on n"):
        params_at_config(built, {"w": 12}, {"w": "lru_width", "n": "num_attention_heads"})


def test_even_groups_doubles_the_query_heads_per_kv_head():
    # MiMo-V2-Flash's sliding-window layers run 2·kv KV heads (transformers 5.24 modeling_mimo_v2_flash.py
    # MiMoV2FlashAttention: num_key_value_heads * 2 if is_swa): the query heads a must divide by 2·kv
    fields = ("hidden_size", "num_attention_heads", "num_key_value_heads")
    for i in (0, 1):
        plain, even = Probe.make(fields, i), Probe.make(fields, i, even_groups=True)
        a, kv = even.fields["num_attention_heads"], even.fields["num_key_value_heads"]
        assert kv == plain.fields["num_key_value_heads"] and a == 2 * plain.fields["num_attention_heads"]
        assert a % (2 * kv) == 0 and plain.fields["num_attention_heads"] % (2 * kv) != 0
        assert even.fields["hidden_size"] == 2 * plain.fields["hidden_size"]
        assert even.cover(a * 40 * (13, 17)[i]) == "h" and even.cover(a) == "a"


def test_layer_period_leaves_room_before_the_shared_kv_layers():
    # Gemma 3n (transformers 5.24 configuration_gemma3n.py): the last num_kv_shared_layers = 15 layers reuse the KV of
    # earlier ones, its layer_types a period of 5 (four sliding, one full): the probes' layers (over twice the period
    # returned) leave at least two periods before the shared layers
    from types import SimpleNamespace

    from costgraph.drafting.probe_fit import layer_period

    assert layer_period(SimpleNamespace(), 5) == 5
    assert layer_period(SimpleNamespace(num_kv_shared_layers=0), 5) == 5
    period = layer_period(SimpleNamespace(num_kv_shared_layers=15), 5)
    for i in (0, 1):
        layers = Probe.make(("num_hidden_layers",), i, period).fields["num_hidden_layers"]
        assert layers - 15 >= 2 * 5 + 1


def test_layer_period_leaves_room_around_a_period_between_first_and_last_layers():
    # Beam (transformers 5.24 configuration_beam.py __post_init__): three dense MLP layers first, full attention every
    # 6th layer and forced at the last; the probes' layers (over twice the period returned) show the period twice
    # between the first 3 and the last (model_file._prefixed_period folds only a period shown twice)
    from types import SimpleNamespace

    from costgraph.drafting.probe_fit import layer_period

    def kinds(n):
        full = ["full" if (j + 1) % 6 == 0 or j == n - 1 else "sliding" for j in range(n)]
        return SimpleNamespace(layer_types=full, mlp_layer_types=["dense"] * 3 + ["sparse"] * (n - 3))

    period = layer_period(kinds(52), 6)
    assert period == 8
    for i in (0, 1):
        layers = Probe.make(("num_hidden_layers",), i, period).fields["num_hidden_layers"]
        assert layers - 3 - 1 >= 2 * 6
    # MiMo-V2-Flash's one dense first layer alone (its last layer is of the period's kind): the period as it is
    mimo = SimpleNamespace(layer_types=["full" if j == 0 or (j + 1) % 6 == 0 else "sliding" for j in range(48)],
                           mlp_layer_types=["dense"] + ["sparse"] * 47)
    assert layer_period(mimo, 6) == 6
    assert layer_period(SimpleNamespace(mlp_layer_types=["dense"] * 3 + ["sparse"] * 49), 1) == 1


def test_fitted_never_leaves_the_hidden_size_at_the_config():
    probes = [Probe.make(FIELDS, i) for i in (0, 1)]
    assert fitted(probes, _refusing(lambda f: "hidden_size" not in f)) is probes


def test_each_probe_config_is_built_once(hf, monkeypatch):
    """Session 42 review: each probe's transformers config was built three times (the probe check, the draft's own
    check, the model's build); now the check's config object is the one the draft builds its model from."""
    from costgraph.drafting import api

    made = []
    real = api._config_object
    monkeypatch.setattr(api, "_config_object", lambda cfg: made.append(cfg["hidden_size"]) or real(cfg))
    cfg = dict(model_type="llama", hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
               num_hidden_layers=2, vocab_size=128, max_position_embeddings=64)
    d = api.draft_model(cfg, name="built_once", check=False)
    assert d.confirmed and len(made) == len(set(made)) == 3   # the config's, then one per probe (before: 1 + 3 · 2)
    assert made[0] == 64 and 64 not in made[1:]
