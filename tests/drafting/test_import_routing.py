"""``costgraph import`` (issue 28 item 2) of mixtures of experts whose meta forward needs the routing's values or
ignores them (src/costgraph/drafting/routing.py), exact against PyTorch (tests/draft_checks.py).

JetMoE (transformers 5.24 modeling_jetmoe.py): its router reads the routed counts back to Python
(``JetMoeTopKGating.forward``: ``expert_size.tolist()``), answered at trace time by a balanced split; its mixture of
attention heads and its MoE MLP are drafting/parallel_experts.py's ``moa_attention`` and ``parallel_moe``.

Llama 4 (modeling_llama4.py ``Llama4TextMoe.forward``): every expert runs every token (``hidden_states.repeat(E, 1)``
into ``Llama4TextExperts``' two ``bmm``), the unchosen ones scaled by ``sigmoid(-inf) = 0``; the draft counts the k
chosen (the routed-experts convention: vllm-project/vllm vllm/model_executor/models/llama4.py
``Llama4MoE.custom_routing_function``, top-k then sigmoid, into ``FusedMoE``), and the check compares it with
FlopCounterMode's count less the E − k experts' share.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import costgraph  # noqa: E402
from costgraph import torch_measure  # noqa: E402
from draft_checks import DENSE, POINTS, TOK, Drafts, assert_exact  # noqa: E402  (tests/ on sys.path)

CASES = {
    # every layer a MoE (interleave_moe_layer_step 1, Scout's), routed and shared experts of width i
    "llama4_text": dict(model_type="llama4_text", **DENSE, num_key_value_heads=2, head_dim=16, intermediate_size=32,
                        intermediate_size_mlp=96, num_local_experts=4, num_experts_per_tok=2, **TOK),
    "jetmoe": dict(model_type="jetmoe", hidden_size=64, num_key_value_heads=2, kv_channels=16, intermediate_size=32,
                   num_local_experts=4, num_experts_per_tok=2, num_hidden_layers=2, vocab_size=128,
                   max_position_embeddings=64, **TOK),
}
EXPECTED = {
    "llama4_text": "shared_moe(rmsnorm(x, name = post_attention_layernorm), E, k, i, i, correction_bias = false, "
                   "name = feed_forward)",
    "jetmoe": "x = x + moa_attention(rmsnorm(x, name = input_layernorm), E, k, kv, d, name = self_attention)\n"
              "    x = x + parallel_moe(rmsnorm(x, name = post_attention_layernorm), E, k, i, name = mlp)",
}

drafted = Drafts(CASES)


@pytest.mark.parametrize("family", sorted(CASES))
def test_draft_exact_at_both_probes(family):
    assert_exact(drafted(family), EXPECTED[family])


def _dense_extra(v: dict) -> int:
    """The forward FLOPs of the E − k unchosen experts Llama4TextMoe runs all the same: per MoE layer and token,
    ``Llama4TextExperts.forward``'s two bmm, ``2·h·2i + 2·i·h`` per expert (modeling_llama4.py)."""
    return v["l"] * v["b"] * v["s"] * (v["E"] - v["k"]) * 6 * v["h"] * v["i"]


def test_llama4_counts_k_experts_where_flopcountermode_counts_e():
    """At both probes FlopCounterMode's own count is the draft's plus every unchosen expert's products, by hand: the
    routed-experts convention removes exactly those, no more."""
    d = drafted("llama4_text")
    for c in d.checks:
        assert c.forward_flops_counted is not None
        assert c.forward_flops_counted - c.forward_flops_torch == _dense_extra(c.values) > 0, c


def test_llama4_at_the_config_equals_the_torch_tier_less_the_unchosen_experts():
    d = drafted("llama4_text")
    tm = torch_measure.build_meta("llama4_text", drafted.config("llama4_text"), train=False)
    m = costgraph.loads(d.text, path="<llama4_text>", config="imported")
    for b, s in POINTS:
        values = {str(k): int(v) for k, v in m.values("imported", b=b, s=s).items()}
        got = m.costs("model", convention="matmul").evaluate(None, values)
        assert int(got["params"]) == torch_measure.param_count(tm)
        assert int(got["flops_forward"]) == torch_measure.flops(tm, b, s)["forward"] - _dense_extra(values)


def test_jetmoe_at_the_config_equals_flopcountermode_and_the_count_by_hand():
    """At the config's own sizes (the torch tier cannot run JetMoE's ``tolist()`` on meta: the drafter's forward,
    with its balanced split, counts it) and by hand from modeling_jetmoe.py: kv_proj, the two routers, k query and
    k output projections of kv·d per token, eager attention over k·kv heads, k SwiGLU experts, the tied head."""
    from costgraph.drafting.api import _build, _forward

    d = drafted("jetmoe")
    model = _build(torch, CASES["jetmoe"], None)
    m = costgraph.loads(d.text, path="<jetmoe>", config="imported")
    for b, s in POINTS:
        v = {str(k): int(x) for k, x in m.values("imported", b=b, s=s).items()}
        got = m.costs("model", convention="matmul").evaluate(None, v)
        _, routed, counted = _forward(torch, model, b, s)
        t, h, kvd, k, e = b * s, v["h"], v["kv"] * v["d"], v["k"], v["E"]
        attention = 2 * t * h * 2 * kvd + 2 * t * h * e + 2 * t * k * h * kvd * 2 + 2 * 2 * b * k * v["kv"] * s * s * v["d"]
        mlp = 2 * t * h * e + 2 * t * k * h * 2 * v["i"] + 2 * t * k * v["i"] * h
        assert int(got["flops_forward"]) == routed == counted == v["l"] * (attention + mlp) + 2 * t * h * v["V"]
        assert int(got["params"]) == sum(p.numel() for p in model.parameters())


def test_balanced_split_of_routed_rows():
    """The stand-in's counts: T·k rows over E experts, the first T·k mod E one more (their sum is what the products
    count)."""
    from costgraph.drafting.routing import _Balanced

    assert _Balanced(5, 12).counts() == [3, 3, 2, 2, 2]
    assert _Balanced(4, 8).counts() == [2, 2, 2, 2]


def test_import_prints_flopcountermode_count_beside_the_routed_one():
    """``costgraph import``'s check lines name the convention and FlopCounterMode's own count (commands/import.py)."""
    import importlib

    checked = importlib.import_module("costgraph.commands.import")._checked
    d = drafted("llama4_text")
    lines = checked(d)
    for c, line in zip(d.checks, lines):
        assert f"forward FLOPs exact {c.forward_flops_torch:,}" in line
        assert f"FlopCounterMode counted {c.forward_flops_counted:,} with every expert on every token: compared with " \
               "k experts per token (the routed-experts convention)" in line
    assert not any("FlopCounterMode counted" in line for line in checked(drafted("jetmoe")))


def test_zero_computation_experts_trace_with_the_ffn_experts_share_of_a_balanced_split():
    """LongCat-Flash (transformers 5.24 modeling_longcat_flash.py ``LongcatFlashExperts.forward``: ``nonzero`` of the
    experts hit, ``torch.where`` of each expert's tokens, identity experts past ``num_routed_experts``) runs on meta
    under the stand-in (routing._zero_mode): T·k rows split evenly over the E + Z experts, and FlopCounterMode counts
    the E FFN experts' rows alone, 2·rows·(h·2m + m·h) (gate_up_proj, then down_proj): here T·k = 44 rows over 7
    experts, [7, 7, 6, 6, 6, 6, 6], 26 of them through the 4 FFN experts."""
    from costgraph.drafting.api import _build
    from costgraph.drafting.routing import _Balanced, stand_ins
    from costgraph.torch_measure import flop_counter, meta_forward

    cfg = dict(model_type="longcat_flash", hidden_size=64, num_attention_heads=4, num_layers=1, vocab_size=128,
               ffn_hidden_size=96, expert_ffn_hidden_size=32, n_routed_experts=4, zero_expert_num=3, moe_topk=2,
               q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, head_dim=8, v_head_dim=16,
               **TOK)
    model = _build(torch, cfg, None)
    b, s = 2, 11
    counter = flop_counter()
    with torch.no_grad(), meta_forward(), counter, stand_ins(torch, model, b * s):
        model(input_ids=torch.zeros((b, s), dtype=torch.long, device="meta"), use_cache=False)
    experts = counter.get_flop_counts()["LongcatFlashForCausalLM.model.layers.0.mlp.experts"]
    assert _Balanced(7, b * s * 2).counts() == [7, 7, 6, 6, 6, 6, 6]
    assert sum(experts.values()) == 2 * 26 * (64 * 2 * 32 + 32 * 64)
