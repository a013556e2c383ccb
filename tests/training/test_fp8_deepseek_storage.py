"""The DeepSeek-V3 report's low-precision activation storage (the ``fp8-deepseek-v3`` policy's
``moe_act_input_bits`` and ``attention_output_bits``; costgraph.training.fp8.low_precision_saved and
saved_inputs), and the FP8 copies of inputs a recompute module frees (issue 27: the
deepseek-v3-report-2048gpu row).

Source: DeepSeek-V3 technical report, arXiv 2412.19437 v2, §3.3.3 "Low-Precision Activation":
"(1) Inputs of the Linear after the attention operator. These activations are also used in the backward
pass of the attention operator, which makes it sensitive to precision. We adopt a customized E5M6 data
format exclusively for these activations." and "(2) Inputs of the SwiGLU operator in MoE. To further
reduce the memory cost, we cache the inputs of the SwiGLU operator and recompute its output in the
backward pass. These activations are also stored in FP8 with our fine-grained quantization method";
§3.3.1: "we group and scale elements on a 1x128 tile basis (i.e., per token per 128 channels)". TE's
column-wise FP8 copy of a linear's input (``fp8-blockwise``): TE @ d0067d0d
``float8_blockwise_tensor.py::Float8BlockQuantizer.get_scale_shape`` (``[⌈M/128⌉, up4(K)]`` fp32).

A small DeepSeek-V3 on one GPU (flash attention, micro-batch 1): s 128 tokens, h 64, 4 heads of
d_v 16 (the attention output is 128 × 64 = 8,192 elements), 8 routed experts of i_e 32, k 2 routed a
token (an expert tensor is 2 × 128 = 256 token rows × 32), 3 layers of which 1 dense, 2 MoE.
"""

import pytest
import sympy

import costgraph

S, H, K_ROUTED, I_E = 128, 64, 2, 32
LAYERS, MOE_LAYERS, DENSE_LAYERS = 3, 2, 1
ATT = S * 4 * 16                       # the attention output: 8,192 elements a layer
SWI = K_ROUTED * S * I_E               # one SwiGLU input (gate or up projection's output): 8,192 elements
BF16 = 2


@pytest.fixture(scope="module")
def small():
    m = costgraph.load("deepseek_v3")
    v = m.values("deepseek-v3", h=H, a=4, r_q=32, r_kv=16, d_n=16, d_r=8, d_v=16, i=128, i_e=I_E, i_s=32,
                 E=8, k=K_ROUTED, l=LAYERS, k_d=DENSE_LAYERS, V=256, s=S, b=1)
    cache = {}

    def mem(policy, *modules):
        key = (policy, modules)
        if key not in cache:
            recompute = dict(recompute="selective", recompute_modules=modules) if modules else dict(recompute="none")
            r = m.train(values=v, gpus=1, policy=policy, **recompute)
            cache[key] = {k: int(sympy.sympify(x).xreplace(v)) for k, x in r.stages[0].memory.items()}
        return cache[key]
    return mem


def test_attention_output_kept_once_at_twelve_bits(small):
    # fp8-blockwise: TE's FP8 copy of o_proj's input, 1 B an element + fp32 scales [⌈128/128⌉, up4(64)]:
    # 8,192 + 4 · 64 = 8,448 B. fp8-deepseek-v3: one E5M6 copy, 12 bits an element + one fp32 scale per
    # token and 128 channels: 1.5 · 8,192 + 4 · 128 · ⌈64/128⌉ = 12,288 + 512 = 12,800 B. Both let the
    # BF16 copy go (selective without core_attn: o_proj alone keeps it).
    te, ds = 8 * ATT // 8 + 4 * 64, 12 * ATT // 8 + 4 * S * 1
    assert (te, ds) == (8_448, 12_800)
    base, rule = small("fp8-blockwise", "mla_up_proj"), small("fp8-deepseek-v3", "mla_up_proj")
    assert rule["activations"] - base["activations"] == LAYERS * (ds - te) == 13_056
    assert rule["fp8 saved inputs"] - base["fp8 saved inputs"] == LAYERS * (ds - te)


def test_attention_output_not_kept_twice(small):
    # --recompute none: the flash kernel keeps its BF16 output O (16,384 B) and TE's o_proj its FP8 copy
    # beside it (8,448 B); the report's rule keeps one E5M6 copy for both (12,800 B)
    base, rule = small("fp8-blockwise"), small("fp8-deepseek-v3")
    assert rule["activations"] - base["activations"] == LAYERS * (12_800 - BF16 * ATT - 8_448) == -36_096


def test_swiglu_inputs_in_fp8_where_moe_act_frees_its_output(small):
    # moe_act frees the SwiGLU's output (down_proj's input): under FP8 the down-projection keeps its own
    # FP8 copy and the BF16 one was not counted — nothing changes (fp8-blockwise). fp8-deepseek-v3 also
    # stores the SwiGLU's two inputs (gate_proj, up_proj outputs: 256 token rows × 32) in FP8 with 1×128
    # tiles: 8,192 + 4 · 256 · ⌈32/128⌉ = 9,216 B each instead of 2 · 8,192 = 16,384 B.
    fp8_tile = SWI + 4 * (K_ROUTED * S) * 1
    assert fp8_tile == 9_216
    te = small("fp8-blockwise", "mla_up_proj", "moe_act")["activations"] - \
        small("fp8-blockwise", "mla_up_proj")["activations"]
    assert te == 0
    ds = small("fp8-deepseek-v3", "mla_up_proj", "moe_act")["activations"] - \
        small("fp8-deepseek-v3", "mla_up_proj")["activations"]
    assert ds == MOE_LAYERS * 2 * (fp8_tile - BF16 * SWI) == -28_672


def test_a_freed_input_loses_its_bf16_bytes_once(small):
    # the layernorm module frees the norms' outputs. input_layernorm's output is kept by FP8 linears only
    # (q_a_proj, kv_a_proj_with_mqa): its BF16 copy was already replaced by their FP8 copy — no change.
    # post_attention_layernorm's output in a MoE layer is also read by the router (kept at BF16): freeing it
    # takes its 128 × 64 × 2 B = 16,384 B, twice (two MoE layers); in the dense layer only FP8 linears keep
    # it: no change. (Before this change the freed BF16 bytes were taken twice: −65,536 more here.)
    diff = small("fp8-blockwise", "layernorm", "mla_up_proj")["activations"] - \
        small("fp8-blockwise", "mla_up_proj")["activations"]
    assert diff == -MOE_LAYERS * S * H * BF16 == -32_768


def test_the_fields_are_the_reports():
    # §3.3.3: "stored in FP8" (8 bits) and "a customized E5M6 data format" (1 + 5 + 6 = 12 bits); no other
    # policy stores its activations this way
    from costgraph.training.data import policies, policy

    assert (policy("fp8-deepseek-v3").moe_act_input_bits, policy("fp8-deepseek-v3").attention_output_bits) == (8, 12)
    assert [n for n, p in policies().items() if p.moe_act_input_bits or p.attention_output_bits] == ["fp8-deepseek-v3"]


def test_the_fields_need_an_fp8_recipe(tmp_path, monkeypatch):
    # the rules store inputs the way the FP8 linears save theirs (the recipe's 1x128 tiles and fp32 scales)
    from costgraph.errors import CostgraphValueError
    from costgraph.training.data import policies

    (tmp_path / "policies.toml").write_text(
        '[my-bf16]\ndescription = "x"\nsource = "test"\nattention_output_bits = 12\n'
        'weights = 2\ngradients = 4\ngrad_copy = 0\nmaster = 4\nstate = 4\n')
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    with pytest.raises(CostgraphValueError, match="attention_output_bits needs an FP8 recipe"):
        policies()


@pytest.mark.parametrize("bits", ["33", "1000000000000000000000000000000"])
def test_the_fields_refuse_more_bits_than_fp32(tmp_path, monkeypatch, bits):
    # trial11: a user's moe_act_input_bits = 10**30 was read and its bytes counted; a stored element is at most
    # fp32 (32 bits), and the report's formats are 8 (FP8) and 12 (E5M6) bits (arXiv 2412.19437 v2 §3.3.3)
    from costgraph.errors import CostgraphValueError
    from costgraph.training.data import policies

    (tmp_path / "policies.toml").write_text(
        '[my-fp8]\ndescription = "x"\nsource = "test"\nfp8 = "blockwise"\n'
        f'weights = 2\ngradients = 4\ngrad_copy = 0\nmaster = 4\nstate = 2\nmoe_act_input_bits = {bits}\n')
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    with pytest.raises(CostgraphValueError) as err:
        policies()
    assert "[my-fp8] moe_act_input_bits is above 32 bits (fp32, the widest format an activation is " \
           "stored in; 8 for FP8, 12 for DeepSeek-V3's E5M6)" in str(err.value)
    assert "hint: at most 32 bits" in str(err.value)
    assert "policies.toml:10:1: [my-fp8]" in str(err.value)


def test_the_fields_take_thirty_two_bits(tmp_path, monkeypatch):
    from costgraph.training.data import policies

    (tmp_path / "policies.toml").write_text(
        '[my-fp8]\ndescription = "x"\nsource = "test"\nfp8 = "blockwise"\n'
        'weights = 2\ngradients = 4\ngrad_copy = 0\nmaster = 4\nstate = 2\nattention_output_bits = 32\n')
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    assert policies()["my-fp8"].attention_output_bits == 32
