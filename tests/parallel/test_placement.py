"""The Placement (issue 15, item 2): who holds which part of each tensor,
computed once per graph and layout (costgraph.parallel.placement), and the
analyses reading it — factored optimizers under tensor parallelism among them."""

import json

import pytest
import sympy

import costgraph
import costgraph.parallel.placement as placement_module
import costgraph.parallel.tensor as tensor_module
from costgraph.cli import main
from costgraph.parallel.communication import communication
from costgraph.parallel.layout import Layout
from costgraph.parallel.placement import ExpertGroup, Group, WeightShard, expert_groups, placement
from costgraph.engine.symbols import dim
from costgraph.training.memory import Layout as MemoryLayout, training_memory
from costgraph.training.states import model_states
from costgraph.training.validity import expert_counts

E, k, l, h, i = (dim(n) for n in ("E", "k", "l", "h", "i"))
ONE, TWO = sympy.Integer(1), sympy.Integer(2)


@pytest.fixture(scope="module")
def gpt():
    return costgraph.load("gpt")


def test_layout_lives_in_parallel():
    # training.memory keeps the name by a plain import: one class
    assert MemoryLayout is Layout
    assert Layout.__module__ == "costgraph.parallel.layout"


def test_gpt_under_tp2_splits_weights_per_axis(gpt):
    # Megatron (Shoeybi et al. 2019 §3), PyTorch's [out, in] weights: column-parallel c_attn, c_fc and
    # their biases split the output features (axis 0); row-parallel c_proj the input features (axis 1),
    # its bias whole; the vocabulary-parallel table wte its rows (axis 0); wpe and the norms whole
    pl = placement(gpt.graph, Layout(t=2, gpus=4))
    assert pl.tp.column == ["layers/attn/c_attn", "layers/mlp/c_fc", "lm_head"]
    assert pl.tp.row == ["layers/attn/c_proj", "layers/mlp/c_proj"]
    assert pl.tp.vocab == ["wte"]
    assert pl.shards == {
        "wte/weight": WeightShard((TWO, ONE)),
        "layers/attn/c_attn/weight": WeightShard((TWO, ONE)),
        "layers/attn/c_attn/bias": WeightShard((TWO,)),
        "layers/attn/c_proj/weight": WeightShard((ONE, TWO)),
        "layers/mlp/c_fc/weight": WeightShard((TWO, ONE)),
        "layers/mlp/c_fc/bias": WeightShard((TWO,)),
        "layers/mlp/c_proj/weight": WeightShard((ONE, TWO)),
    }
    assert pl.weight_shard("layers/attn/c_proj/bias") == WeightShard((ONE,))
    assert pl.weight_divisor("wpe/weight") == 1 and pl.weight_divisor("layers/mlp/c_fc/weight") == 2
    # 4 GPUs = t 2 × d 2: TP at stride 1, the DP × CP group of d·c = 2 at stride t = 2
    assert pl.groups["tp"] == Group(TWO, ONE) and pl.groups["dp"] == Group(TWO, TWO)
    assert pl.groups["pp"] == Group(ONE, sympy.Integer(4))


def test_mixtral_under_ep2_expert_groups_and_divisors():
    mixtral = costgraph.load("mixtral").graph
    experts = expert_groups(mixtral)
    # one `repeat E as ... active k` group per layer: E experts, k per token, reading the normed
    # hidden state, called l times per model pass
    assert experts == {"layers/layer/mlp/experts": ExpertGroup(
        "layers/layer/mlp/experts", E, k, ("layers/layer/post_attention_layernorm:0",), l)}
    assert expert_counts(mixtral) == [E]
    ids = ["layers/layer/mlp/experts/expert/" + n + "/weight" for n in ("gate_proj", "up_proj", "down_proj")]
    # 8 GPUs, e = 2, etp = 1: each device holds E/2 experts whole; expert DP = d·c·t/(e·etp) = 8/2 = 4
    # devices at stride etp·e = 2 (Megatron's expert grid); EP 2 at stride etp = 1
    pl = placement(mixtral, Layout(e=2, gpus=8))
    assert set(pl.expert_weights) == set(ids)
    assert {w: pl.shards[w] for w in ids} == {w: WeightShard((ONE, ONE), TWO) for w in ids}
    assert set(pl.shards) == set(ids)   # the router and attention stay whole
    assert pl.groups["expert_dp"] == Group(sympy.Integer(4), TWO) and pl.groups["ep"] == Group(TWO, ONE)
    assert pl.groups["dp"] == Group(sympy.Integer(8), ONE)
    # t = 2 with expert TP etp = t: the experts keep their TP split too (gate/up column, down row);
    # d = 4, expert DP = 4·1·2/(2·2) = 2 at stride 4
    pl = placement(mixtral, Layout(t=2, e=2, etp=2, gpus=8))
    assert pl.shards[ids[0]] == WeightShard((TWO, ONE), TWO) and pl.shards[ids[2]] == WeightShard((ONE, TWO), TWO)
    assert pl.weight_divisor(ids[0]) == 4
    assert pl.groups["expert_dp"] == Group(TWO, sympy.Integer(4)) and pl.groups["ep"] == Group(TWO, TWO)


def test_pipeline_membership_p2(gpt):
    pl = placement(gpt.graph, Layout(p=2, gpus=2))
    first, last = pl.stages
    # l/2 layers each; the embeddings (and their sum and dropout) on the first stage, the final norm and
    # the head on the last, the tied table on both (Megatron's copy on the last stage)
    assert first.layers == {"layers": l / 2} and last.layers == {"layers": l / 2}
    assert first.nodes == {"wte", "wpe", "add", "drop"} and last.nodes == {"ln_f", "lm_head"}
    assert first.weights == {"wte/weight", "wpe/weight"}
    assert last.weights == {"ln_f/weight", "ln_f/bias", "wte/weight"}
    # 1F1B, m = p = 2: stage i keeps min(p − i, m) micro-batches
    assert (first.in_flight, last.in_flight) == (2, 1)
    view = pl.stage("first")
    assert view.tied_weights() == {"wte/weight"} and view.sends(1) == (1, 0) and view.units() == l / 2 + 1
    assert pl.stage("last").sends(1) == (0, 1) and pl.stage("last").has_head()
    assert pl.groups["tied_embedding"] == Group(TWO, ONE)   # stages 0 and 1, (p − 1)·t·c·d = 1 apart


def test_analyses_of_one_layout_build_one_placement(gpt, monkeypatch):
    from costgraph.hardware import preset
    from costgraph.training.steptime import step_time

    builds, walks = [], []
    build, walk = placement_module._build, tensor_module._walk
    monkeypatch.setattr(placement_module, "_build", lambda *a: builds.append(1) or build(*a))
    monkeypatch.setattr(tensor_module, "_walk", lambda *a: walks.append(1) or walk(*a))
    placement_module.cache_clear(gpt.graph)
    L = Layout(t=2, p=2, gpus=8, sp=True)
    training_memory(gpt.graph, L)
    communication(gpt.graph, L)
    step_time(gpt.graph, L, preset("h100-sxm"))
    training_memory(gpt.graph, Layout(t=2, p=2, gpus=8, sp=True, zero=1, optimizer="adafactor"))
    assert (len(builds), len(walks)) == (1, 1)   # ZeRO and the optimizer do not change who holds what
    communication(gpt.graph, Layout(t=2, p=2, gpus=8, sp=False))
    assert (len(builds), len(walks)) == (2, 2)


# Adafactor under TP (Shazeer & Stern 2018, Alg. 4-5; torch.optim.Adafactor): one fp32 row statistic per
# row and one column statistic per column of the LOCAL [out, in] shard; a vector keeps a full fp32 second
# moment. Llama-2-7B (h 4096, i 11008, V 32000, l 32, a = kv = 32 heads of 128), t = 2:
#   q, k, v [4096, 4096] column → [2048, 4096]: 2048 + 4096 = 6,144; o [4096, 4096] row → [4096, 2048]: 6,144
#   gate, up [11008, 4096] column → [5504, 4096]: 5504 + 4096 = 9,600; down [4096, 11008] row → [4096, 5504]: 9,600
#   two RMSNorm vectors, whole: 2 × 4,096 = 8,192
#   per layer 4 × 6,144 + 3 × 9,600 + 8,192 = 61,568; × 32 layers = 1,970,176
#   embed_tokens [32000, 4096] vocab rows → [16000, 4096]: 20,096; lm_head column → the same 20,096; norm 4,096
#   in all 2,014,464 fp32 values = 8,057,856 bytes
ADAFACTOR_TP2 = 8_057_856
# The local parameters: per layer 4 × 4096²/2 + 3 × 4096·11008/2 + 2 × 4096 = 101,195,776; × 32 =
# 3,238,264,832; + 2 × 32000·4096/2 + 4096 = 3,369,340,928 (the mixed policy's fp32 master: 4 bytes each)
LOCAL_PARAMS_TP2 = 3_369_340_928


def test_adafactor_under_tp_factors_the_local_shard(capsys):
    llama = costgraph.load("llama")
    vals = llama.values(config="llama-2-7b")
    L = Layout(t=2, gpus=2, optimizer="adafactor", policy="fp32")
    mem = training_memory(llama.graph, L).stages[0].memory
    assert mem["optimizer"].xreplace(vals) == ADAFACTOR_TP2
    pl = placement(llama.graph, L)
    gate = "layers/layer/mlp/gate_proj/weight"
    one = model_states(llama.graph, policy="fp32", optimizer="adafactor", dp=1, shard=pl.shards,
                       select=lambda w: w == gate)
    assert one["optimizer"] == sympy.expand(4 * l * (i / 2 + h))
    assert one["optimizer"].xreplace(vals) == 32 * 9_600 * 4
    # the command of the issue answers (it failed with a hint meant for API callers)
    assert main(["train", "llama", "--config", "llama-2-7b", "--gpus", "2", "--tp", "2", "--optimizer", "adafactor",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["memory"]["optimizer"]["value"] == 4 * LOCAL_PARAMS_TP2 + ADAFACTOR_TP2 == 13_485_421_568


def test_adafactor_with_expert_parallelism_factors_each_local_expert():
    # Mixtral with e = 2 (etp = 1): a device holds E/2 whole experts, each factored on its own:
    # gate and up [i, h]: i + h; down [h, i]: h + i — (E/2)·l·3·(h + i) fp32 values
    mixtral = costgraph.load("mixtral")
    pl = placement(mixtral.graph, Layout(e=2, gpus=2))
    ids = {"layers/layer/mlp/experts/expert/" + n + "/weight" for n in ("gate_proj", "up_proj", "down_proj")}
    s = model_states(mixtral.graph, policy="fp32", optimizer="adafactor", dp=1, shard=pl.shards,
                     select=lambda w: w in ids)
    assert sympy.expand(s["optimizer"] - 4 * E / 2 * l * 3 * (h + i)) == 0
