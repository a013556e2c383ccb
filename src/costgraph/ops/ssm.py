"""Sequence mixing without attention: a depthwise causal ``conv1d`` and
Mamba's ``selective_scan`` (Gu & Dao 2023), each with a fixed-size state kept
at inference (a :class:`costgraph.engine.graph.CacheEntry` with ``state = True``:
per sequence, whatever the number of tokens).
"""

from __future__ import annotations

from ..engine.graph import Flops
from .elementwise import PER_ELEMENT
from .registry import op


@op("conv1d", "depthwise causal convolution along the sequence: x [B, S, C], a width-k kernel per "
    "channel → [B, S, C]; padded = true: as PyTorch's Conv1d(padding = k − 1)[..., :S] computes it "
    "(S + k − 1 positions)", x="tensor", kernel="dim", bias=("bool", True), state=("bool", True),
    padded=("bool", False), layout=("per_channel", "x"))
def conv1d(c):
    """PyTorch ``Conv1d(C, C, k, groups=C)`` on ``x.transpose(1, 2)``, causal:
    output ``t`` reads inputs ``t − k + 1 … t``. Weight ``[C, 1, k]`` (+ bias
    ``[C]``): ``C·k (+ C)`` parameters. Keeps its input (PyTorch's convolution
    keeps input and weight).

    Positions computed, ``P``: ``padded = false`` (default), exactly ``S``
    (left padding ``k − 1``: the ``causal_conv1d`` kernel of Mamba, Hyena's
    short convolution). ``padded = true``: ``S + k − 1``, as transformers'
    PyTorch path ``causal_conv1d_fn`` (modeling_mamba.py and every Mamba,
    Mamba-2 and gated-DeltaNet model of transformers 5.24) computes it:
    ``F.conv1d(x, w, padding = k − 1, groups = C)[..., :S]`` pads both ends and
    drops the last ``k − 1`` outputs; the output is a view of the ``[B, C, S + k − 1]``
    result, so what keeps it (the SiLU after it) keeps all ``P`` positions.

    FLOPs, under ``matmul`` as ``FlopCounterMode`` counts a convolution
    (``conv_flop_count``): ``2·B·P·C·k`` forward, as much for the input gradient
    and for the weight gradient; the bias add and its gradient ``B·P·C`` under `all`.
    ``FlopCounterMode`` counts a grouped convolution's weight gradient as if
    ungrouped (``C`` times ours): not followed.

    ``state = true`` (default): at inference the last ``k`` inputs of each
    channel, ``[B, C, k]`` in the compute dtype, kept per sequence: what transformers 5.24 stores
    (``LinearAttentionLayer.update_conv_state`` in cache_utils.py keeps "the last ``conv_kernel_size``
    tokens", the mixers passing ``conv_kernel``: ``[b, C, K]`` bf16 after a prefill) and ``mamba_ssm``'s
    ``allocate_inference_cache`` (``d_conv``). vLLM keeps ``k − 1`` (``MambaStateShapeCalculator``'s
    ``conv_state_shape = (conv_kernel - 1, ...)``, vllm/model_executor/layers/mamba/mamba_utils.py), the
    newest input arriving with the token: not followed."""
    x, k = c["x"], c["kernel"]
    if len(x.shape) != 3:
        c.fail(f"conv1d needs [B, S, C], got {x.shape_str()}")
    batch, seq, ch = x.shape
    positions = seq + k - 1 if c["padded"] else seq
    if c["padded"]:   # the [B, C, S + k − 1] result, of which the output is a view
        y = c.output(x.shape, role=c.float_role(x),
                     view_of=c.aux("padded", (batch, ch, positions), c.float_role(x)))
    else:
        y = c.output(x.shape, role=c.float_role(x))
    c.weight("weight", (ch, 1, k))
    mm = 2 * batch * positions * ch * k
    bias = batch * positions * ch if c["bias"] else 0
    if c["bias"]:
        c.weight("bias", (ch,))
    c.forward(Flops(matmul=mm, other=bias))
    c.backward_input(Flops(matmul=mm))
    c.backward_weight(Flops(matmul=mm, other=bias))
    c.save(x)
    if c["state"]:
        c.cache(c.aux("conv_state", (batch, ch, k), c.float_role(x)), None, state=True)
    return y


@op("selective_scan", "Mamba's selective SSM (Gu & Dao 2023): x, dt [B, S, D], B, C [B, S, N] → "
    "[B, S, D]; owns A [D, N] and D [D]; state [B, D, N] kept at inference",
    x="tensor", dt="tensor", B="tensor", C="tensor", skip=("bool", True), state_fp32=("bool", False),
    layout=("per_channel", "x", "dt"))
def selective_scan(c):
    """Per token ``t``, channel ``d`` and state entry ``n`` (Gu & Dao 2023,
    Alg. 2; ``selective_scan_ref`` of ``mamba_ssm``):
    ``h ← exp(Δ·A)·h + (Δ·u)·B``, ``y = Σ_n C·h (+ D·u)``, with parameters
    ``A`` (``A_log``, ``[D, N]``) and, with ``skip = true``, ``D`` (``[D]``).

    FLOPs (``T = B·S``): the contraction ``y = C·h`` is a product, ``2·T·D·N``
    under ``matmul`` (as ``FlopCounterMode`` counts Hugging Face's reference
    scan, one ``matmul`` of ``h`` by ``C`` per step); under `all` also
    ``5·T·D·N`` (Δ·A, exp, ·B, ·dA, +) and ``T·D`` for Δ·u, ``2·T·D`` for the
    skip. Backward: the input gradient ``4·T·D·N`` matmul (dh and dC: a
    product of two activations) and the `all` part again; the weight gradient
    (dA, dD) ``2·T·D·N (+ 2·T·D)`` under `all`.

    Keeps its inputs ``x``, ``dt``, ``B``, ``C`` (the fused kernel recomputes
    the states in backward, Gu & Dao §3.3.2; its per-chunk checkpoints of
    ``[B, D, S/2048, 2N]`` are not counted). At inference it keeps the state
    ``h``, ``[B, D, N]`` in the compute dtype, per sequence (``mamba_ssm``'s ``allocate_inference_cache``,
    vLLM's ``mamba_ssm_cache_dtype = "auto"``); ``state_fp32 = true``: in fp32, as transformers 5.24 keeps it
    (``MambaMixer``'s ``recurrent_states`` after a prefill: ``[b, D, N]`` float32)."""
    x, dt, bm, cm = c["x"], c["dt"], c["B"], c["C"]
    for name, t in (("x", x), ("dt", dt), ("B", bm), ("C", cm)):
        if len(t.shape) != 3:
            c.fail(f"selective_scan's {name} must be [B, S, ·], got {t.shape_str()}")
    batch, seq, d = x.shape
    n = bm.shape[-1]
    if not all(c.same(p, q) for p, q in zip(x.shape, dt.shape)):
        c.fail(f"selective_scan: dt {dt.shape_str()} must be shaped like x {x.shape_str()}")
    if not (c.same(cm.shape[-1], n) and all(c.same(t.shape[i], x.shape[i]) for t in (bm, cm) for i in (0, 1))):
        c.fail(f"selective_scan: B {bm.shape_str()} and C {cm.shape_str()} must be [B, S, N] alike")
    y = c.output(x.shape, role=c.float_role(x))
    c.weight("A_log", (d, n))
    if c["skip"]:
        c.weight("D", (d,))
    cells = batch * seq * d * n
    rows = batch * seq * d
    other = PER_ELEMENT["scan"] * cells + rows + (2 * rows if c["skip"] else 0)
    c.forward(Flops(matmul=2 * cells, other=other))
    c.backward_input(Flops(matmul=4 * cells, other=other))
    c.backward_weight(Flops(other=2 * cells + (2 * rows if c["skip"] else 0)))
    c.save(x, dt, bm, cm)
    c.cache(c.aux("ssm_state", (batch, d, n), "fp32" if c["state_fp32"] else c.float_role(x)), None, state=True)
    return y
