"""Megatron-LM's theoretical memory estimate as a named profile (issue 7, item 8).

Source: NVIDIA/Megatron-LM at commit d98e8a64ddf34856e74b24714e3bedb2f5a39553,
``megatron/training/theoretical_memory_usage.py`` — ``compute_weight_and_optimizer_memory``
l. 12-305, ``compute_activation_memory`` l. 308-379, ``compute_activation_memory_without_sp``
l. 382-453, ``report_theoretical_memory`` l. 456-486 (path chosen at l. 466); the vocabulary
padding ``vocab_size_with_padding`` in ``megatron/core/tokenizers/utils/build_tokenizer.py``
l. 133-146. The reference below (``ref_*``) is a plain-Python transcription of those lines
on Megatron's own float arithmetic, with its args written out by hand from the published
configurations (not through costgraph's mapping); costgraph's SymPy result, evaluated, must
equal it.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import sympy

import costgraph
from costgraph import CostgraphValueError
from costgraph.training.megatron import (DIFFERENCES, KEYS, MEGATRON_COMMIT, megatron_args, megatron_beside,
                                         megatron_estimate, megatron_report)
from costgraph.training.memory import Layout, training_memory

NUM_BYTES_IN_MEGABYTE = 1024 * 1024   # theoretical_memory_usage.py l. 9
LLAMA2_7B_PARAMS = 6_738_415_616      # DOMAIN.md §1


# --- the reference: a transcription of Megatron's functions in plain Python --------------------

def ref_padded_vocab(orig_vocab_size, make_vocab_size_divisible_by, tensor_model_parallel_size):
    # build_tokenizer.py l. 137-146
    after = orig_vocab_size
    multiple = make_vocab_size_divisible_by * tensor_model_parallel_size
    after = int(math.ceil(after / multiple) * multiple)
    return after


def ref_weight_and_optimizer(args):
    # l. 12-305, dense models (num_experts None, no MTP, no MLA) and MoE with moe_layer_freq = 1
    query_projection_size = args.kv_channels * args.num_attention_heads
    query_projection_to_hidden_size_ratio = query_projection_size / args.hidden_size
    if not args.group_query_attention:
        args.num_query_groups = args.num_attention_heads
    num_experts = 1 if args.num_experts is None else args.num_experts
    gated_linear_multiplier = 3 / 2 if args.swiglu else 1
    if args.num_experts is not None:
        moe_layer_pattern = [1 if (i % 1 == 0) else 0 for i in range(args.num_layers)]
        num_dense_layers = args.num_layers - sum(moe_layer_pattern)
        num_moe_layers = sum(moe_layer_pattern)
        moe_ffn_hidden_size = args.moe_ffn_hidden_size
    else:
        num_dense_layers = args.num_layers
        num_moe_layers = 0
        moe_ffn_hidden_size = 0
    norm_size = 1 if args.normalization == "RMSNorm" else 2
    self_attn_term = (2 * args.hidden_size * args.hidden_size
                      * ((1 + (args.num_query_groups / args.num_attention_heads))
                         * query_projection_to_hidden_size_ratio))
    embedding_size = args.hidden_size * args.padded_vocab_size
    final_layernorm = norm_size * args.hidden_size
    attention_params = self_attn_term
    dense_mlp_params = 2 * args.hidden_size * args.ffn_hidden_size * gated_linear_multiplier
    shared_expert_params = 0
    routed_expert_params = 2 * args.hidden_size * moe_ffn_hidden_size * num_experts * gated_linear_multiplier
    latent_projection_params = 0
    layernorm_params = 2 * args.hidden_size * norm_size
    router_params = ((args.hidden_size * num_experts) + (num_experts if args.add_bias_linear else 0)
                     if args.num_experts is not None else 0)
    shared_expert_gate_params = 0
    expert_tensor_model_pipeline_parallel_size = (args.expert_tensor_parallel_size
                                                  * args.expert_model_parallel_size
                                                  * args.pipeline_model_parallel_size)
    expert_data_parallel_size = args.world_size // expert_tensor_model_pipeline_parallel_size
    tp_sharded_params_in_transformer_block = ((attention_params + dense_mlp_params) * num_dense_layers
                                              + (attention_params + shared_expert_params) * num_moe_layers)
    replicated_params_in_transformer_block = (
        layernorm_params * num_dense_layers
        + (layernorm_params + latent_projection_params + router_params + shared_expert_gate_params)
        * num_moe_layers + final_layernorm)
    expert_sharded_params_in_transformer_block = routed_expert_params * num_moe_layers
    tp_sharded_params_on_most_loaded_shard = (
        (tp_sharded_params_in_transformer_block / args.pipeline_model_parallel_size) + 0 + embedding_size
    ) / args.tensor_model_parallel_size
    replicated_params_on_most_loaded_shard = (
        replicated_params_in_transformer_block / args.pipeline_model_parallel_size) + 0
    expert_sharded_params_on_most_loaded_shard = (
        (expert_sharded_params_in_transformer_block / args.pipeline_model_parallel_size) + 0
    ) / (args.expert_tensor_parallel_size * args.expert_model_parallel_size)
    if args.untie_embeddings_and_output_weights and args.pipeline_model_parallel_size == 1:
        tp_sharded_params_on_most_loaded_shard += embedding_size / args.tensor_model_parallel_size

    def num_bytes_per_parameter(data_parallel_size):
        return 18 if not args.use_distributed_optimizer else 6 + (12 / data_parallel_size)

    return ((tp_sharded_params_on_most_loaded_shard + replicated_params_on_most_loaded_shard)
            * num_bytes_per_parameter(args.data_parallel_size)
            + expert_sharded_params_on_most_loaded_shard * num_bytes_per_parameter(expert_data_parallel_size))


def ref_pipeline(args, activation_memory, num_microbatches):
    # l. 341-366 (= l. 411-435)
    if args.virtual_pipeline_model_parallel_size is not None:
        interleaved_schedule_memory_penalty = 1 + (
            (args.pipeline_model_parallel_size - 1)
            / (args.pipeline_model_parallel_size * args.virtual_pipeline_model_parallel_size))
        activation_memory *= interleaved_schedule_memory_penalty
    if args.virtual_pipeline_model_parallel_size is None and args.pipeline_model_parallel_size > 1:
        if num_microbatches is not None:
            activation_memory *= min(1, num_microbatches / args.pipeline_model_parallel_size)
    return activation_memory


def ref_activation_sp(args, num_microbatches):
    # l. 308-379
    activation_memory = (args.seq_length * args.micro_batch_size * args.hidden_size) * (
        18 + (4 * (args.ffn_hidden_size / args.hidden_size)))
    activation_memory *= args.num_layers
    activation_memory += 8 * args.seq_length * args.micro_batch_size * args.pipeline_model_parallel_size
    activation_memory += (args.seq_length * args.micro_batch_size * args.hidden_size
                          * args.pipeline_model_parallel_size)
    activation_memory = ref_pipeline(args, activation_memory, num_microbatches)
    if args.pipeline_model_parallel_size == 1:
        activation_memory += (args.seq_length * args.micro_batch_size * args.hidden_size * 4
                              * (1 + (args.padded_vocab_size / args.hidden_size)))
    return activation_memory / args.tensor_model_parallel_size


def ref_activation_without_sp(args, num_microbatches):
    # l. 382-453
    per_layer_memory = (args.seq_length * args.micro_batch_size * args.hidden_size
                        * (10 + (24 / args.tensor_model_parallel_size)))
    total_activation_memory = per_layer_memory * args.num_layers
    total_activation_memory += 8 * args.seq_length * args.micro_batch_size * args.pipeline_model_parallel_size
    total_activation_memory += (args.seq_length * args.micro_batch_size * args.hidden_size
                                * args.pipeline_model_parallel_size)
    total_activation_memory = ref_pipeline(args, total_activation_memory, num_microbatches)
    if args.pipeline_model_parallel_size == 1:
        logits_size = args.seq_length * args.micro_batch_size * args.padded_vocab_size
        logits_size /= args.tensor_model_parallel_size
        final_ln_output = args.seq_length * args.micro_batch_size * args.hidden_size
        total_activation_memory += (logits_size + final_ln_output) * 2
    overhead_factor = 1.05
    total_activation_memory *= overhead_factor
    return total_activation_memory


def ref_report(args, num_microbatches):
    # l. 456-486: returns the three figures in "MB" (MiB) and the printed line
    w = ref_weight_and_optimizer(args) / NUM_BYTES_IN_MEGABYTE
    if args.sequence_parallel and args.recompute_granularity == 'selective':
        a = ref_activation_sp(args, num_microbatches) / NUM_BYTES_IN_MEGABYTE
    else:
        a = ref_activation_without_sp(args, num_microbatches) / NUM_BYTES_IN_MEGABYTE
    total = w + a
    line = (f"Theoretical memory footprints: weight and optimizer={w:.2f} MB, "
            f"activation={a:.2f} MB, total={total:.2f} MB")
    return w, a, total, line


# --- the published configurations as Megatron's args, written out by hand -----------------------

def gpt3_175b(t, **kw):
    # Megatron-LM examples/gpt3/train_gpt3_175b_distributed.sh (l. 29-33: 96 layers, hidden 12288,
    # 96 heads, seq 2048); GPT-2 BPE vocabulary 50257; arguments.py defaults ffn 4h, kv_channels h/a
    return dict(num_layers=96, hidden_size=12288, ffn_hidden_size=4 * 12288, num_attention_heads=96,
                kv_channels=128, group_query_attention=False, num_query_groups=None, swiglu=False,
                normalization="LayerNorm", add_bias_linear=True, untie_embeddings_and_output_weights=False,
                padded_vocab_size=ref_padded_vocab(50257, 128, t), seq_length=2048, micro_batch_size=1,
                num_experts=None, **kw)


def gpt2_small(t, **kw):
    # GPT-2 small (Radford et al. 2019): 12 layers, 768 hidden, 12 heads, 1024 positions
    return dict(num_layers=12, hidden_size=768, ffn_hidden_size=3072, num_attention_heads=12, kv_channels=64,
                group_query_attention=False, num_query_groups=None, swiglu=False, normalization="LayerNorm",
                add_bias_linear=True, untie_embeddings_and_output_weights=False,
                padded_vocab_size=ref_padded_vocab(50257, 128, t), seq_length=1024, micro_batch_size=1,
                num_experts=None, **kw)


def llama3_8b(t, **kw):
    # Llama-3-8B config.json: 32 layers, hidden 4096, intermediate 14336, 32 heads, 8 KV heads,
    # head_dim 128, vocab 128256, RMSNorm, SwiGLU, untied; seq 8192 (Megatron-LM
    # examples/llama/train_llama3_8b_h100_fp8.sh)
    return dict(num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, kv_channels=128,
                group_query_attention=True, num_query_groups=8, swiglu=True, normalization="RMSNorm",
                add_bias_linear=False, untie_embeddings_and_output_weights=True,
                padded_vocab_size=ref_padded_vocab(128256, 128, t), seq_length=8192, micro_batch_size=1,
                num_experts=None, **kw)


def llama2_7b(t, **kw):
    # Llama-2-7b config.json: 32 layers, hidden 4096, intermediate 11008, 32 heads (MHA), vocab 32000
    return dict(num_layers=32, hidden_size=4096, ffn_hidden_size=11008, num_attention_heads=32, kv_channels=128,
                group_query_attention=False, num_query_groups=None, swiglu=True, normalization="RMSNorm",
                add_bias_linear=False, untie_embeddings_and_output_weights=True,
                padded_vocab_size=ref_padded_vocab(32000, 128, t), seq_length=4096, micro_batch_size=1,
                num_experts=None, **kw)


def mixtral_8x7b(t, **kw):
    # Mixtral-8x7B config.json: Llama-shaped, 8 experts of width 14336, top-2, vocab 32000
    return {**llama2_7b(t), "ffn_hidden_size": 14336, "group_query_attention": True, "num_query_groups": 8,
            "num_experts": 8, "moe_router_topk": 2, "moe_ffn_hidden_size": 14336, **kw}


def layout_args(t, p, d, *, v=None, e=1, etp=1, c=1, dist=False, sp=False, recompute=None):
    return dict(tensor_model_parallel_size=t, pipeline_model_parallel_size=p, data_parallel_size=d,
                world_size=t * p * c * d, virtual_pipeline_model_parallel_size=v, expert_model_parallel_size=e,
                expert_tensor_parallel_size=etp, use_distributed_optimizer=dist, sequence_parallel=sp,
                recompute_granularity=recompute)


# (costgraph model, config, Layout, hand-written Megatron args, num_microbatches)
CASES = [
    # GPT-3 175B as in Megatron's example script: t 8, p 16 (l. 56-57), 1024 GPUs, SP + selective
    ("gpt", "gpt3-175b", Layout(t=8, p=16, gpus=1024, sp=True, recompute="selective", zero=1, m=64),
     gpt3_175b(8, **layout_args(8, 16, 8, sp=True, recompute="selective", dist=True)), 64),
    # one node, TP 8 + SP + selective, no PP: the output-layer term, no distributed optimizer
    ("gpt", "gpt3-175b", Layout(t=8, gpus=8, sp=True, recompute="selective"),
     gpt3_175b(8, **layout_args(8, 1, 1, sp=True, recompute="selective")), 1),
    # interleaved, v = 3 (6 layers a stage, 2 a chunk), full recompute (charged as none), ×1.05 path
    ("gpt", "gpt3-175b", Layout(t=8, p=16, gpus=512, schedule="interleaved", v=3, m=32, recompute="full", zero=1),
     gpt3_175b(8, **layout_args(8, 16, 4, v=3, recompute="full", dist=True)), 32),
    # 1F1B with fewer micro-batches than stages: × min(1, 4/8); SP without selective (not divided)
    ("gpt", "gpt3-175b", Layout(t=4, p=8, gpus=64, m=4, sp=True),
     gpt3_175b(4, **layout_args(4, 8, 2, sp=True)), 4),
    # GPT-2 small on one device
    ("gpt", "gpt2", Layout(), gpt2_small(1, **layout_args(1, 1, 1)), 1),
    # Llama-3-8B: TP 2, PP 2, distributed optimizer over d = 2
    ("llama", "llama-3-8b", Layout(t=2, p=2, gpus=8, zero=1, m=8),
     llama3_8b(2, **layout_args(2, 2, 2, dist=True)), 8),
    # Llama-3-8B: TP 2 + SP + selective, no PP (untied: two V·h tables on the one stage)
    ("llama", "llama-3-8b", Layout(t=2, gpus=8, sp=True, recompute="selective", zero=1),
     llama3_8b(2, **layout_args(2, 1, 4, sp=True, recompute="selective", dist=True)), 1),
    # Llama-3-8B: TP 4, PP 4 interleaved v = 2, SP + selective, 48 GPUs (d = 3: 12/3 exact, 6 + 4)
    ("llama", "llama-3-8b", Layout(t=4, p=4, gpus=48, schedule="interleaved", v=2, m=8, sp=True,
                                   recompute="selective", zero=1),
     llama3_8b(4, **layout_args(4, 4, 3, v=2, sp=True, recompute="selective", dist=True)), 8),
    # Llama-2-7B on one device, no distributed optimizer
    ("llama", "llama-2-7b", Layout(), llama2_7b(1, **layout_args(1, 1, 1)), 1),
    # Llama-2-7B: distributed optimizer over d = 7 (12/7 is not a float: compared to the float)
    ("llama", "llama-2-7b", Layout(t=1, gpus=7, zero=1), llama2_7b(1, **layout_args(1, 1, 7, dist=True)), 1),
    # Mixtral-8x7B: EP 4, TP 2, distributed optimizer (experts over world // (etp·e·p) = 4)
    ("mixtral", "mixtral-8x7b", Layout(t=2, e=4, gpus=16, zero=1),
     mixtral_8x7b(2, **layout_args(2, 1, 8, e=4, dist=True)), 1),
]


@pytest.fixture(scope="module")
def models():
    return {n: costgraph.load(n) for n in ("gpt", "llama", "mixtral")}


@pytest.mark.parametrize("name,config,layout,args,m", CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_megatron_formula(models, name, config, layout, args, m):
    # Megatron-LM d98e8a64 theoretical_memory_usage.py l. 12-305 (weights and optimizer),
    # l. 308-379 / 382-453 (activations, path chosen at l. 466), l. 479 (total)
    model = models[name]
    est = megatron_estimate(model, model.values(config=config), layout)
    assert set(est) == set(KEYS)
    w, a, total, line = ref_report(SimpleNamespace(**args), m)
    got = {k: v / NUM_BYTES_IN_MEGABYTE for k, v in est.items()}
    for key, ref in zip(KEYS, (w, a, total)):
        assert got[key].is_Rational, (key, got[key])           # exact: no Float inside
        assert float(got[key]) == pytest.approx(ref, rel=1e-15, abs=0)
    # exact where Megatron's float arithmetic is exact (whole bytes that a double holds exactly)
    wb = ref_weight_and_optimizer(SimpleNamespace(**args))
    if wb == int(wb) and est["weights_and_optimizer"].is_Integer:
        assert est["weights_and_optimizer"] == int(wb)
    assert megatron_report(est) == line


def test_figures():
    # The figures the tests above check, written out (bytes; Megatron prints ÷ 2²⁰ as "MB").
    g, l = costgraph.load("gpt"), costgraph.load("llama")
    e = megatron_estimate(g, g.values(config="gpt3-175b"),
                          Layout(t=8, p=16, gpus=1024, sp=True, recompute="selective", zero=1, m=64))
    # weights: (12h²·96/16 + 51200·h)/8 TP-sharded (V padded to 128·8) + (4h·96 + 2h)/16 replicated
    # (the final norm too is divided by p, l. 253-255) = 1,437,894,144 params × (6 + 12/8) bytes
    assert e["weights_and_optimizer"] == 1_437_894_144 * sympy.Rational(15, 2) == 10_784_206_080
    # activations: (34sbh·96 + 8sb·16 + sbh·16) × min(1, 64/16) / 8
    assert e["activations"] == (34 * 2048 * 12288 * 96 + 8 * 2048 * 16 + 2048 * 12288 * 16) // 8 == 10_318_020_608
    assert megatron_report(e) == ("Theoretical memory footprints: weight and optimizer=10284.62 MB, "
                                  "activation=9840.03 MB, total=20124.65 MB")
    e = megatron_estimate(l, l.values(config="llama-3-8b"), Layout(t=2, p=2, gpus=8, zero=1, m=8))
    assert e["weights_and_optimizer"] == 24_091_582_464
    assert e["activations"] == sympy.Rational(124_370_190_336, 5)     # × 1.05 leaves a fifth of a byte
    # Llama-2-7B, one device: Megatron's parameter count is the exact one (no biases to omit,
    # vocabulary 32000 already a multiple of 128), × 18 bytes
    e = megatron_estimate(l, l.values(config="llama-2-7b"), Layout())
    assert e["weights_and_optimizer"] == 18 * LLAMA2_7B_PARAMS


def test_symbolic_forms():
    # TRAINING.md §2 / Megatron l. 317-379: SP + selective path, p = 1, per device
    g = costgraph.load("gpt")
    b, s, h, l, V = (g.graph.dims[n].symbol for n in "b s h l V".split())
    Vp = 1024 * sympy.ceiling(V / 1024)                           # padded to 128·t, t = 8
    e = megatron_estimate(g, None, Layout(t=8, sp=True, recompute="selective"))
    want = (s * b * h * (18 + 4 * 4) * l + 8 * s * b + s * b * h + 4 * s * b * h * (1 + Vp / h)) / 8
    assert sympy.expand(e["activations"] - want) == 0
    # the other path (l. 382-453): sbh(10 + 24/t)·L + 8sbp + sbhp, + 2(sbV/t + sbh) at p = 1, × 1.05
    e = megatron_estimate(g, None, Layout(t=8, recompute="full"))
    want = sympy.Rational(21, 20) * (s * b * h * (10 + 3) * l + 8 * s * b + s * b * h
                                     + 2 * (s * b * Vp / 8 + s * b * h))
    assert sympy.expand(e["activations"] - want) == 0
    # weights: 18 bytes × (12h² + 4h per layer, 2h final norm, V'h), nothing else (l. 82-103, 127)
    e = megatron_estimate(g, None, Layout(t=1))
    assert sympy.expand(e["weights_and_optimizer"] - 18 * ((12 * h**2 + 4 * h) * l + 2 * h
                                                           + h * 128 * sympy.ceiling(V / 128))) == 0
    # the interleaving penalty 1 + (p−1)/(p·v) and the 1F1B discount min(1, m/p), symbolic in m
    m = sympy.Symbol("m", positive=True, integer=True)
    one = megatron_estimate(g, None, Layout(t=8, p=4, m=m, sp=True, recompute="selective"))["activations"]
    base = (s * b * h * 34 * l + 8 * s * b * 4 + s * b * h * 4) / 8
    assert sympy.simplify(one - base * sympy.Min(1, m / 4)) == 0
    inter = megatron_estimate(g, None, Layout(t=8, p=4, m=8, schedule="interleaved", v=2, sp=True,
                                              recompute="selective"))["activations"]
    assert sympy.expand(inter - base * (1 + sympy.Rational(3, 8))) == 0


def test_faults_reproduced():
    # Megatron l. 466: only SP + selective takes the SP path; the others, whatever they keep, are
    # charged sbh(10 + 24/t): none = selective = full without SP, and SP alone changes nothing.
    g = costgraph.load("gpt")
    v = g.values(config="gpt3-175b")
    acts = {(r, sp): megatron_estimate(g, v, Layout(t=8, recompute=r, sp=sp))["activations"]
            for r in ("none", "selective", "full") for sp in (False, True)}
    assert len({x for k, x in acts.items() if k != ("selective", True)}) == 1
    # no s² term: doubling s at most doubles the activations (costgraph's eager figure quadruples its 5as/h part)
    v2 = {**v, g.graph.dims["s"].symbol: 4096}
    assert megatron_estimate(g, v2, Layout(t=8))["activations"] == 2 * acts[("none", False)]
    # no CP: c divides nothing (only the world size, which the dense estimate does not read)
    assert megatron_estimate(g, v, Layout(t=8, c=2, gpus=16)) == megatron_estimate(g, v, Layout(t=8, gpus=8))
    # MoE at the dense width: Mixtral's activations are those of the dense Llama of width i
    mx, ll = costgraph.load("mixtral"), costgraph.load("llama")
    vm = mx.values(config="mixtral-8x7b")
    dense = {ll.graph.dims[n].symbol: vm[mx.graph.dims[n].symbol] for n in "h a kv d i l V s b".split()}
    lay = Layout(t=2, gpus=8, sp=True, recompute="selective")
    assert megatron_estimate(mx, vm, lay)["activations"] == megatron_estimate(ll, dense, lay)["activations"]


def test_mapping_and_overrides():
    l = costgraph.load("llama")
    args = megatron_args(l, l.values(config="llama-3-8b"), Layout(t=4, p=2, gpus=16, zero=1))
    # the vocabulary padded to a multiple of 128·t = 512: 128256 → 251·512 = 128512
    assert (args.num_layers, args.hidden_size, args.ffn_hidden_size, args.num_attention_heads,
            args.num_query_groups, args.kv_channels, args.padded_vocab_size) == (32, 4096, 14336, 32, 8, 128, 128512)
    assert (args.swiglu, args.normalization, args.untie_embeddings_and_output_weights,
            args.use_distributed_optimizer, args.data_parallel_size) == (True, "RMSNorm", True, True, 2)
    g = costgraph.load("gpt")
    assert megatron_args(g, g.values(config="gpt2"), Layout(t=8, gpus=8)).padded_vocab_size == 51200
    unpadded = megatron_args(g, g.values(config="gpt2"), Layout(), make_vocab_size_divisible_by=1)
    assert unpadded.padded_vocab_size == 50257
    # families without a mapping, and options the estimate has no form for, are refused
    with pytest.raises(CostgraphValueError, match="no argument mapping"):
        megatron_estimate(costgraph.load("t5"), None, Layout())
    with pytest.raises(CostgraphValueError, match="no form for option 'geglu'"):
        megatron_estimate(costgraph.load("llama", options={"geglu": True}), None, Layout())
    with pytest.raises(CostgraphValueError, match="branches on pipeline_model_parallel_size"):
        megatron_estimate(g, None, Layout(p=sympy.Symbol("p", positive=True, integer=True)))
    assert MEGATRON_COMMIT == "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
    assert len(DIFFERENCES) >= 8


def test_beside_costgraph_gpt3():
    # GPT-3 175B, one node: t = 8, SP, selective recompute, eager attention, p = 1, policy
    # 'megatron' (18 B/param). Per layer both give Korthikanti's 34sbh/t. What is left over:
    g = costgraph.load("gpt")
    D = {n: g.graph.dims[n].symbol for n in g.graph.dims}
    b, s, h, l, V, s_max = (D[n] for n in "b s h l V s_max".split())
    # the loss as Megatron's theoretical_memory_usage.py counts it, 4 B a logit: --cross-entropy logits, named
    # (the default, Megatron-LM's unfused kernel, holds 2 B a logit more: DIFFERENCES, "output layer")
    lay = Layout(t=8, gpus=8, sp=True, recompute="selective", policy="megatron", attention="eager",
                 cross_entropy="logits")
    r = megatron_beside(g, None, lay)
    Vp = 1024 * sympy.ceiling(V / 1024)
    # weights: costgraph counts the biases Megatron omits (c_attn 3h and c_fc 4h split by t,
    # c_proj's two h replicated: 7h/8 + 2h a layer), the position table s_max·h (replicated),
    # and the vocabulary unpadded (V, not V' = 1024⌈V/1024⌉), all at 18 B
    assert sympy.expand(r["difference"]["weights_and_optimizer"]
                        - 18 * ((sympy.Rational(7, 8) + 2) * h * l + s_max * h + h * (V - Vp) / 8)) == 0
    # activations: fp32 logits over V, not V' (4sb(V − V')/t); token ids as int64 on every TP
    # rank (8sb, where Megatron divides its 8sbp by t) and the position ids (8s)
    assert sympy.expand(r["difference"]["activations"] - (4 * s * b * (V - Vp) / 8 + 8 * b * s - b * s + 8 * s)) == 0
    v = g.values(config="gpt3-175b")
    r = megatron_beside(g, v, lay)
    assert dict(r["megatron"]) == {"weights_and_optimizer": 392_879_849_472, "activations": 10_335_815_680,
                                   "total": 403_215_665_152}
    assert r["costgraph"]["total"] == training_memory(g.graph, lay).stages[0].memory["total"].xreplace(v)
    assert dict(r["costgraph"]) == {"weights_and_optimizer": 393_367_809_024, "activations": 10_334_880_768,
                                    "total": 403_702_689_792}


def test_beside_costgraph_llama3():
    # Llama-3-8B, t = 2, SP, selective, flash attention, distributed optimizer over d = 4.
    # Weights agree to the byte (no biases, V = 128256 is a multiple of 256, 6 + 12/4 = 9 B).
    # Activations: Megatron's GPT layer sbh(18 + 4f/h)/t does not fit a Llama layer. costgraph keeps
    # per layer sb/t·(12h + 4·kv·d + 6i + 4a): the gated MLP keeps the fused SwiGLU's input (gate and
    # up, 4sbi/t) and the down input (2sbi/t) where Megatron's formula has 4sbf/t, flash attention
    # keeps K and V with their kv heads, no dropout masks (−2sbh/t), and the fp32 log-sum-exp (4abs/t). Outside the layers costgraph has no embedding
    # dropout mask (Megatron's sbhp/t), token ids 8sb per rank (Megatron 8sbp/t) and the final-norm
    # and head inputs 2·sbh/t (Megatron 2sbh/t + its sbh(4V/h) ≡ fp32 logits, which agree).
    m = costgraph.load("llama")
    D = {n: m.graph.dims[n].symbol for n in m.graph.dims}
    b, s, h, a, i, l, kv, d = (D[n] for n in "b s h a i l kv d".split())
    # the fp32 logits as Megatron's formula counts them (4 B a logit): --cross-entropy logits, named
    lay = Layout(t=2, gpus=8, zero=1, policy="megatron", attention="flash", recompute="selective", sp=True,
                 cross_entropy="logits")
    v = m.values(config="llama-3-8b")
    r = megatron_beside(m, v, lay)
    assert r["difference"]["weights_and_optimizer"] == 0
    assert r["megatron"]["activations"] == 19_365_134_336
    assert r["costgraph"]["activations"] == 20_438_908_928
    per_layer = s * b * (12 * h + 4 * kv * d + 6 * i + 4 * a - (18 * h + 4 * i)) / 2   # costgraph − Megatron, one layer
    rest = -s * b * h / 2 + 8 * s * b - 4 * s * b                   # outside the layers
    assert r["difference"]["activations"] == (l * per_layer + rest).xreplace(v) == 1_073_774_592
