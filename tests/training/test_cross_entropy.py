"""The cross-entropy implementations (costgraph.training.cross_entropy; --cross-entropy): one convention per
implementation gives both the bytes it holds at the loss's peak (training memory) and the bytes its kernels move
(the step time's loss row). The held counts are tests/training/test_training_memory.py's; the moved counts of
Megatron-LM's two paths are tests/training/test_kernel_time.py's; PyTorch's are here."""

from __future__ import annotations

import json

import pytest
import sympy

import costgraph
from costgraph.choices import CROSS_ENTROPY
from costgraph.engine.symbols import dim
from costgraph.hardware import preset
from costgraph.parallel.layout import Layout
from costgraph.training.cross_entropy import implementation, implementations
from costgraph.training.kernel_table import kernel_table
from costgraph.training.kernel_time import LOSS_PATH, kernel_ops
from cli_checks import run

BW = 2_800_000_000_000           # kernels.toml [h100-sxm] hbm_bandwidth (measured 2.8 TB/s)
P = 989_400_000_000_000          # h100-sxm BF16 dense peak (hardware.toml: H100 whitepaper 989.4 TFLOP/s)


@pytest.fixture(scope="module")
def llama():
    m = costgraph.load("llama")
    return m, {**m.values("llama-3-8b"), dim("b"): 1, dim("s"): 4096}


def test_the_data_file_holds_one_entry_per_value_of_the_choice():
    assert tuple(implementations()) == CROSS_ENTROPY.values
    # each gives both counts: held (fp32 and activation-precision buffers) and moved (forward, backward)
    assert {n: (i.held(2), i.forward_bytes, i.backward_bytes) for n, i in implementations().items()} == {
        "megatron": (6, 38, 14), "megatron-fused": (6, 22, 10), "te": (2, 6, 4), "te-fp32grad": (6, 8, 14),
        "pytorch": (12, 22, 26), "pytorch-bf16": (6, 8, 10), "logits": (4, 38, 14)}


def _loss_row(llama, name, hardware="h100-sxm"):
    """The loss kernel's (forward, backward) seconds at the fixture's sizes under ``--cross-entropy name``, and one
    launch's fixed time of the preset's kernel table (kernel_ops' row of LOSS_PATH)."""
    m, v = llama
    table = kernel_table(preset(hardware))
    row = next(r for r in kernel_ops(m.graph, Layout(cross_entropy=name), table, {"bf16": P}) if r["path"] == LOSS_PATH)
    launch = sympy.Rational(table.memory_launch_ns, 10**9)
    return sympy.sympify(row["forward"]).xreplace(v), sympy.sympify(row["backward"]).xreplace(v), launch


def test_pytorchs_cross_entropy_moves_its_kernels_bytes(llama):
    # torchtitan @ 9dec370 train.py loss_fn: F.cross_entropy(pred.float(), labels). PyTorch @ 000cace5
    # aten/src/ATen/native/cuda/SoftMax.cu host_softmax: a row of V = 128,256 fp32 logits (501 KiB) is over
    # sharedMemPerBlock, so cunn_SoftMaxForward: ilpReduce max (read 4), ilpReduce sum-exp (read 4),
    # WriteFpropResults (read 4, write 4); with .float() (2 + 4): 22 B a logit. Backward: Loss.cu
    # nll_loss_backward_out_cuda grad_input.zero_() (write 4); cunn_SoftMaxBackward ilpReduce over gradOutput
    # (read 4), WriteBpropResults (read output 4 and gradOutput 4, write 4); the cast back to bf16 (4 + 2): 26 B.
    logits = 1 * 4096 * 128_256
    assert _loss_row(llama, "pytorch")[:2] == (sympy.Rational(22 * logits, BW), sympy.Rational(26 * logits, BW))


@pytest.mark.parametrize("name, kernels", [("pytorch", (3, 4)), ("pytorch-bf16", (2, 3)), ("megatron-fused", (4, 1)),
                                           ("te", (2, 1)), ("te-fp32grad", (2, 2))])
def test_each_loss_kernel_pays_the_tables_fixed_time(llama, name, kernels):
    # kernels.toml [h200]: hbm_bandwidth 3,816.8 GB/s and memory_launch_ns 1904, fitted to cuDNN's RMSNorm
    # kernels; cross_entropy.toml forward_kernels/backward_kernels: pytorch 3 and 4 (.float(), cunn_SoftMaxForward,
    # nll_loss; zero_, scatter, cunn_SoftMaxBackward, the cast), megatron-fused 4 and 1 (fused_cross_entropy.py)
    bw, launch = 3_816_800_000_000, sympy.Rational(1904, 10**9)
    logits, impl = 1 * 4096 * 128_256, implementation(name)
    assert _loss_row(llama, name, "h200")[:2] == \
        (sympy.Rational(impl.forward_bytes * logits, bw) + kernels[0] * launch,
         sympy.Rational(impl.backward_bytes * logits, bw) + kernels[1] * launch)


def test_the_step_text_names_the_kernel_of_the_memory_convention(capsys):
    base = ["train", "llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm"]
    code, out, _ = run(capsys, base)
    assert code == 0
    # the default is what Megatron-LM runs (Megatron-LM @ d98e8a64 model_parallel_config.py
    # `cross_entropy_loss_fusion: bool = False`, the --cross-entropy-loss-fusion flag arguments.py generates from
    # it: the unfused tensor_parallel/cross_entropy.py), named in the header and in the step time's loss
    assert "cross-entropy megatron (default)" in out.splitlines()[2]
    assert "the loss (--cross-entropy megatron (default): megatron-unfused fp32 cross-entropy" in out
    assert "loss: --cross-entropy" not in out   # the default needs no line of its own
    from costgraph.export.training_report import _options_lines   # the old count, no longer the default: a line

    assert "loss: --cross-entropy logits (the fp32 logits held only (no backward transient), timed as megatron)" in \
        _options_lines(Layout(cross_entropy="logits").filled()) and not _options_lines(Layout().filled())
    code, out, _ = run(capsys, base + ["--cross-entropy", "pytorch"])
    assert code == 0 and "loss: --cross-entropy pytorch (F.cross_entropy" in out
    assert "the loss (--cross-entropy pytorch: " + implementation("pytorch").kernel + ", in memory)" in out
    code, out, _ = run(capsys, base + ["--cross-entropy", "megatron-fused", "--format", "json"])
    assert code == 0 and json.loads(out)["plan"]["cross_entropy"] == "megatron-fused"


def test_without_the_loss_the_step_text_names_no_cross_entropy(capsys):
    # found by a hostile trial: `train --cross-entropy pytorch --no-loss` timed no loss (0.018 s less compute)
    # but the step text still said "the loss (--cross-entropy pytorch: ...)"
    base = ["train", "llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm", "--cross-entropy",
            "pytorch"]
    code, out, _ = run(capsys, base + ["--no-loss"])
    assert code == 0 and "the loss (" not in out
    assert "  outside the graph, at the table's HBM bandwidth: no loss (--no-loss); the optimizer step" in out


def test_an_unknown_implementation_is_refused():
    with pytest.raises(costgraph.CostgraphError, match="unknown cross_entropy 'fused'") as e:
        implementation("fused")
    assert e.value.hint == CROSS_ENTROPY.hint()


@pytest.mark.parametrize("name, precision, words, per_logit", [
    # training/cross_entropy.toml: [megatron] held_fp32 = 1, held_act = 1 (Megatron-LM @ d98e8a64
    # tensor_parallel/cross_entropy.py: the fp32 softmax in place, the gradient cast back to bf16)
    ("megatron", "mixed", "1 fp32 + 1 bf16 buffers", 4 + 2),
    ("megatron", "fp32", "2 fp32 buffers", 4 + 4),   # activations in fp32: the gradient's copy is fp32 too
    # [pytorch] held_fp32 = 3 (log_softmax's output, nll_loss's gradient, log_softmax_backward's output)
    ("pytorch", "mixed", "3 fp32 buffers", 3 * 4),
    # [te] held_act = 1 (TransformerEngine @ v2.17 triton/cross_entropy.py: the gradient stored over the bf16
    # logits, which pytorch/cross_entropy.py saves; no buffer of the logits' shape allocated)
    ("te", "mixed", "1 bf16 buffer", 2),
    # [te-fp32grad] (TE @ d0067d0d, #3193: grad_input = torch.empty_like(_input, dtype=torch.float32) saved; the
    # autograd engine's cast to the bf16 input's dtype while it lives)
    ("te-fp32grad", "mixed", "1 fp32 + 1 bf16 buffers", 4 + 2),
    # [pytorch-bf16] held_act = 3: the same three buffers in the logits' dtype (AutoModel's fp32_upcast: false; no
    # .float(), so pytorch/pytorch @ 000cace5 SoftMax.cu host_softmax writes a bf16 output, log_softmax saves it)
    ("pytorch-bf16", "mixed", "3 bf16 buffers", 3 * 2),
    ("pytorch-bf16", "fp32", "3 fp32 buffers", 3 * 4),   # fp32 activations: the logits, and so the loss, in fp32
    ("logits", "mixed", "1 fp32 buffer", 4),   # [logits]: the fp32 logits only, the count before the conventions
])
def test_the_stage_reason_says_what_the_loss_holds(llama, name, precision, words, per_logit):
    """The last stage's reason names the --cross-entropy convention and what it holds (no longer "the fp32
    logits" whatever the convention): the loss's bytes are per_logit × b·s·V (V = 128,256, s = 4096, b = 1;
    pp 2 keeps the head on the last stage whole)."""
    from costgraph.training.memory import training_memory

    m, values = llama
    act = "fp32" if precision == "fp32" else "bf16"   # the activations' dtype, as costgraph train derives it
    mem = training_memory(m.graph, Layout(p=2, gpus=2, cross_entropy=name, policy=precision, precision=act).filled(),
                          "model")
    last = mem.stages[-1]
    assert last.memory["loss"].xreplace(values) == per_logit * 128_256 * 4096
    assert last.why(values).endswith(f", plus the loss (--cross-entropy {name}: {words} of the logits' shape; "
                                     f"{per_logit * 128_256 * 4096:,} bytes)")
    assert "loss" not in mem.stages[0].why(values)   # the head is on the last stage only
    no_loss = training_memory(m.graph, Layout(p=2, gpus=2, cross_entropy=name, loss=False).filled(), "model")
    assert no_loss.stages[-1].memory["loss"] == 0 and "loss" not in no_loss.stages[-1].why(values)


@pytest.mark.parametrize("name, forward, backward", [
    # TransformerEngine @ v2.17 (2e559f06) transformer_engine/common/triton/cross_entropy.py, per bf16 logit:
    # online_softmax_kernel loads the row once (2); cross_entropy_kernel loads it again (2) and stores the gradient
    # over it (tl.store(X_ptr + X_offsets, X_block.to(grad_dtype)): 2); backward element_mul_kernel loads and
    # stores it in place (2 + 2): grad_output is Megatron's per-token [s, b] loss gradient, not the scalar 1.0
    # pytorch/triton/cross_entropy.py cross_entropy_backward skips on
    ("te", 2 + 2 + 2, 2 + 2),
    # TE @ d0067d0d (#3193): cross_entropy_kernel stores into an fp32 grad_input (2 + 2 + 4); element_mul_kernel
    # on it (4 + 4) and the autograd engine's cast to the bf16 input's dtype (4 + 2)
    ("te-fp32grad", 2 + 2 + 4, 4 + 4 + 4 + 2),
])
def test_transformer_engines_cross_entropy_moves_its_kernels_bytes(llama, name, forward, backward):
    logits = 1 * 4096 * 128_256
    fwd, back, launch = _loss_row(llama, name)   # kernels.toml [h100-sxm]: no launch time measured (0)
    assert fwd - 2 * launch == sympy.Rational(forward * logits, BW)
    assert back - (1 if name == "te" else 2) * launch == sympy.Rational(backward * logits, BW)


def test_pytorchs_cross_entropy_without_upcast_moves_its_kernels_bytes(llama):
    # AutoModel's MoE recipes (Automodel @ 809f199 examples/llm_benchmark/*: loss_fn.fp32_upcast: false;
    # nemo_automodel/components/loss/masked_ce.py skips logits.float()): F.cross_entropy on the bf16 logits.
    # pytorch/pytorch @ 000cace5 aten/src/ATen/native/cuda/SoftMax.cu host_softmax (half_to_float false): a bf16 row
    # of V = 128,256 (250 KiB) is over sharedMemPerBlock (48 KiB), so cunn_SoftMaxForward<bf16>: ilpReduce max (read
    # 2), sum-exp (read 2), WriteFpropResults (read 2, write 2): 8 B a logit. Backward: Loss.cu
    # nll_loss_backward_out_cuda grad_input.zero_() (write 2), cunn_SoftMaxBackward<bf16> ilpReduce over gradOutput
    # (read 2), WriteBpropResults (read output 2 and gradOutput 2, write 2), no cast: 10 B.
    logits = 1 * 4096 * 128_256
    fwd, back, launch = _loss_row(llama, "pytorch-bf16")
    assert (fwd - 2 * launch, back - 3 * launch) == \
        (sympy.Rational((2 + 2 + 2 + 2) * logits, BW), sympy.Rational((2 + 2 + 2 + 2 + 2) * logits, BW))


@pytest.mark.parametrize("upcast, name", [(True, "pytorch"), (False, "pytorch-bf16")])
def test_what_f_cross_entropy_saves_is_a_third_of_what_the_convention_holds(llama, upcast, name):
    """Measured on PyTorch itself (CPU, autograd's saved-tensor hooks): MaskedCrossEntropy's F.cross_entropy
    (Automodel @ 809f199 nemo_automodel/components/loss/masked_ce.py; fp32_upcast True: logits.float() first)
    saves log_softmax's output only (PyTorch 2.13.0 (cf30153c) tools/autograd/derivatives.yaml ``_log_softmax``:
    ``_log_softmax_backward_data(grad, result, dim, self.scalar_type())``; nll_loss saves the same tensor): 4 B a
    logit with the upcast, 2 B without. The convention holds it and the backward's two buffers of its dtype (the
    nll_loss gradient, log_softmax_backward's output): by hand, 3 × the saved bytes on a b 2, s 8, V 1000 head."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from costgraph.training.memory import training_memory

    b, s, V = 2, 8, 1000
    logits = torch.randn(b, s, V, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, V, (b * s,))
    saved = {}

    def pack(t):
        if t.is_floating_point() and t.numel() == b * s * V:
            saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        x = logits.view(-1, V)
        F.cross_entropy(x.float() if upcast else x, labels, reduction="sum").backward()
    assert list(saved.values()) == [(4 if upcast else 2) * b * s * V]   # 64,000 B or 32,000 B
    m, values = llama
    mem = training_memory(m.graph, Layout(p=2, gpus=2, cross_entropy=name).filled(), "model")
    assert mem.stages[-1].memory["loss"].xreplace({**values, dim("b"): b, dim("s"): s, dim("V"): V}) == \
        3 * list(saved.values())[0]   # 192,000 B (pytorch) or 96,000 B (pytorch-bf16)


def test_te_holds_the_bf16_logits_alone_4_bytes_a_logit_less_than_megatron(capsys):
    """Megatron-Bridge's performance recipes run TE's cross-entropy (Megatron-Bridge @ 067f987
    perf_recipes/_common.py _benchmark_common(cfg, cross_entropy_impl="te"); gpt_provider.py
    cross_entropy_loss_fusion: bool = True): the last stage holds 4 B a logit less than under Megatron-LM's
    default (the fp32 softmax gone, the gradient written over the bf16 logits: TE @ v2.17)."""
    base = ["train", "llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm", "--format", "json"]
    totals = {}
    for name in ("megatron", "te"):
        code, out, _ = run(capsys, base + ["--cross-entropy", name])
        assert code == 0
        doc = json.loads(out)
        assert doc["plan"]["cross_entropy"] == name
        totals[name] = doc["memory"]["total"]["value"]
        assert f" + {2 if name == 'te' else 6}*b*s*V + " in doc["memory"]["total"]["expr"]
    # b 1, s 8192 (llama-3-8b's context, train's default), V 128,256, TP 1: 4 B × b·s·V less
    assert totals["megatron"] - totals["te"] == 4 * 8192 * 128_256


# --- a model without a token head: the loss train assumes is said (reliability: a ViT base model's draft was trained
# with the default cross-entropy over its pooler's [b, h], silently) ---------------------------------------------------

# `costgraph import ViTModel` (transformers 5.24 models/vit/modeling_vit.py ViTModel.forward: the encoder, its last
# layernorm, ViTPooler.forward: dense(hidden_states[:, 0]) then tanh): the draft's graph, written here without the
# importer (its probes take half a minute)
VIT_BASE = """import "std/attention.cg"
import "std/mlp.cg"

model vit {
  dim b
  dim h
  dim a
  dim i
  dim l
  dim c
  dim image
  dim p
  dim n = (image / p) * (image / p)
  input pixels[b, c, image, image]
  x = flatten_patches(conv2d(pixels, h, kernel = p, stride = p, bias = true, name = projection))
  param cls_token[1, 1, h]
  x = concat_seq(cls_token, x)
  param position_embeddings[1, n + 1, h]
  x = x + position_embeddings
  repeat l as layers {
    x = x + gqa_attention(layernorm(x, name = layernorm_before), a, a, h / a, qkv_bias = true, out_bias = true, rotary = false, name = attention)
    x = x + mlp(layernorm(x, name = layernorm_after), i, bias = true, dropout = false, name = mlp)
  }
  x = layernorm(x, name = layernorm)
  x = select(x)
  x = linear(x, h, bias = true, name = dense)
  x = tanh(x)
  return x
}

config imported { h = 768, a = 12, i = 3072, l = 12, c = 3, image = 224, p = 16, b = 1 }
"""

NO_HEAD = ("the model has no token head (no output is a weight's product to vocabulary or class logits): the loss "
           "assumed is --cross-entropy {conv} over its last output {out} [{shape}] as if it were logits; a base model "
           "is trained through a head it lacks here (add the head to the model file, or leave the loss out with "
           "--no-loss)")


@pytest.mark.parametrize("name, options, heads", [
    ("gpt", {}, ("lm_head:0",)),                          # a tied lm_head, h → V
    ("gemma2", {}, ("lm_head:0",)),                       # the head behind its final logit softcapping
    ("vit", {"classifier": True}, ("classifier:0",)),     # ViTForImageClassification: h → labels
    ("bert", {}, ()),                                     # BertModel's pooler: h → h, then tanh
    ("bert", {"pooler": False}, ()),                      # BertModel's last hidden state (a layernorm)
    ("dinov2", {}, ()),                                   # Dinov2Model's class token
])
def test_token_heads_are_the_outputs_a_head_produces(name, options, heads):
    from costgraph.training.cross_entropy import token_heads

    assert token_heads(costgraph.load(name, options=options).graph) == heads


# VideoMAEModel with use_mean_pooling (transformers 5.24 models/videomae/modeling_videomae.py VideoMAEModel.forward:
# ``self.layernorm`` is None, the output is the last layer's x + mlp(x)): VIT_BASE without its last norm and pooler
RESIDUAL_LAST = VIT_BASE.split("  x = layernorm(x, name = layernorm)")[0] + """  return x
}

config imported { h = 768, a = 12, i = 3072, l = 12, c = 3, image = 224, p = 16, b = 1 }
"""


def test_a_residual_add_last_is_no_head(tmp_path, capsys):
    # the walk from the output went through x + mlp(x) into fc2 (i → h) and read it as a head: no warning was said
    from costgraph.training.cross_entropy import loss_warnings, token_heads

    path = tmp_path / "videomae_base.cg"
    path.write_text(RESIDUAL_LAST)
    graph = costgraph.load(str(path)).graph
    assert token_heads(graph) == ()
    out = graph.outputs[-1]
    assert loss_warnings(graph, "megatron") == [NO_HEAD.format(conv="megatron", out=out, shape="b, image**2/p**2 + 1, h")]
    code, text, err = run(capsys, ["train", str(path), "--config", "imported", "--gpus", "1"])
    assert code == 0 and "warning: " + NO_HEAD.format(conv="megatron", out=out, shape="b, image**2/p**2 + 1, h") in text + err


def test_train_on_a_base_model_says_the_loss_it_assumed(tmp_path, capsys):
    path = tmp_path / "vit_base.cg"
    path.write_text(VIT_BASE)
    argv = ["train", str(path), "--config", "imported", "--gpus", "1", "--hardware", "h100-sxm"]
    code, out, err = run(capsys, argv + ["--format", "json"])
    assert code == 0
    said = NO_HEAD.format(conv="megatron", out="tanh:0", shape="b, h")
    assert said in json.loads(out)["warnings"]
    code, out, err = run(capsys, argv + ["--cross-entropy", "te"])
    assert code == 0 and "warning: " + NO_HEAD.format(conv="te", out="tanh:0", shape="b, h") in out + err
    code, out, err = run(capsys, argv + ["--no-loss"])           # no loss, nothing assumed
    assert code == 0 and "token head" not in out + err
    code, out, err = run(capsys, ["train", "gpt", "--config", "gpt2", "--gpus", "1", "--hardware", "h100-sxm"])
    assert code == 0 and "token head" not in out + err           # an LM head: nothing to say


def test_plan_on_a_base_model_says_the_loss_every_row_assumes():
    m = costgraph.load("bert")   # BertModel with its pooler: no head
    res = m.plan(m.values("bert-base-uncased"), gpus=2, hardware="h100-sxm", global_batch=4, top=1,
                 cross_entropy="te")
    said = NO_HEAD.format(conv="te", out="pooler/activation:0", shape="b, h")
    assert res.warnings == [said] and json.loads(res.to_json())["warnings"] == [said]
    assert "warning: " + said in res.to_text().splitlines()
