"""The cross-entropy implementations over the logits: one convention per implementation
(:data:`costgraph.choices.CROSS_ENTROPY`, ``--cross-entropy``), each with what it **holds** at
its peak (the training memory of the last stage, :func:`costgraph.training.memory.loss_bytes_per_logit`)
and what its kernels **move** (the step time's loss row, :func:`costgraph.training.step_kernels.loss_seconds`).

The numbers are data, ``training/cross_entropy.toml``, each with its source (Megatron-LM's
``tensor_parallel/cross_entropy.py`` unfused, its ``fusions/fused_cross_entropy.py``, Transformer
Engine's Triton kernels (``te``: before TE 2.18, the gradient written over the 16-bit logits, what
Megatron-Bridge's performance recipes run; ``te-fp32grad``: from TE 2.18, an fp32 gradient), PyTorch's
``F.cross_entropy`` as torchtitan calls it (``pytorch``: on fp32-upcast logits) and as NeMo AutoModel's MoE
recipes call it (``pytorch-bf16``: MaskedCrossEntropy ``fp32_upcast: false``, on the 16-bit logits), and ``logits``: costgraph's count before the
implementations were told apart, the default while the documentation's printed figures keep it).
A Megatron-LM launch file's ``--cross-entropy-loss-fusion`` reads as ``megatron-fused``
(:mod:`costgraph.launch.megatron`), a torchtitan file as ``pytorch`` (:mod:`costgraph.launch.torchtitan`).

>>> implementation("megatron-fused").forward_bytes, implementation("megatron-fused").backward_bytes
(22, 10)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from .. import datafiles
from ..datafiles import Field, Kind, Schema
from ..errors import CostgraphValueError

#: an implementation of ``cross_entropy.toml`` (fields: the file's header)
IMPLEMENTATION = Kind("cross-entropy implementation", (
    Field("description", "text"), Field("source", "text", doc="where its kernels are"),
    Field("kernel", "text", doc="the kernels timed, as the step text names them"),
    Field("held_fp32", unit="buffers", doc="fp32 buffers of the logits' shape live at the loss's peak"),
    Field("held_act", unit="buffers", doc="buffers in the activations' precision live then"),
    Field("forward_bytes", unit="B", doc="bytes read and written per logit element, forward"),
    Field("backward_bytes", unit="B", doc="the same, backward"),
    Field("forward_kernels", unit="kernels", doc="kernels launched, forward (each the table's fixed time)"),
    Field("backward_kernels", unit="kernels", doc="the same, backward"),
))
SCHEMA = Schema("cross_entropy.toml", "costgraph.training", entries=IMPLEMENTATION)

#: fp32: the cross-entropy's upcast of the logits (Megatron-LM and PyTorch alike)
FP32_BYTES = 4


@dataclass(frozen=True)
class CrossEntropy:
    """One implementation: ``name`` (a value of :data:`costgraph.choices.CROSS_ENTROPY`), the
    ``kernel`` the step text names, ``held_fp32`` and ``held_act`` (buffers live at the peak, fp32 and
    in the activations' precision), ``forward_bytes``/``backward_bytes`` (moved per logit element),
    ``source``."""

    name: str
    kernel: str
    held_fp32: int
    held_act: int
    forward_bytes: int
    backward_bytes: int
    source: str
    forward_kernels: int = 0
    backward_kernels: int = 0

    def held(self, act_bytes) -> object:
        """Bytes per logit element held at the peak, the activations ``act_bytes`` bytes an element."""
        return FP32_BYTES * self.held_fp32 + act_bytes * self.held_act

    def held_words(self, act: str) -> str:
        """What :meth:`held` counts, in words, the activations' dtype ``act`` (``bf16``, ``fp16``, ``fp32``):
        ``--cross-entropy megatron: 1 fp32 + 1 bf16 buffer of the logits' shape``."""
        counts = {"fp32": self.held_fp32}
        counts[act] = counts.get(act, 0) + self.held_act
        n = sum(counts.values())
        held = " + ".join(f"{k} {d}" for d, k in counts.items() if k)
        return f"--cross-entropy {self.name}: {held} buffer{'' if n == 1 else 's'} of the logits' shape"


@cache
def _table() -> dict[str, CrossEntropy]:
    data = datafiles.load(SCHEMA)
    return {n: CrossEntropy(n, e["kernel"], e["held_fp32"], e["held_act"], e["forward_bytes"], e["backward_bytes"],
                            e["source"], e["forward_kernels"], e["backward_kernels"]) for n, e in data.entries.items()}


def implementation(name: str) -> CrossEntropy:
    """The implementation called ``name``.

    Raises
    ------
    CostgraphValueError
        ``name`` is none of ``cross_entropy.toml``'s (the values of ``--cross-entropy`` as hint)."""
    table = _table()
    if isinstance(name, str) and name in table:
        return table[name]
    from ..choices import CROSS_ENTROPY

    raise CostgraphValueError(f"unknown cross_entropy {name!r}", hint=CROSS_ENTROPY.hint())


def implementations() -> dict[str, CrossEntropy]:
    """Every implementation of ``cross_entropy.toml``, by name."""
    return dict(_table())


def token_heads(cg) -> tuple[str, ...]:
    """The model outputs the cross-entropy is taken over as logits: an output a head produces — a weight's matrix
    product (``has_role(kind, "matrix")``, owned or tied) that changes the last axis from its input's (an
    ``lm_head`` h → V, a classifier h → labels), reached from the output through weightless nodes (Gemma 2's
    logit softcapping). A hidden state is none: a base model's last norm (a weight but no matrix), its pooler's
    h → h linear and tanh (Hugging Face's ``ViTPooler``, ``BertPooler``); nor is a residual add of tensors of one
    shape (a base model's last layer without a final norm, VideoMAEModel's). The axes are compared as symbols: a
    pooler to a width named by a dimension of its own (the bundled vit's ``pool``, h in the released configs) reads
    as a head. Kept in the graph's cache."""
    memo = cg.memo("token_heads")
    if "heads" not in memo:
        memo["heads"] = tuple(o for o in cg.outputs if _reaches_a_head(cg, cg.tensors[o].producer))
    return memo["heads"]


def _reaches_a_head(cg, node: str) -> bool:
    from ..ops.registry import has_role
    from .states import first_weighted

    def passes(data, ins) -> bool:    # a residual add x + f(x) of one shape: a hidden state whatever f holds
        shapes = {cg.tensors[t].shape for t in (*ins, *data.get("outputs", ())) if t in cg.tensors}
        return not (data["kind"] == "add" and len(ins) > 1 and len(shapes) == 1)   # (VideoMAEModel's last x +
        #   mlp(x): its fc2 i → h is no head); SigLIP's logits + logit_bias [1] are still the logits

    for n in first_weighted(cg, [node], passes):     # the first weighted node on each path decides
        data = cg.nodes[n]
        ins = [t for t in data.get("inputs", ()) if t in cg.tensors]
        if has_role(data["kind"], "matrix") and ins and data.get("outputs"):
            out, x = cg.tensors[data["outputs"][0]].shape, cg.tensors[ins[0]].shape
            if out and x and out[-1] != x[-1]:
                return True
    return False


def loss_warnings(cg, convention: str) -> list[str]:
    """The loss's assumption said where the model has no head (:func:`token_heads`): ``train`` takes the
    ``--cross-entropy`` over its last output as if it were logits, which no one trains (a base model drafted from
    ``ViTModel``: its pooler's [b, h]); never a silent default."""
    if token_heads(cg) or not cg.outputs:
        return []
    last = cg.outputs[-1]
    shape = ", ".join(str(d) for d in cg.tensors[last].shape)
    return [f"the model has no token head (no output is a weight's product to vocabulary or class logits): the loss "
            f"assumed is --cross-entropy {convention} over its last output {last} [{shape}] as if it were logits; "
            "a base model is trained through a head it lacks here (add the head to the model file, or leave the "
            "loss out with --no-loss)"]
