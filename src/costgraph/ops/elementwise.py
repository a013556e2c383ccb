"""Elementwise operators, activations, softmax and dropout.

None of these is a matrix product, so under the default ``matmul`` FLOP
convention they cost 0; under ``all`` they cost :data:`PER_ELEMENT` FLOPs per
output element forward and as many again for the input gradient (our
convention: the backward of an elementwise op re-evaluates the same
expression once, chained with the incoming gradient).

Saved for backward (what autograd needs; Korthikanti et al. 2022 §4.1):
GELU and SiLU their input; ReLU and softmax their output; dropout its mask
(1 byte per element); a product of two activations both operands; add,
subtract and scaling by a constant nothing.

Dropout exists only while training with dropout on: with the setting
``dropout=False`` it is the identity, has no node, and its mask vanishes.
"""

from __future__ import annotations

from ..engine.graph import Flops
from .registry import has_role, op

# FLOPs per element under the `all` convention. Each elementary arithmetic
# operation and each transcendental (exp, tanh, rsqrt) counts 1.
PER_ELEMENT: dict[str, int] = {
    "add": 1, "sub": 1, "mul": 1,
    "scale": 1,       # multiply by a constant
    "dropout": 1,     # multiply by the pre-scaled mask (drawing it not counted)
    "relu": 1,        # max(x, 0)
    "gelu": 9,        # tanh form: x³ (2), ×0.044715, +x, ×√(2/π), tanh, +1, ×x, ×0.5
    "silu": 4,        # x / (1 + exp(-x)): exp, +1, divide, ×x
    "softmax": 5,     # max, subtract, exp, sum, divide
    "layernorm": 5,   # mean, subtract, square, mean of squares, × rsqrt
    "rmsnorm": 3,     # square, mean, × rsqrt
    "rope": 3,        # x·cos + rotate_half(x)·sin
    "sigmoid": 3,     # 1 / (1 + exp(-x)): exp, +1, divide
    "tanh": 1,        # a transcendental
    "softplus": 3,    # log(1 + exp(x)): exp, +1, log
    "square": 1,      # x·x
    "relu2": 2,       # max(x, 0), then its square
    "xielu": 11,      # where(x > 0, α_p·x·x + β·x, (expm1(min(x, ε)) − x)·α_n + β·x): 4 + 6 + the select
    "clamp": 1,       # per bound: one comparison (2 with both bounds)
    "softcap": 3,     # cap · tanh(x / cap): divide, tanh, multiply
    "maximum": 1,     # elementwise max of two tensors
    "max": 1,         # reduction: one comparison per element
    "topk": 1,        # selection: one comparison per element (our convention)
    "scan": 5,        # selective scan per (token, channel, state) outside C·h: Δ·A, exp, ·(Δu)·B, h·dA + ·
}

# What `keep = NAME` may ask an operator to keep for backward (see `_keep`).
KEEP = ("input", "output", "fp32", "nothing")


def _keep(c, x, y, default: str):
    """Keep ``x`` (``input``), ``y`` (``output``), an fp32 copy of ``x``
    (``fp32``: Hugging Face's ``x.float()`` before a norm or softmax) or
    nothing (``nothing``): the call's ``keep =`` when given, else ``default``
    (a rule's own defaults say ``none``). ``keep = none`` is the default."""
    keep = c.args.get("keep") or ("nothing" if default == "none" else default)
    if keep not in KEEP:
        c.fail(f"{c.kind} keep = {keep}: not one of {', '.join(KEEP)}",
               hint="keep = input | output | fp32 | nothing: what the operator keeps for backward")
    if keep == "input":
        c.save(x)
    elif keep == "output":
        c.save(y)
    elif keep == "fp32":   # x.float(): x itself when it is fp32 already
        c.save(x if x.role == "fp32" else c.aux("input_fp32", x.shape, "fp32"))
    return keep


def _unary(c, kind: str, save: str, per: int | None = None):
    x = c["x"]
    y = c.output(x.shape, role=c.float_role(x))
    n = x.numel
    per = PER_ELEMENT[kind] if per is None else per
    c.forward(Flops(other=per * n))
    c.backward_input(Flops(other=per * n))
    _keep(c, x, y, save)
    return y


@op("gelu", "GELU activation (Hendrycks & Gimpel 2016)", x="tensor", keep=("ident", None), layout="follow",
    roles=("glu_gate", "expert_act"))
def gelu(c):
    return _unary(c, "gelu", save="input")


@op("silu", "SiLU / swish activation", x="tensor", keep=("ident", None), layout="follow",
    roles=("glu_gate", "expert_act"))
def silu(c):
    return _unary(c, "silu", save="input")


@op("relu", "ReLU activation", x="tensor", keep=("ident", None), layout="follow", roles="expert_act")
def relu(c):
    return _unary(c, "relu", save="output")


@op("softmax", "softmax over the last dimension; fp32 = true computes it in fp32 and casts back",
    x="tensor", fp32=("bool", False), keep=("ident", None), layout="whole_last")
def softmax(c):
    """Keeps its output. With ``fp32 = true`` (LLaMA-family code:
    ``softmax(x, dtype=float32).to(x.dtype)``) the ``pytorch`` profile keeps
    the fp32 result, 4 bytes an element, and the cast copy is a new tensor."""
    if c["fp32"] and c.settings.profile == "pytorch" and c["keep"] is None:
        y = _unary(c, "softmax", save="none")
        c.save(c.aux("probs_fp32", y.shape, "fp32"))
        return y
    return _unary(c, "softmax", save="output")


@op("scale", "multiplication by a constant (e.g. 1/√d before softmax)", x="tensor", layout="follow")
def scale(c):
    return _unary(c, "scale", save="none")


@op("dropout", "dropout; the identity when training without dropout", x="tensor", layout="follow")
def dropout(c):
    x = c["x"]
    if not c.settings.dropout:
        return c.identity(x)
    y = _unary(c, "dropout", save="none")
    c.save(c.aux("mask", x.shape, role="mask"))
    return y


def _binary(c, kind: str, save: bool):
    x, y = c["x"], c["y"]
    out = c.output(c.broadcast(x, y), role=c.float_role(x, y))
    n = out.numel
    c.forward(Flops(other=PER_ELEMENT[kind] * n))
    if save:  # d(xy)/dx = y, d(xy)/dy = x: one multiply each
        c.backward_input(Flops(other=2 * n))
        c.save(x, y)
    return out


@op("add", "elementwise sum (written x + y; broadcasts)", x="tensor", y="tensor", layout="broadcast")
def add(c):
    return _binary(c, "add", save=False)


@op("sub", "elementwise difference (written x - y; broadcasts)", x="tensor", y="tensor", layout="broadcast")
def sub(c):
    return _binary(c, "sub", save=False)


@op("mul", "elementwise product of two activations (written x * y; broadcasts)",
    x="tensor", y="tensor", layout="broadcast", roles="expert_act")
def mul(c):
    """Keeps both operands (autograd: d(xy)/dx = y, d(xy)/dy = x), except, in the
    ``korthikanti`` profile (Megatron-LM's kernels), an operand made by a ``glu_gate``
    activation (SiLU, GELU) that keeps its own input: Megatron fuses the gated unit
    (``act(gate) * up``) into one autograd function that saves only its input and
    recomputes the activation in the backward (Megatron-LM @ d98e8a64
    ``megatron/core/fusions/fused_bias_swiglu.py::SwiGLUFunction.forward``:
    ``ctx.save_for_backward(input)``; ``fused_bias_geglu.py`` likewise; used by
    ``megatron/core/transformer/mlp.py`` under ``bias_activation_fusion``, on by default)."""
    if c.settings.profile == "pytorch":
        return _binary(c, "mul", save=True)
    out = _binary(c, "mul", save=False)
    n = out.numel
    c.backward_input(Flops(other=2 * n))
    c.save(*[t for t in (c["x"], c["y"]) if not _fused_gate(c, t)])
    return out


def _fused_gate(c, t) -> bool:
    """Whether ``t`` is the output of a ``glu_gate`` activation that keeps its input (so a fused
    gated unit recomputes ``t`` from it: :func:`mul`)."""
    kind = c.producer_keeping_input(t)
    return kind is not None and has_role(kind, "glu_gate")


@op("rope", "rotary position embedding (Su et al. 2021) on the first `dims` entries of the "
    "last dimension (all when omitted): no parameters; table = own keeps a table per call, "
    "table = NAME one shared by the calls naming it",
    x="tensor", dims=("dim", None), table=("ident", None), layout="whole_last")
def rope(c):
    """x·cos + rotate_half(x)·sin over the rotated entries: 3 FLOPs each
    (`all` convention). Autograd keeps only the cos and sin tables ([1, S, r]
    in the compute dtype, made once per forward and shared by every layer:
    one storage each, in the ``pytorch`` profile); Korthikanti et al. keep
    nothing for it. ``table = shared`` (the default) is the one pair of the
    model; ``table = NAME`` (any other name) a pair of its own made once and
    shared by every call naming it (Hugging Face's Gemma 3 computes one pair
    per layer kind, ``position_embeddings[layer_type]``: ``table = local``
    and ``table = global``); ``table = own``: this call computes and keeps
    tables of its own (one pair per call and layer)."""
    x = c["x"]
    table = c["table"] or "shared"
    dims = x.shape[-1] if c["dims"] is None else c["dims"]
    c.at_most(dims, x.shape[-1], "rotates")
    rotated = x.numel / x.shape[-1] * dims
    y = c.output(x.shape, role=c.float_role(x))
    if c.settings.profile == "pytorch":
        seq = x.shape[-2]
        if table == "own":
            c.save(c.aux("cos", (1, seq, dims), "act"), c.aux("sin", (1, seq, dims), "act"))
        else:
            key = f"{seq},{dims}" if table == "shared" else f"{table},{seq},{dims}"
            c.save(c.shared_aux(f"rope_cos[{key}]", (1, seq, dims), "act"),
                   c.shared_aux(f"rope_sin[{key}]", (1, seq, dims), "act"))
    c.forward(Flops(other=PER_ELEMENT["rope"] * rotated))
    c.backward_input(Flops(other=PER_ELEMENT["rope"] * rotated))
    return y


@op("sigmoid", "logistic sigmoid 1 / (1 + e^-x)", x="tensor", keep=("ident", None), layout="follow")
def sigmoid(c):
    """Keeps its output (PyTorch ``sigmoid_backward(grad, result)``)."""
    return _unary(c, "sigmoid", save="output")


@op("tanh", "hyperbolic tangent", x="tensor", keep=("ident", None), layout="follow")
def tanh(c):
    """Keeps its output (PyTorch ``tanh_backward(grad, result)``)."""
    return _unary(c, "tanh", save="output")


@op("softplus", "softplus log(1 + e^x) (Mamba's Δ)", x="tensor", keep=("ident", None), layout="follow")
def softplus(c):
    """Keeps its input (PyTorch ``softplus_backward(grad, self, beta, threshold)``)."""
    return _unary(c, "softplus", save="input")


@op("square", "elementwise square x²", x="tensor", keep=("ident", None), layout="follow")
def square(c):
    """Keeps its input (PyTorch ``torch.square`` is ``pow(x, 2)``, whose
    backward ``2·x·grad`` reads ``self``)."""
    return _unary(c, "square", save="input")


@op("relu2", "squared ReLU, relu(x)² (So et al. 2021, Primer; Nemotron)", x="tensor", layout="follow")
def relu2(c):
    """``torch.square(F.relu(x))``: ReLU keeps its output and ``pow`` keeps
    its input — one tensor, the ReLU output, a new storage the op does not
    pass on; its input is not kept. 2 FLOPs an element (`all`)."""
    x = c["x"]
    y = _unary(c, "relu2", save="none")
    c.save(c.aux("relu_out", x.shape, c.float_role(x)))
    return y


@op("xielu", "xIELU, an activation with two learned scalars (Huang 2024, arXiv 2411.13010; Apertus)",
    x="tensor", layout="follow")
def xielu(c):
    """transformers 5.24 ``XIELUActivation._xielu_python`` (activations.py), what runs without the
    xIELU CUDA wheel: ``α_p = softplus(a_p)``, ``α_n = β + softplus(a_n)``, then
    ``where(x > 0, α_p·x·x + β·x, (expm1(min(x, ε)) − x)·α_n + β·x)``. Parameters: ``alpha_p`` and
    ``alpha_n``, one element each (β and ε are buffers). 11 FLOPs an element (`all`): both branches
    and the select. Keeps what autograd keeps there (measured with ``saved_tensors_hooks``,
    tests/ops/test_new_ops_torch.py): the input, ``α_p·x``, the ``expm1`` output and
    ``expm1(..) − x`` (each as the input), the bool mask ``x > 0`` and the two one-element α; the α's
    gradients are reductions over every element (5 FLOPs an element, `all`)."""
    x = c["x"]
    c.weight("alpha_p", (1,))
    c.weight("alpha_n", (1,))
    y = _unary(c, "xielu", save="input")
    # dα_p = Σ g·x·x over x > 0 (3 an element), dα_n = Σ g·(expm1(..) − x) over the rest (2)
    c.backward_weight(Flops(other=5 * x.numel))
    role = c.float_role(x)
    c.save(c.aux("alpha_p_x", x.shape, role), c.aux("expm1_out", x.shape, role),
           c.aux("negative_branch", x.shape, role), c.aux("positive", x.shape, "mask"),
           c.aux("alpha_p", (1,), role), c.aux("alpha_n", (1,), role))
    return y


@op("clamp", "clamp to [lower, upper] (the bounds' values cost nothing: say which exist)",
    x="tensor", lower=("bool", True), upper=("bool", True), layout="follow")
def clamp(c):
    """One comparison per bound and element (`all`). Keeps its input
    (PyTorch ``clamp_backward(grad, self, min, max)`` masks by it)."""
    bounds = int(c["lower"]) + int(c["upper"])
    if not bounds:
        c.fail("clamp needs at least one bound", hint="lower = true or upper = true")
    return _unary(c, "clamp", save="input", per=bounds * PER_ELEMENT["clamp"])


#: the elementwise steps of gpt-oss's clamped SwiGLU, in order (:func:`clamped_glu`)
CLAMPED_GLU_STEPS = (("clamp", 1), ("clamp", 2), ("scale", 1), ("sigmoid", 1), ("mul", 1), ("scale", 1), ("mul", 1))


@op("clamped_glu", "gpt-oss's clamped SwiGLU on the fused gate/up projection [.., 2w] → [.., w]: "
    "gate clamped above, up both ways, (up + 1) · gate · σ(α · gate)",
    x="tensor", layout="follow", roles="expert_act")
def clamped_glu(c):
    """gpt-oss's gated unit (transformers 5.24 ``modeling_gpt_oss.py::GptOssExperts._apply_gate``:
    ``gate.clamp(max=limit)``, ``up.clamp(-limit, limit)``, ``glu = gate * sigmoid(gate * alpha)``,
    ``(up + 1) * glu``) on ``x`` = the fused ``gate_up_proj`` output ``[.., 2w]`` (gate and up are
    views of it); output ``[.., w]``. FLOPs (`all`): :data:`CLAMPED_GLU_STEPS`, 10 an output
    element forward and as many for the input gradient, plus one more per product (each of the two
    products' gradients is two multiplies).

    Saved for backward, by profile:

    * ``korthikanti`` (Megatron-LM's kernels): its input only, ``2w`` an element. Megatron fuses the
      clamped unit into one autograd function that saves its input and rebuilds the rest in the
      backward (Megatron-LM @ d98e8a64 ``megatron/core/fusions/fused_bias_geglu.py``:
      ``WeightedQuickGeGLUFunction.forward`` ``ctx.save_for_backward(input_for_backward, ...)``,
      called by ``moe/experts.py::TEGroupedMLP`` with ``activation_func_clamp_value`` and
      ``glu_linear_offset``; Megatron-Bridge @ 067f987 ``models/gpt_oss/gpt_oss_bridge.py`` sets
      ``bias_activation_fusion = True``, ``quick_gelu``, clamp 7.0, offset 1.0).
    * ``pytorch`` (eager autograd): the input (both clamps keep a view of it), σ's output, the
      clamped gate, ``up + 1`` and ``glu`` (the two products keep their operands): ``2w + 4w``."""
    x = c["x"]
    if not x.shape:
        c.fail("clamped_glu needs a tensor with a last dimension (gate and up side by side), got a scalar []")
    *batch, last = x.shape
    y = c.output((*batch, last / 2), role=c.float_role(x))
    n = y.numel
    per = sum(PER_ELEMENT[kind] * k for kind, k in CLAMPED_GLU_STEPS)
    products = sum(1 for kind, _ in CLAMPED_GLU_STEPS if kind == "mul")
    c.forward(Flops(other=per * n))
    c.backward_input(Flops(other=(per + products) * n))
    c.save(x)
    if c.settings.profile == "pytorch":
        role = c.float_role(x)
        c.save(*[c.aux(name, y.shape, role) for name in ("sigmoid_out", "gate_clamped", "up_plus_one", "glu")])
    return y


@op("softcap", "soft-capping cap · tanh(x / cap) (Gemma 2's attention and final logits)",
    x="tensor", cap=("dim", None), layout="follow")
def softcap(c):
    """Gemma 2 (Gemma Team 2024 §2; Hugging Face ``Gemma2``: ``x / cap``,
    ``tanh``, ``* cap``). 3 FLOPs an element (`all`). Of the three, only
    ``tanh`` keeps a tensor: its output, a new storage not passed on (the
    divide and multiply by a constant keep nothing). ``cap`` (its value costs
    nothing) is optional."""
    x = c["x"]
    y = _unary(c, "softcap", save="none")
    c.save(c.aux("tanh_out", x.shape, c.float_role(x)))
    return y


@op("maximum", "elementwise maximum of two tensors (broadcasts)", x="tensor", y="tensor", layout="broadcast")
def maximum(c):
    """Keeps both operands (PyTorch ``maximum``'s backward compares them).
    1 FLOP an element forward (`all`); the backward selects: 0."""
    x, y = c["x"], c["y"]
    out = c.output(c.broadcast(x, y), role=c.float_role(x, y))
    c.forward(Flops(other=PER_ELEMENT["maximum"] * out.numel))
    c.save(x, y)
    return out


@op("cast", "convert to a dtype: to = fp32 | bf16 | fp16 | act (the compute dtype); a copy",
    x="tensor", to="ident", layout="follow")
def cast(c):
    """``x.float()``, ``x.to(torch.bfloat16)``: a new tensor of role ``to``
    (:mod:`costgraph.engine.precision`), so what later operators keep of it is
    counted in that dtype (``rmsnorm(cast(x, fp32))`` keeps 4 bytes an
    element), and their outputs follow it (an fp32 input gives an fp32
    result, as PyTorch promotes). Casting to the role the tensor has is the
    identity (``.to`` returns ``self``). No FLOPs; keeps nothing (its
    backward casts the gradient back)."""
    from ..engine.precision import FLOAT_ROLES

    x, to = c["x"], c["to"]
    if to not in FLOAT_ROLES:
        c.fail(f"cast to {to}: one of {', '.join(FLOAT_ROLES)}")
    if x.role not in FLOAT_ROLES:
        c.fail(f"cast converts floating-point tensors; this one is '{x.role}'")
    if x.role == to:
        return c.identity(x)
    return c.output(x.shape, role=to)


@op("alibi", "ALiBi (Press et al. 2022): adds each head's linear distance bias to the attention scores "
    "[..., heads, S, K] → the same shape (1 FLOP a score; no parameters, keeps nothing)",
    x="tensor", layout="follow")
def alibi(c):
    """Attention with linear biases: score[h, i, j] + m_h·j (m_h a fixed slope per
    head; j the key position, relative to i up to a constant per row, which the
    softmax ignores). The key length K is read off the scores (s in training, the
    cached positions at decode), so the bias always covers every key.

    Convention (the reference implementations, transformers 5.24): BLOOM builds
    the bias once per forward as a [b·heads, 1, K] tensor (slopes × positions,
    ``build_alibi_tensor``) and adds it inside ``alibi.baddbmm(Q, Kᵀ, alpha =
    1/√d)``; MPT builds [heads, 1, max_seq_len] once and adds it to the scaled
    scores. Per layer that is one add a score: ``PER_ELEMENT["add"]`` FLOPs an
    element forward under the ``all`` convention, 0 under ``matmul`` (as
    FlopCounterMode, which counts baddbmm as its product only). Building the
    bias (heads·K multiplies, once per forward) is not counted. The add keeps
    nothing for backward and the bias needs no gradient: no backward FLOPs, no
    saved bytes. The output's role follows the scores (the bias is cast to the
    compute dtype, as BLOOM's ``.to(dtype)``)."""
    x = c["x"]
    if len(x.shape) < 3:
        c.fail(f"alibi adds a bias per head to scores [..., heads, S, K], got {x.shape_str()}")
    y = c.output(x.shape, role=c.float_role(x))
    c.forward(Flops(other=PER_ELEMENT["add"] * x.numel))
    return y
