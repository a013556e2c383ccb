"""Routing at trace time: the drafter never needs a mixture of experts' routing values.

A traced forward runs on meta tensors, which hold no values; two forms of MoE forward need them or ignore them:

* **data-dependent dispatch**: JetMoE's router counts the tokens each expert receives and reads the counts back to
  Python (transformers 5.24 modeling_jetmoe.py ``JetMoeTopKGating.forward``: ``expert_size = gates.long().sum(0)``,
  ``expert_size.tolist()``), which fails on meta. Inside a *router* (recognised by its structure, :func:`is_router`)
  the stand-in :class:`_Balanced` answers that ``tolist()`` of a meta integer vector of E entries with a balanced
  split of the routed rows: ``T·k`` rows (T tokens, k experts each) over E experts, ``⌊T·k/E⌋`` or one more each.
  Everything else of the forward runs as written. The experts' products then sum, over the experts, to ``T·k`` rows
  of each expert weight, whatever the split: ``FlopCounterMode`` counts ``2·T·k·in·out`` per expert projection, the
  count at any routing, which is what the draft's ``repeat E as experts active k`` writes.
* **dense experts**: Llama 4's MoE (transformers 5.24 modeling_llama4.py ``Llama4TextMoe.forward``) runs every
  expert on every token, the tokens of the unchosen experts scaled by a score of zero (``sigmoid(-inf)``):
  ``FlopCounterMode`` counts E experts per token where only k do work, which the draft counts (its ``repeat E as
  experts active k``) and a routed kernel runs (vllm-project/vllm vllm/model_executor/models/llama4.py
  ``Llama4MoE.custom_routing_function``: top-k, then sigmoid, into ``FusedMoE``; torchtitan's Llama 4, token-choice
  routing into grouped GEMMs, torchtitan/experiments/llama4/README.md). :class:`Routing` finds such experts by their input: an
  experts module (stacked weights of E leading rows) whose forward consumes ``E·T`` rows ran densely; the check's
  count of them is the measured ``F·k/E`` (F: FlopCounterMode's count in that module, ``E·T`` rows through each
  projection, so E divides it). This is the **routed-experts convention**: PyTorch's dense count, less
  ``F·(E − k)/E`` per such module, is reported beside it (:attr:`costgraph.drafting.draft.Check.forward_flops_counted`).

* **zero-computation experts**: LongCat-Flash's experts (transformers 5.24 modeling_longcat_flash.py
  ``LongcatFlashExperts.forward``) loop over the experts hit (``nonzero`` of the hit mask, ``.item()``, then
  ``torch.where`` of each expert's tokens), E FFN experts and Z identity experts (``zero_expert_num``) that compute
  nothing; ``LongcatFlashTopkRouter`` chooses k of the E + Z. At trace time (:func:`_zero_mode`) every expert is hit
  and each receives its share of the balanced split of ``T·k`` rows over E + Z, so ``FlopCounterMode`` counts the FFN
  experts' share: ``k·E/(E + Z)`` experts per token where E + Z divides ``T·k`` (uniform routing over the E + Z
  candidates: 8 of the 12 routed for the default config, 512 FFN and 256 zero experts). The LongCat-Flash Technical
  Report (Meituan LongCat Team, 2025) holds the FFN experts per token at a target K_e with a PID-controlled expert
  bias, a value no field of the config names: the draft's count of these experts is a convention to name (not yet
  drafted: the layers are left as TODO). Its parameters still count ``gate_up_proj``'s
  E + Z rows (transformers builds it so).

Torch is imported by the caller (:func:`costgraph.drafting.model_build._forward`) and passed in: the ``torch`` extra stays
optional.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def is_router(torch, mod) -> bool:
    """A module that chooses experts: ints ``top_k`` and ``num_experts`` (``0 < top_k ≤ num_experts``) and a linear
    map to ``num_experts`` scores, its own ``weight`` [E, H] or one ``nn.Linear`` child H → E (JetMoE's
    ``JetMoeTopKGating.layer``, Llama 4's ``Llama4Router``, itself an ``nn.Linear``)."""
    k, e = getattr(mod, "top_k", None), getattr(mod, "num_experts", None)
    if not (_int(k) and _int(e) and k <= e):
        return False
    w = getattr(mod, "weight", None)
    if isinstance(w, torch.Tensor) and w.dim() == 2 and w.shape[0] == e:
        return True
    linears = [c for c in mod.children() if isinstance(c, torch.nn.Linear)]
    return len(linears) == 1 and linears[0].out_features == e


def _stacked_experts(torch, mod) -> int | None:
    """E, where every parameter of the module itself is a stack of E expert matrices ([E, ., .], at least one),
    else None."""
    shapes = [tuple(p.shape) for _, p in mod.named_parameters(recurse=False)]
    if not shapes or any(len(s) != 3 for s in shapes) or len({s[0] for s in shapes}) != 1:
        return None
    return shapes[0][0]


class _Balanced:
    """A TorchFunctionMode's body (made by :func:`_mode`): ``tolist()`` of a meta integer tensor of shape ``(E,)``
    answered with ``rows`` split as evenly as possible over E entries; every other call runs as written."""

    def __init__(self, experts: int, rows: int):
        self.experts, self.rows = experts, rows

    def counts(self) -> list[int]:
        q, r = divmod(self.rows, self.experts)
        return [q + (i < r) for i in range(self.experts)]


def _mode(torch, balanced: _Balanced):
    from torch.overrides import TorchFunctionMode

    class Balanced(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            t = args[0] if args else None
            if func is torch.Tensor.tolist and isinstance(t, torch.Tensor) and t.device.type == "meta" \
                    and tuple(t.shape) == (balanced.experts,) and not t.is_floating_point():
                return balanced.counts()
            return func(*args, **(kwargs or {}))

    return Balanced()


def _zero_experts(mod) -> tuple[int, int] | None:
    """(E, Z) of an experts module with zero-computation experts (LongCat-Flash's ``LongcatFlashExperts``, transformers
    5.24 modeling_longcat_flash.py: ``num_routed_experts`` FFN experts and ``zero_expert_num`` identity experts, whose
    forward loops over the experts hit: ``nonzero`` of the hit mask, then ``torch.where`` of each expert's tokens),
    else None."""
    e, z = getattr(mod, "num_routed_experts", None), getattr(mod, "zero_expert_num", None)
    return (e, z) if _int(e) and _int(z) and getattr(mod, "total_experts", None) == e + z else None


def _zero_mode(torch, balanced: _Balanced):
    """A TorchFunctionMode for one forward of a :func:`_zero_experts` module: ``nonzero`` of the meta hit mask [E + Z]
    answered with every expert (on the CPU: the loop reads each with ``.item()``), and each later one-argument
    ``torch.where`` of a meta mask with the next expert's rows of the balanced split (meta index tensors)."""
    from torch.overrides import TorchFunctionMode

    counts, state = balanced.counts(), {"next": 0}

    class ZeroExperts(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            t = args[0] if args else None
            meta = isinstance(t, torch.Tensor) and t.device.type == "meta"
            if meta and func in (torch.Tensor.nonzero, torch.nonzero) and tuple(t.shape) == (balanced.experts,):
                return torch.arange(balanced.experts).unsqueeze(1)
            if meta and func is torch.where and len(args) == 1 and not kwargs and state["next"] < len(counts):
                n = counts[state["next"]]
                state["next"] += 1
                return tuple(torch.zeros(n, dtype=torch.long, device="meta") for _ in range(t.dim()))
            return func(*args, **(kwargs or {}))

    return ZeroExperts()


@dataclass
class Routing:
    """What :func:`stand_ins` saw in one forward: ``dense``, the experts modules that ran every token through every
    expert, as (module path, E, k)."""

    tokens: int
    dense: list[tuple[str, int, int]] = field(default_factory=list)

    def routed_flops(self, total: int, by_module: dict, root: str) -> int:
        """``total`` (FlopCounterMode's) under the routed-experts convention: each dense experts module's count F
        (``by_module[root + "." + path]``, summed over its ops) replaced by ``F·k/E``. A count E does not divide is
        left as counted."""
        out = total
        for path, e, k in self.dense:
            f = sum(int(n) for n in by_module.get(f"{root}.{path}", {}).values())
            if f % e == 0:
                out -= f // e * (e - k)
        return out


@contextlib.contextmanager
def stand_ins(torch, model, tokens: int):
    """Hooks for one forward of ``tokens`` tokens (``b·s``): inside each router (:func:`is_router`) a meta
    ``tolist()`` of E counts is answered by the balanced split of ``rows·top_k`` (rows: the router's input
    rows); each experts module whose parent holds a router, or that holds ``top_k`` itself, is watched for a dense
    run (its input ``E·tokens`` rows). Yields the :class:`Routing`; hooks removed on exit."""
    routing = Routing(tokens)
    handles, modes = [], []
    mods = dict(model.named_modules())

    def enter(mod, args, kwargs):
        x = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
        rows = x.numel() // x.shape[-1] if x is not None and x.dim() else 0
        mode = _mode(torch, _Balanced(mod.num_experts, rows * mod.top_k))
        mode.__enter__()
        modes.append(mode)

    def leave(mod, args, kwargs, out):
        if modes:
            modes.pop().__exit__(None, None, None)

    def watch(path, e, k):
        def hook(mod, args, kwargs):
            x = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
            if x is not None and x.dim() and x.numel() // x.shape[-1] == e * tokens and k < e \
                    and all(p != path for p, _, _ in routing.dense):
                routing.dense.append((path, e, k))
        return hook

    def zero_enter(mod, args, kwargs):
        x = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
        ids = args[1] if len(args) > 1 else kwargs.get("top_k_index")
        rows = ids.numel() if isinstance(ids, torch.Tensor) else 0
        e, z = _zero_experts(mod)
        mode = _zero_mode(torch, _Balanced(e + z, rows))
        mode.__enter__()
        modes.append(mode)

    for path, mod in mods.items():
        if _zero_experts(mod) is not None:
            handles.append(mod.register_forward_pre_hook(zero_enter, with_kwargs=True))
            handles.append(mod.register_forward_hook(leave, with_kwargs=True))
        if is_router(torch, mod):
            handles.append(mod.register_forward_pre_hook(enter, with_kwargs=True))
            handles.append(mod.register_forward_hook(leave, with_kwargs=True))
        e = _stacked_experts(torch, mod)
        if e is None or not path:
            continue
        parent = mods.get(path.rsplit(".", 1)[0] if "." in path else "")
        k = getattr(parent, "top_k", None)
        if not _int(k):
            k = next((c.top_k for c in parent.children() if is_router(torch, c) and c.num_experts == e), None) \
                if parent is not None else None
        if _int(k):
            handles.append(mod.register_forward_pre_hook(watch(path, e, k), with_kwargs=True))
    try:
        yield routing
    finally:
        while modes:
            modes.pop().__exit__(None, None, None)
        for h in handles:
            h.remove()
