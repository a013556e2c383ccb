"""The new operators against PyTorch (``FlopCounterMode`` and the storages
``saved_tensors_hooks`` sees), on CPU; skipped without the torch extra. The
operators' own exact tests are in ``tests/ops/test_new_ops.py``."""

from __future__ import annotations

import pytest
import sympy  # noqa: F401

import costgraph  # noqa: F401
from test_new_ops import B, H, HEAD, K, N, S, SIZES, costs, model  # noqa: F401

torch = pytest.importorskip("torch")


def _measure(fn, *inputs, params=()):
    """Forward and backward FLOPs (``FlopCounterMode``) and the bytes of the
    distinct storages autograd keeps (``saved_tensors_hooks``) for ``fn``,
    parameters not counted (on the meta device, each tensor its own storage)."""
    from torch.utils.flop_counter import FlopCounterMode

    storages, kept = {}, []
    weights = {p.untyped_storage().data_ptr() for p in params}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in weights:
            kept.append(t)
            storages[st.data_ptr() or id(t)] = st.nbytes()
        return t

    with FlopCounterMode(display=False) as fc:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = fn(*inputs)
        fwd = fc.get_total_flops()
        first = out[0] if isinstance(out, tuple) else out
        first.float().sum().backward()
    return fwd, fc.get_total_flops() - fwd, sum(storages.values())


def _x(dtype=torch.bfloat16, device="cpu"):
    return torch.randn(B, S, H, dtype=dtype, device=device, requires_grad=True)


def _rms(x):
    """Hugging Face's RMSNorm without γ: ``x.float()`` once, normalised, cast back."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)


@pytest.mark.parametrize("body, fn", [
    ("return sigmoid(x)", torch.sigmoid),
    ("return tanh(x)", torch.tanh),
    ("return softplus(x)", torch.nn.functional.softplus),
    ("return square(x)", torch.square),
    ("return relu2(x)", lambda x: torch.square(torch.relu(x))),
    ("return clamp(x)", lambda x: torch.clamp(x, -1.0, 1.0)),
    ("return softcap(x, cap = 30)", lambda x: torch.tanh(x / 30.0) * 30.0),
    ("return max(x)", lambda x: x.max(dim=-1).values),
    ("v, i = topk(x, k)\n  return v", lambda x: torch.topk(x, K)),
    ("return rmsnorm(x, weight = false)", _rms),
    # on a GPU (and the meta device) LayerNorm keeps fp32 mean and 1/σ; on CPU in bf16
    ("return layernorm(x, weight = false)", lambda x: torch.nn.functional.layer_norm(x, (H,))),
])
def test_torch_agreement_unary(body, fn):
    fwd, bwd, saved = _measure(fn, _x(device="meta" if "layernorm" in body else "cpu"))
    got = costs(body, convention="matmul")
    assert (fwd, bwd, saved) == (got["flops_forward"], got["flops_backward_input"] + got["flops_backward_weight"],
                                 got["activation_bytes"])


def test_torch_agreement_xielu():
    """transformers 5.24 ``XIELUActivation`` (activations.py; the Python form, without the xIELU CUDA wheel):
    its two parameters, no matrix product, and the storages autograd keeps (β and ε are buffers)."""
    activations = pytest.importorskip("transformers.activations")
    act = activations.XIELUActivation(dtype=torch.bfloat16)
    got = costs("return xielu(x)", convention="matmul")
    assert sum(p.numel() for p in act.parameters()) == got["params"] == 2
    fwd, bwd, saved = _measure(act, _x(), params=[*act.parameters(), *act.buffers()])
    assert (fwd, bwd, saved) == (got["flops_forward"], got["flops_backward_input"] + got["flops_backward_weight"],
                                 got["activation_bytes"])


def test_torch_agreement_gather_scatter():
    ids = torch.randint(0, B * S, (N,))
    x = _x()
    got = costs("return gather(x, ids)", convention="matmul")
    assert _measure(lambda x: x.reshape(-1, H)[ids], x) == (0, 0, got["activation_bytes"])
    assert _measure(lambda x: torch.index_select(x.reshape(-1, H), 0, ids), _x())[2] == got["activation_bytes"]
    got = costs("return scatter(gather(x, ids), ids, b * s)", convention="matmul")
    assert _measure(lambda x: torch.zeros(B * S, H, dtype=x.dtype).index_add(0, ids, x.reshape(-1, H)[ids]),
                    _x()) == (0, 0, got["activation_bytes"])


def test_torch_agreement_depthwise_conv1d():
    conv = torch.nn.Conv1d(H, H, K, groups=H, padding=0, dtype=torch.bfloat16)
    want = costs("return conv1d(x, k)", convention="matmul")
    assert sum(p.numel() for p in conv.parameters()) == want["params"]

    def causal(x):   # left padding k − 1: exactly S outputs
        return conv(torch.nn.functional.pad(x.transpose(1, 2), (K - 1, 0))).transpose(1, 2)

    x = _x()
    fwd, bwd, saved = _measure(causal, x, params=list(conv.parameters()))
    assert fwd == want["flops_forward"] == 2 * B * S * H * K
    # FlopCounterMode counts the grouped weight gradient as if ungrouped: C times ours
    assert bwd == want["flops_backward_input"] + H * want["flops_backward_weight"]
    # autograd keeps the padded input (our count: the input) and the conv's own view
    assert saved == 2 * B * H * (S + K - 1) == want["activation_bytes"] + 2 * B * H * (K - 1)
