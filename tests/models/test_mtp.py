"""DeepSeek-V3's multi-token prediction (option mtp of models/deepseek_v3.cg), against
Megatron-LM @ d98e8a64:
  megatron/core/transformer/multi_token_prediction.py::MultiTokenPredictionLayer (the module),
  megatron/training/training.py::num_floating_point_operations → transformer_flops (FLOPs),
  megatron/training/theoretical_memory_usage.py::compute_weight_and_optimizer_memory (weights).
"""

import sympy

import costgraph
from costgraph.language.hf_config import load_hf_config
from costgraph.parallel.layout import Layout
from costgraph.training.compute import training_flops
from costgraph.training.megatron import megatron_estimate
from costgraph.training.megatron_flops import megatron_flops
from costgraph.training.memory import training_memory

# deepseek-ai/DeepSeek-V3 config.json
H, A, RQ, RKV, DN, DR, DV, E, K, IE, IS, L, KD, V = 7168, 128, 1536, 512, 128, 64, 128, 256, 8, 2048, 2048, 61, 3, 129280
# one MoE layer: MLA (q_a, q norm, q_b, kv_a with the rope key, kv norm, kv_b, o), experts,
# shared expert, router (its e_score_correction_bias a buffer, not a parameter), two RMSNorms
MLA = H * RQ + RQ + RQ * A * (DN + DR) + H * (RKV + DR) + RKV + RKV * A * (DN + DV) + A * DV * H
MOE = E * 3 * H * IE + 3 * H * IS + H * E
LAYER = MLA + MOE + 2 * H
MTP = LAYER + 2 * H * H + 3 * H          # + eh_proj (2h → h, no bias), enorm, hnorm, final norm


def _model(mtp):
    m = costgraph.load("deepseek_v3", options={"mtp": mtp})
    return m, m.values(config="deepseek-v3")


def test_mtp_params_are_one_moe_layer_eh_proj_and_three_norms():
    assert MLA == 187_107_328 and LAYER == 11_507_286_016
    on, v = _model(True)
    off, _ = _model(False)
    # published 671B, unchanged; transformers' count (58 routers' buffers of 256 apart)
    assert off.costs().evaluate(config="deepseek-v3")["params"] == 671_026_404_352
    assert on.costs().evaluate(config="deepseek-v3")["params"] == 671_026_404_352 + MTP == 682_636_472_320
    # the embedding and the output head are shared: no second V·h
    assert sympy.expand(on.costs("mtp_layers/shared_head").quantities["params"]) == 0


def test_mtp_head_runs_again_per_depth():
    on, _ = _model(True)
    g = on.graph
    b, s, h, Vs = (g.dims[n].symbol for n in ("b", "s", "h", "V"))
    assert on.costs("mtp_layers/shared_head").quantities["flops_forward"] == 2 * b * s * h * Vs


def test_flops_per_token_against_megatron_transformer_flops():
    for mtp, megatron in ((False, 249_812_054_016), (True, 259_992_950_784)):
        m, v = _model(mtp)
        meg = megatron_flops(m, v)["per_token"]
        assert meg == megatron
        own = training_flops(m.graph, Layout().filled(), convention="matmul", causal="half",
                             router=False)["per_token"].xreplace(v)
        D = 1 if mtp else 0
        # named differences: Megatron counts MLA's q/kv low-rank norms as +1 per rank entry
        # (6·(r_q + r_kv) per token per layer) and the MTP norms as 6·D·3h; costgraph's matmul
        # convention counts no norm. Everything else (MLA, dense/MoE MLPs, eh_proj 6·2h², logits
        # 6·h·V·(D + 1), the causal half of the core) agrees exactly.
        assert meg - own == 6 * (L + D) * (RQ + RKV) + 18 * D * H
    # MTP adds about 4% (4.08%) of DeepSeek-V3's FLOPs per token
    assert sympy.Rational(259_992_950_784, 249_812_054_016) > sympy.Rational(104, 100)


def test_megatron_flops_formula_terms():
    m, v = _model(True)
    off, _ = _model(False)
    d = megatron_flops(m, v)["per_token"] - megatron_flops(off, v)["per_token"]
    # one more MoE layer: MLA linear (+norm terms) and core (s = 4096, causal half), MoE MLP;
    # plus 6·(3h + 2h²) and one more 6·h·V
    mla = 6 * (RQ * (H + A * (DN + DR) + 1) + RKV * (H + A * (DN + DV) + 1) + H * DR + A * DV * H)
    core = 6 * (A * (DN + DR) // 2 + A * DV // 2) * 4096
    mlp = 6 * H * (IE * K * 3 + IS * 3)
    assert d == mla + core + mlp + 6 * (3 * H + 2 * H * H) + 6 * H * V


def test_megatron_weights_with_mtp():
    # Megatron's compute_weight_and_optimizer_memory counts, per MTP depth, the attention, the shared
    # expert, two layer norms, the router (no bias: add_bias_linear false) and the routed experts:
    # 18 bytes each (no distributed optimizer, t = p = 1). It leaves out eh_proj (2h²), the enorm,
    # hnorm and final norm (3h), which costgraph counts (the router's e_score_correction_bias is a buffer,
    # in neither count).
    on, v = _model(True)
    off, _ = _model(False)
    lay = Layout(t=1, p=1)
    diff = megatron_estimate(on, v, lay)["weights_and_optimizer"] - megatron_estimate(off, v, lay)["weights_and_optimizer"]
    assert diff == 18 * LAYER
    assert MTP - LAYER == 2 * H * H + 3 * H


def test_mtp_activations_and_second_loss():
    on, v = _model(True)
    off, _ = _model(False)
    g = on.graph
    b, s, h, Vs, D = (g.dims[n].symbol for n in ("b", "s", "h", "V", "D"))
    layer = on.costs("moe_layers").quantities["activation_bytes"]
    d = sympy.expand(on.costs().quantities["activation_bytes"] - off.costs().quantities["activation_bytes"])
    # one MoE layer's tensors per depth, plus the embedding output, the normalized hidden state, the
    # 2h concatenation eh_proj keeps (4bsh), the final norm's input and the shared head's input
    assert d == sympy.expand(D * (layer + 12 * b * s * h))
    lay = Layout(attention="flash")
    loss_on = training_memory(on.graph, lay).stages[0].memory["loss"]
    loss_off = training_memory(off.graph, lay).stages[0].memory["loss"]
    # the MTP depth's loss: Megatron-LM's default cross-entropy over its logits, the fp32 softmax and the bf16
    # gradient, 6 B a logit (training/cross_entropy.toml [megatron]; 4 B under the logits count before issue 31)
    assert sympy.expand(loss_on - loss_off) == 6 * b * s * Vs


def test_hf_import_reads_depths_when_asked():
    path = "examples/hf/deepseek-v3.json"
    plain = load_hf_config(path)
    assert "D" not in plain.values and plain.model.costs().evaluate(**plain.values)["params"] == 671_026_404_352
    hf = load_hf_config(path, options={"mtp": True})
    assert hf.values["D"] == 1                                 # num_nextn_predict_layers
    assert hf.model.costs().evaluate(**hf.values)["params"] == 682_636_472_320


def test_inference_leaves_mtp_out_by_default():
    from costgraph.inference.loading import load
    m = load("deepseek_v3")
    assert "D" not in m.graph.dims
    assert m.costs().quantities["kv_cache_bytes_per_token"].xreplace(m.values(config="deepseek-v3")) == 70_272


def test_a_model_returns_several_outputs():
    m = costgraph.loads("model m {\n  dim b\n  dim s\n  dim h\n  input x[b, s, h]\n"
                        "  y = linear(x, h, bias = false, name = p)\n  z = linear(x, h, bias = false, name = q)\n"
                        "  return y, z\n}\n")
    assert len(m.graph.outputs) == 2
    b, s, h = (m.graph.dims[n].symbol for n in ("b", "s", "h"))
    # each output is a loss: the default cross-entropy's 6 B a logit (fp32 softmax + bf16 gradient) of both kept
    loss = training_memory(m.graph, Layout(attention="flash")).stages[0].memory["loss"]
    assert sympy.expand(loss) == 2 * 6 * b * s * h
