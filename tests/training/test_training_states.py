"""Model states per device (issue 7, items 1–2): precision policies, optimizers,
ZeRO 0–3 / FSDP / HSDP, from a model's graph and from a bare parameter count.
Every golden value cites its source."""

from __future__ import annotations

import math
import re
from importlib.resources import files

import pytest
import sympy

import costgraph
from costgraph import CostgraphValueError
from costgraph.training import (DP, PSI, bare_model_states, deepspeed_gb, deepspeed_zero_estimate,
                                largest_module_params, model_states, optimizers, output_heads, policies)

N_d = DP
GPT2_PARAMS = 124_439_808          # DOMAIN.md §1: GPT-2 small, exactly
LLAMA2_7B_PARAMS = 6_738_415_616   # DOMAIN.md §1: LLaMA-2-7B


@pytest.fixture(scope="module")
def gpt():
    return costgraph.load("gpt")


@pytest.fixture(scope="module")
def llama():
    return costgraph.load("llama")


def at(model, expr, config, **more):
    return expr.subs({**model.values(config=config), **{sympy.Symbol(k, positive=True, integer=True): v
                                                         for k, v in more.items()}})


# --- the ZeRO paper -------------------------------------------------------------------------

def test_zero_paper_figure_1():
    # Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
    # Models", Figure 1 and §5: Ψ = 7.5 B, N_d = 64, K = 12 (mixed precision Adam):
    # baseline (2+2+K)Ψ = 120 GB; P_os 2Ψ+2Ψ+KΨ/N_d = 31.4 GB; P_os+g 2Ψ+(2+K)Ψ/N_d = 16.6 GB;
    # P_os+g+p (2+2+K)Ψ/N_d = 1.9 GB.
    forms = [16 * PSI, 4 * PSI + 12 * PSI / N_d, 2 * PSI + 14 * PSI / N_d, 16 * PSI / N_d]
    exact = [120_000_000_000, 31_406_250_000, 16_640_625_000, 1_875_000_000]
    paper_gb = [120, 31.4, 16.6, 1.9]
    for stage in range(4):
        sym = bare_model_states(policy="mixed", optimizer="adam", zero=stage)
        assert sympy.expand(sym["total"] - forms[stage]) == 0
        num = bare_model_states(7_500_000_000, policy="mixed", optimizer="adam", zero=stage, dp=64)
        assert num["total"] == exact[stage]
        assert round(int(num["total"]) / 1e9, 1) == paper_gb[stage]
    # the parts of stage 1: parameters and gradients whole, K = 12 (master 4 + moments 8) sharded
    s1 = bare_model_states(policy="mixed", zero=1)
    assert (s1["weights"], s1["gradients"], s1["optimizer"], s1["master"]) == \
        (2 * PSI, 2 * PSI, 12 * PSI / N_d, 4 * PSI / N_d)


# --- the seeds and Megatron ---------------------------------------------------------------

def test_bytes_per_parameter_of_each_policy():
    # DOMAIN.md §2 (seeds 002, 003): fp32 16N, bf16 params+grads with fp32 moments 12N,
    # fp16 + fp32 copies of params and grads 20N; ZeRO §3.1 16N (K = 12);
    # Megatron-LM megatron/training/theoretical_memory_usage.py: 18 bytes per parameter.
    expected = {"fp32": 16, "bf16": 12, "mixed": 16, "megatron": 18, "mixed-fp32-grads": 20}
    for name, per in expected.items():
        assert bare_model_states(policy=name, optimizer="adam")["total"] == per * PSI
    # 175B in fp32 with Adam: 2.8 TB; with bf16 and fp32 moments 2.1e12 B (DOMAIN.md §2)
    assert bare_model_states(175 * 10**9, policy="fp32")["total"] == 2_800_000_000_000
    assert bare_model_states(175 * 10**9, policy="bf16")["total"] == 2_100_000_000_000


def test_bf16_pure_automodel_states():
    # NeMo AutoModel @ 809f199: the model built in bf16 (auto_model.py, torch_dtype "auto" -> torch.bfloat16),
    # no fp32 master (train_ft.py), torch.optim.Adam whose moments are zeros_like(p) (torch/optim/adam.py):
    # 2 (parameter) + 2 (gradient) + 2 + 2 (moments) = 8 bytes a parameter; FSDP2 (ZeRO-3) shards all of it.
    assert bare_model_states(policy="bf16-pure", optimizer="adam")["total"] == 8 * PSI
    assert sympy.expand(bare_model_states(policy="bf16-pure", zero=3)["total"] - 8 * PSI / N_d) == 0


def test_deepseek_v3_states():
    # DeepSeek-V3 report §3.3.3: fp32 master weights (4) and gradients (4), BF16 AdamW moments (2 + 2), beside
    # the bf16 weight (2): 14 bytes a parameter; the distributed optimizer (ZeRO 1) shards master and moments.
    assert bare_model_states(policy="fp8-deepseek-v3", optimizer="adam")["total"] == 14 * PSI
    assert sympy.expand(bare_model_states(policy="fp8-deepseek-v3", zero=1)["total"] - (6 + 8 / N_d) * PSI) == 0


def test_zero3_gathered_fsdp2_keeps_the_root(llama):
    # Llama-3-8B under ZeRO-3 on 8 devices, mixed (2 B weights): the shards 8,030,261,248 × 2 / 8, plus what
    # stays gathered. largest: the root unit (embedding + head 2 × 128,256 × 4,096 + final norm 4,096 =
    # 1,050,677,248 parameters, × 2 B), larger than a layer's; fsdp2 (FSDP2 does not reshard its root after
    # the forward, torch/distributed/fsdp/_fully_shard/_fsdp_state.py FSDPState._lazy_init): the root unit
    # plus one layer's (4,096·4,096·2 + 1,024·4,096·2 + 14,336·4,096·3 + 2 norms = 218,112,000, × 2 B).
    m = llama
    v = m.values("llama-3-8b")
    shards, root, layer = 8_030_261_248 * 2 // 8, 1_050_677_248 * 2, 218_112_000 * 2
    for gathered, expected in (("largest", shards + root), ("fsdp2", shards + root + layer)):
        r = m.train(values=v, gpus=8, zero=3, zero3_gathered=gathered)
        assert r.most_loaded().memory["weights"].xreplace(v) == expected


def test_megatron_distributed_optimizer():
    # Megatron-LM docs/distrib_optimizer.md: bytes per parameter with the distributed optimizer
    # over d data-parallel ranks: fp16 param + fp16 grads 4 + 16/d; bf16 param + fp32 grads
    # 6 + 12/d (also theoretical_memory_usage.py); fp32 param + fp32 grads 8 + 8/d.
    # It shards the optimizer states and main params only: ZeRO stage 1.
    for name, form in {"mixed-fp32-grads": 4 + 16 / N_d, "megatron": 6 + 12 / N_d, "fp32": 8 + 8 / N_d}.items():
        assert sympy.expand(bare_model_states(policy=name, zero=1)["total"] - form * PSI) == 0


# --- the graph: GPT-2 and Llama -------------------------------------------------------------

def test_gpt2_states_from_the_graph(gpt):
    # ZeRO §3.1 with GPT-2 small's exact count (DOMAIN.md §1): 16Ψ, and 4Ψ + 12Ψ/8 at stage 1
    s = model_states(gpt.graph, policy="mixed", optimizer="adam")
    assert at(gpt, s["total"], "gpt2") == 16 * GPT2_PARAMS
    s1 = model_states(gpt, policy="mixed", optimizer="adam", zero=1, dp=8)
    assert at(gpt, s1["total"], "gpt2") == 4 * GPT2_PARAMS + 12 * GPT2_PARAMS // 8
    # symbolic in the model's dimensions and in N_d
    s2 = model_states(gpt.graph, policy="mixed", zero=2)
    params = gpt.costs().params
    assert sympy.expand(s2["total"] - (2 * params + 14 * params / N_d)) == 0


def test_zero3_gathered_unit(gpt, llama):
    # Convention (states.py): stage 3 adds the full parameters of the largest unit: one
    # instance of an outermost repeat group's body, or the weights outside every group.
    g = model_states(gpt.graph, policy="mixed", zero=3)["gathered"]
    h, l, V, s_max = (sympy.Symbol(n, positive=True, integer=True) for n in ("h", "l", "V", "s_max"))
    # one GPT layer 12h² + 13h; the rest Vh + s_max·h + 2h (DOMAIN.md §1); 2 bytes each
    assert g == sympy.Max(2 * (12 * h**2 + 13 * h), 2 * (V * h + s_max * h + 2 * h))
    s = model_states(gpt.graph, policy="mixed", zero=3, dp=8)
    # GPT-2: the embeddings (38,597,376 + 786,432 + 1,536) outweigh a layer (7,087,872)
    assert at(gpt, s["gathered"], "gpt2") == 2 * (50257 * 768 + 1024 * 768 + 2 * 768)
    assert at(gpt, s["total"], "gpt2") == 16 * GPT2_PARAMS // 8 + 2 * (50257 * 768 + 1024 * 768 + 2 * 768)
    # Llama-2-7B: a layer 4h² + 3hi + 2h = 202,383,360; the rest 2Vh + h = 262,148,096
    lg = model_states(llama.graph, policy="mixed", zero=3, dp=8)["gathered"]
    assert at(llama, lg, "llama-2-7b") == 2 * 262_148_096


def test_hsdp_and_fsdp(gpt):
    # HSDP: shard within groups of g, replicate across dp/g (PyTorch HYBRID_SHARD): the states
    # of 64 GPUs in groups of 8 are those of FSDP over 8.
    hsdp = bare_model_states(policy="mixed", zero=3, dp=64, hsdp_group=8)
    assert hsdp["total"] == 2 * PSI
    assert hsdp == bare_model_states(policy="mixed", zero=3, dp=8)
    g = sympy.Symbol("g", positive=True, integer=True)
    assert bare_model_states(policy="mixed", zero=3, hsdp_group=g)["total"] == 16 * PSI / g
    with pytest.raises(CostgraphValueError, match="does not divide"):
        bare_model_states(policy="mixed", zero=3, dp=64, hsdp_group=6)


def test_frozen_and_sharded_weights(gpt):
    # LoRA's frozen base (issue 7 item 6): parameters only, no gradients, master or states
    s = model_states(gpt.graph, policy="mixed", optimizer="adam", frozen=lambda w: True)
    assert at(gpt, s["total"], "gpt2") == 2 * GPT2_PARAMS
    assert s["gradients"] == s["optimizer"] == 0
    # freezing the token embedding only (an id collection works as well)
    s = model_states(gpt.graph, policy="mixed", frozen={"wte/weight"})
    assert at(gpt, s["total"], "gpt2") == 16 * GPT2_PARAMS - 14 * 50257 * 768
    # a model-parallel divisor per weight (supplied by the TP analysis later)
    t = sympy.Symbol("t", positive=True, integer=True)
    whole = model_states(gpt.graph, policy="fp32", optimizer="sgd")["weights"]
    part = model_states(gpt.graph, policy="fp32", optimizer="sgd",
                        shard={"layers/attn/c_attn/weight": t, "layers/mlp/c_fc/weight": (t, 1)})
    h, l = sympy.Symbol("h", positive=True, integer=True), sympy.Symbol("l", positive=True, integer=True)
    assert sympy.expand(whole - part["weights"] - 4 * l * (3 * h * h + 4 * h * h) * (1 - 1 / t)) == 0
    with pytest.raises(CostgraphValueError, match="which axis"):
        model_states(gpt.graph, optimizer="adafactor", shard={"layers/mlp/c_fc/weight": t})
    with pytest.raises(CostgraphValueError, match="no weight"):
        model_states(gpt.graph, shard={"layers/mlp/nope/weight": t})



def test_states_of_one_graph_kept_per_argument(gpt):
    # model_states keeps each answer in the graph's cache (CostGraph.memo): every argument is part of the
    # key. ZeRO paper §3.1: mixed-precision Adam holds 16 bytes a parameter (2 + 2 + 12), GPT-2 small's Ψ.
    full = model_states(gpt.graph, policy="mixed", optimizer="adam")
    assert at(gpt, full["total"], "gpt2") == 16 * GPT2_PARAMS
    full["total"] = sympy.Integer(0)   # the caller's copy: the cache keeps its own
    assert at(gpt, model_states(gpt.graph, policy="mixed", optimizer="adam")["total"], "gpt2") == 16 * GPT2_PARAMS
    # two stages' selections (the token embedding, 50257 × 768; the rest) add up to the whole
    wte = model_states(gpt.graph, policy="mixed", optimizer="adam", select=lambda w: w == "wte/weight")
    rest = model_states(gpt.graph, policy="mixed", optimizer="adam", select=lambda w: w != "wte/weight")
    assert at(gpt, wte["total"], "gpt2") == 16 * 50257 * 768
    assert at(gpt, rest["total"], "gpt2") == 16 * (GPT2_PARAMS - 50257 * 768)
    # a ZeRO-1 degree of 8 and 4 (12 bytes of the 16 sharded: the paper's 4Ψ + 12Ψ/N_d)
    for n in (8, 4):
        z1 = model_states(gpt.graph, policy="mixed", optimizer="adam", zero=1, dp=n)
        assert at(gpt, z1["total"], "gpt2") == 4 * GPT2_PARAMS + 12 * GPT2_PARAMS // n

# --- DeepSpeed's estimators -------------------------------------------------------------------

def test_deepspeed_zero_estimators_on_llama_2_7b(llama):
    # DeepSpeed (deepspeedai/DeepSpeed @ edaa7221, deepspeed/runtime/zero/stage_1_and_2.py
    # estimate_zero2_model_states_mem_needs, offload off):
    #   gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
    # stage3.py estimate_zero3_model_states_mem_needs, offload off:
    #   gpu_mem = 4 * largest_layer_params + int(18 * total_params / total_gpus)
    # printed as f"{gpu_mem/2**30:6.2f}GB" (GiB labelled GB). One node of 8 GPUs.
    psi = llama.costs().evaluate(config="llama-2-7b")["params"]
    assert psi == LLAMA2_7B_PARAMS
    z2 = deepspeed_zero_estimate(psi, stage=2, gpus=8)
    assert z2 == 2 * psi + int(18 * psi / 8) == 28_638_266_368
    assert deepspeed_gb(z2) == " 26.67GB"
    # largest_layer_params: the largest module's own parameters (model_to_params), the
    # 32000 × 4096 embedding (or the untied head), not a Transformer layer
    largest = at(llama, largest_module_params(llama.graph), "llama-2-7b")
    assert largest == 32000 * 4096
    z3 = deepspeed_zero_estimate(psi, stage=3, gpus=8, largest_layer_params=largest)
    assert z3 == 4 * largest + int(18 * psi / 8) == 15_685_723_136
    assert deepspeed_gb(z3) == " 14.61GB"
    assert round(int(z3) / 1e9, 2) == 15.69   # what "GB" would mean in SI units
    # Their 18 = 2 grads16 + 4 grads32 + 4 params32 + 8 moments: costgraph's mixed-fp32-grads.
    ours2 = at(llama, model_states(llama.graph, policy="mixed-fp32-grads", zero=2, dp=8)["total"], "llama-2-7b")
    assert ours2 == z2
    # At stage 3 they leave out the sharded 16-bit parameters (2Ψ/N) and count 4·(largest
    # module) where costgraph counts 2·(largest unit gathered: embedding + norm + head here).
    ours3 = at(llama, model_states(llama.graph, policy="mixed-fp32-grads", zero=3, dp=8)["total"], "llama-2-7b")
    assert ours3 - z3 == 2 * psi // 8 + 2 * 262_148_096 - 4 * largest
    # symbolic: floor of 18Ψ/N
    n = sympy.Symbol("n", positive=True, integer=True)
    assert deepspeed_zero_estimate(PSI, stage=2, gpus=n) == 2 * PSI + sympy.floor(18 * PSI / n)


# --- optimizers from the graph's shapes --------------------------------------------------------

# GPT-2 small's parameter tensors (Hugging Face GPT2LMHeadModel, h 768, 12 layers, V 50257,
# 1024 positions, head tied): (shape, copies)
GPT2_TENSORS = [((50257, 768), 1), ((1024, 768), 1),
                ((768,), 12), ((768,), 12), ((2304, 768), 12), ((2304,), 12), ((768, 768), 12), ((768,), 12),
                ((768,), 12), ((768,), 12), ((3072, 768), 12), ((3072,), 12), ((768, 3072), 12), ((768,), 12),
                ((768,), 1), ((768,), 1)]


def test_gpt2_tensor_list():
    assert sum(math.prod(s) * c for s, c in GPT2_TENSORS) == GPT2_PARAMS


def test_adafactor_factored_state_gpt2(gpt):
    # Shazeer & Stern 2018, Algorithms 4–5: an n×m matrix keeps row sums R (n) and column sums C
    # (m) of the second moment, a vector its full second moment; beta1 = 0 (§7): no first
    # moment. fp32: 4 bytes each.
    elements = sum(c * (s[0] + s[1] if len(s) == 2 else s[0]) for s, c in GPT2_TENSORS)
    assert elements == 321_617
    s = model_states(gpt.graph, policy="fp32", optimizer="adafactor")
    assert at(gpt, s["optimizer"], "gpt2") == 4 * elements == 1_286_468
    # with beta1 (transformers' exp_avg): plus a full first moment
    s = model_states(gpt.graph, policy="fp32", optimizer="adafactor-beta1")
    assert at(gpt, s["optimizer"], "gpt2") == 4 * (elements + GPT2_PARAMS)
    with pytest.raises(CostgraphValueError, match="shapes"):
        bare_model_states(optimizer="adafactor")


def test_muon_split(gpt, llama):
    # Jordan et al. 2024 (Muon) and Liu et al. 2025 (Moonlight) §2: momentum (1 state) on the
    # hidden 2-D matrices; AdamW (2 states) on embeddings, the output head, norms and biases.
    matrices = 12 * (2304 * 768 + 768 * 768 + 3072 * 768 + 768 * 3072)   # 12h²l = 84,934,656
    assert matrices == 84_934_656
    rest = GPT2_PARAMS - matrices
    s = model_states(gpt.graph, policy="fp32", optimizer="muon")
    assert at(gpt, s["optimizer"], "gpt2") == 4 * matrices + 8 * rest
    # Llama's untied head is the output head: AdamW, not Muon
    assert output_heads(llama.graph) == {"lm_head"}
    s = model_states(llama.graph, policy="fp32", optimizer="muon")
    layer_matrices = 4 * 4096 * 4096 + 3 * 4096 * 11008
    assert at(llama, s["optimizer"], "llama-2-7b") == \
        4 * 32 * layer_matrices + 8 * (LLAMA2_7B_PARAMS - 32 * layer_matrices)


def test_adam_8bit_bytes_gpt2(gpt):
    # bitsandbytes/optim/optimizer.py Optimizer2State.init_state (Adam8bit defaults): uint8
    # state1 and state2, one float32 absmax per 256 elements for each, and float32 states for
    # tensors under min_8bit_size = 4096 elements.
    def bnb(n):
        return 2 * 4 * n if n < 4096 else 2 * n + 2 * 4 * -(-n // 256)
    expected = sum(c * bnb(math.prod(s)) for s, c in GPT2_TENSORS)
    assert expected == 253_492_632
    s = model_states(gpt.graph, policy="bf16", optimizer="adam-8bit")
    assert at(gpt, s["optimizer"], "gpt2") == expected
    # a bare count is one flat tensor: 2Ψ + 8⌈Ψ/256⌉
    assert bare_model_states(7_500_000_000, policy="bf16", optimizer="adam-8bit")["optimizer"] == \
        2 * 7_500_000_000 + 8 * 29_296_875


def test_elementwise_optimizers(gpt):
    # SGD 0 states, momentum 1, Adam/AdamW 2, Lion 1 (Chen et al. 2023, Program 1); fp32: 4 B each
    for name, k in {"sgd": 0, "sgd-momentum": 1, "adam": 2, "adamw": 2, "lion": 1}.items():
        assert bare_model_states(policy="fp32", optimizer=name)["optimizer"] == 4 * k * PSI
        assert at(gpt, model_states(gpt.graph, policy="fp32", optimizer=name)["optimizer"], "gpt2") == \
            4 * k * GPT2_PARAMS


# --- data files and errors ----------------------------------------------------------------------

def test_every_number_in_the_data_files_has_a_comment():
    for name in ("policies.toml", "optimizers.toml"):
        for line in (files("costgraph.training") / name).read_text(encoding="utf-8").splitlines():
            if re.match(r"\s*\w+\s*=\s*\d", line):
                assert "#" in line, f"{name}: {line!r} has no source comment"
    assert all(p.source for p in policies().values()) and all(o.source for o in optimizers().values())


def test_errors_name_the_choices(gpt):
    with pytest.raises(CostgraphValueError, match="unknown precision policy 'fp8'") as e:
        bare_model_states(policy="fp8")
    assert "mixed-fp32-grads" in e.value.hint
    with pytest.raises(CostgraphValueError, match="unknown optimizer 'adam8'") as e:
        model_states(gpt.graph, optimizer="adam8")
    assert "adam-8bit" in e.value.hint
    with pytest.raises(CostgraphValueError, match="ZeRO stage"):
        bare_model_states(zero=4)
    with pytest.raises(CostgraphValueError, match="positive integer"):
        bare_model_states(zero=1, dp=0)
    with pytest.raises(CostgraphValueError, match="positive integer"):
        bare_model_states(zero=1, dp=True)
    with pytest.raises(CostgraphValueError, match="integer"):
        bare_model_states(7.5e9)
    with pytest.raises(CostgraphValueError, match="stages 2 and 3"):
        deepspeed_zero_estimate(PSI, stage=1, gpus=8)


# --- PyTorch agreement ---------------------------------------------------------------------------

def _tiny_gpt2_step(make_optimizer):
    """One training step of a tiny GPT-2 (transformers, CPU, fp32); returns the model and the
    bytes of the optimizer's state tensors, PyTorch's per-tensor 'step' scalars left out."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=101, n_positions=16, n_embd=32, n_layer=2, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    opt = make_optimizer(model)
    ids = torch.randint(0, 101, (2, 8))
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    nbytes = sum(v.numel() * v.element_size() for st in opt.state.values() for k, v in st.items()
                 if k != "step" and isinstance(v, torch.Tensor))
    return model, nbytes


TINY = {"h": 32, "l": 2, "a": 2, "V": 101, "s_max": 16}


@pytest.mark.parametrize("name", ["sgd-momentum", "adam", "adamw", "adafactor", "muon"])
def test_torch_optimizer_state_bytes(gpt, name):
    # PyTorch 2.13 torch.optim: SGD momentum_buffer; Adam/AdamW exp_avg, exp_avg_sq;
    # Adafactor row_var, col_var (≥ 2-D) or variance (1-D); Muon momentum_buffer on the 2-D
    # hidden matrices with AdamW on the rest (Jordan et al. 2024's split).
    torch = pytest.importorskip("torch")

    def make(model):
        params = list(model.parameters())
        if name == "sgd-momentum":
            return torch.optim.SGD(params, lr=0.1, momentum=0.9)
        if name == "adam":
            return torch.optim.Adam(params)
        if name == "adamw":
            return torch.optim.AdamW(params)
        if name == "adafactor":
            return torch.optim.Adafactor(params)
        hidden = [p for n, p in model.named_parameters() if p.dim() == 2 and ".wte." not in n and ".wpe." not in n]
        ids = {id(p) for p in hidden}
        rest = [p for p in params if id(p) not in ids]

        class Both:   # Muon on matrices, AdamW on the rest
            def __init__(self):
                self.parts = [torch.optim.Muon(hidden), torch.optim.AdamW(rest)]

            def step(self):
                for o in self.parts:
                    o.step()

            @property
            def state(self):
                return {**self.parts[0].state, **self.parts[1].state}
        return Both()

    model, state_bytes = _tiny_gpt2_step(make)
    values = {sympy.Symbol(k, positive=True, integer=True): v for k, v in TINY.items()}
    s = model_states(gpt.graph, policy="fp32", optimizer=name)
    assert s["optimizer"].subs(values) == state_bytes
    # parameters (tied head once) and their gradients, fp32
    assert s["weights"].subs(values) == sum(p.numel() * 4 for p in model.parameters())
    assert s["gradients"].subs(values) == sum(p.grad.numel() * 4 for p in model.parameters())


def test_assemble_total_is_the_expanded_sum():
    """issue 27 item 6 (speed): ``assemble``'s total is the sum of its expanded parts, the very expression
    SymPy's expand of the whole sum gives (the definition it had: expand(weights + gradients + optimizer));
    a Float coefficient keeps the whole sum's expansion (its rounding depends on the order of the terms)."""
    from costgraph.engine.symbols import dim
    from costgraph.training.states import assemble

    h, v, l, d, c = (dim(x) for x in ("h", "v", "l", "N_d", "N_c"))
    W = 2 * l * (h + v) * h + 3 * h * (h + 1) / 2
    G, C, M, S = 2 * W, 4 * l * h * (h + v), 4 * (W + h), 8 * l * h * (v + 2 * h) + sympy.Rational(1, 3) * h
    gathered = 2 * h * (h + v)
    for zero in range(4):
        for n in (d * c, sympy.Integer(8)):
            got = assemble(W, G, C, M, S, zero=zero, n=n, gathered=gathered)
            k1, k2, k3 = (n if zero >= s else 1 for s in (1, 2, 3))
            whole = (W / k3 + (gathered if zero >= 3 else 0)) + (G / k2 + C / k1) + (M + S) / k1
            assert sympy.srepr(got["total"]) == sympy.srepr(sympy.expand(whole))
            assert list(got) == ["weights", "gradients", "optimizer", "total", "master", "gathered"]
    f = assemble(W * sympy.Float(0.1), G, C, M, S, zero=1, n=d)
    assert sympy.srepr(f["total"]) == sympy.srepr(sympy.expand(W * sympy.Float(0.1) + G + C / d + (M + S) / d))
