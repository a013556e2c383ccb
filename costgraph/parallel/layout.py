"""A parallel layout and its training settings: :class:`Layout`.

The degrees of parallelism (``t`` tensor, ``p`` pipeline, ``c`` context,
``e`` expert, ``etp`` expert tensor, ``d`` data, ``hsdp``), the pipeline
schedule, and the settings the training analyses read (ZeRO stage,
recomputation, attention kernel, precision policy, optimizer, LoRA). Names
and defaults come from :mod:`costgraph.choices`; :meth:`Layout.filled`
checks them and fills the derived ones. Who holds which part of each tensor
under a layout is :func:`costgraph.parallel.placement.placement`.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from .. import choices
from ..errors import CostgraphValueError
from ..engine.symbols import dim

# The data-parallel degree when none is given (the same symbol as
# costgraph.training.states.DP). Not ``d``: Llama-style models already use
# ``d`` for the head dimension. N_d is the ZeRO paper's name.
DP = dim(choices.DP_SYMBOL)


#: the most devices a layout may have (as the planner's search)
MAX_DEVICES = 10**6

@dataclass
class Layout:
    """A parallel layout and training settings (defaults filled in).

    ``t`` TP, ``p`` PP, ``c`` CP, ``e`` EP, ``etp`` expert TP (1 or ``t``),
    ``d`` DP (from ``gpus``, or the symbol ``N_d``), ``sp`` sequence
    parallelism, ``zero`` ZeRO stage, ``m`` micro-batches per step (default
    ``p``), ``schedule`` and ``v`` (virtual stages, interleaved schedule),
    ``recompute``, ``attention``, ``policy``, ``optimizer``, ``precision``
    (activation bytes), ``hsdp`` (HSDP group size), ``loss`` (count the
    fp32 logits), ``gpus``; ``lora_rank``, ``lora_targets``, ``lora_dropout``
    (LoRA adapters on the named linears, the base frozen:
    :mod:`costgraph.training.lora`) and ``quantization`` (QLoRA: the frozen
    base in ``nf4``, ``nf4-double`` or ``int8``); ``tp_replicated``: names of head-count
    dimensions (``kv``) with fewer heads than ``t``, which TP replicates as Megatron-LM
    does (each rank holds one head; filled from the values by
    :func:`costgraph.parallel.tensor.kv_replication`)."""

    t: object = 1
    p: object = 1
    c: object = 1
    e: object = 1
    etp: object = None
    d: object = None
    gpus: int | None = None
    sp: bool = False
    zero: int = choices.ZERO_STAGE.default
    m: object = None
    schedule: str = choices.SCHEDULE.default
    v: int = 1
    recompute: str = choices.RECOMPUTE.default
    attention: str = choices.ATTENTION.default
    policy: str = choices.DEFAULT_POLICY
    optimizer: str = choices.DEFAULT_OPTIMIZER
    precision: str = choices.PRECISION.default
    hsdp: object = None
    loss: bool = True
    lora_rank: object = None
    lora_targets: object = choices.DEFAULT_LORA_TARGETS
    lora_dropout: bool = False
    quantization: str | None = None
    tp_replicated: tuple = ()

    def filled(self) -> "Layout":
        """Check the settings and fill the derived ones (``d``, ``m``, ``etp``).

        Raises
        ------
        CostgraphValueError
            An unknown name, a degree that is not a positive whole number, or
            ``gpus`` not a multiple of ``t·p·c``.
        """
        out = Layout(**self.__dict__)
        for name in ("t", "p", "c", "e", "v"):
            _degree(getattr(out, name), name)
        for name in ("sp", "loss", "lora_dropout"):
            if not isinstance(getattr(out, name), bool):
                raise CostgraphValueError(f"{name} must be true or false, got {getattr(out, name)!r}")
        if out.m is not None:
            _degree(out.m, "m (micro-batches per step)")
        if out.hsdp is not None:
            _degree(out.hsdp, "hsdp")
        if out.lora_rank is not None:
            _degree(out.lora_rank, "lora_rank")
        if isinstance(out.zero, bool) or not isinstance(out.zero, int):
            raise CostgraphValueError(f"zero must be a stage 0-3, got {out.zero!r}")
        if out.zero not in choices.ZERO_STAGE.values:
            raise CostgraphValueError(f"ZeRO stage {out.zero!r} does not exist", hint="0, 1, 2 or 3")
        for choice in (choices.RECOMPUTE, choices.ATTENTION, choices.SCHEDULE):
            if getattr(out, choice.name) not in choice.values:
                raise CostgraphValueError(f"unknown {choice.name} {getattr(out, choice.name)!r}", hint=choice.hint())
        if out.hsdp is not None and out.zero == 0:
            raise CostgraphValueError("HSDP shards ZeRO's states within groups: it needs ZeRO 1, 2 or 3")
        if out.schedule != "interleaved" and out.v != 1:
            raise CostgraphValueError("virtual stages (v) need the interleaved schedule", hint="--schedule interleaved")
        if out.sp and out.t == 1:
            raise CostgraphValueError("sequence parallelism splits along s the regions tensor parallelism replicates: "
                                      "it needs t > 1", hint="add --tp T")
        if not isinstance(out.tp_replicated, tuple) or not all(isinstance(n, str) for n in out.tp_replicated):
            raise CostgraphValueError(f"tp_replicated names dimensions (a tuple of names), got {out.tp_replicated!r}")
        if out.gpus is not None:
            _degree(out.gpus, "gpus")
            if out.gpus > MAX_DEVICES:
                raise CostgraphValueError(f"gpus is over {MAX_DEVICES:,}: at most {MAX_DEVICES:,} devices",
                                          hint="the largest clusters trained on have about 10^5")
            per = out.t * out.p * out.c
            if isinstance(per, int) and out.gpus % per:
                raise CostgraphValueError(f"{out.gpus} GPUs do not divide into t·p·c = {per}",
                                          hint="gpus = t × p × c × d for a whole data-parallel degree d")
            out.d = out.gpus // per if isinstance(per, int) else sympy.Integer(out.gpus) / per
        if out.d is None:
            out.d = DP
        if out.m is None:
            out.m = out.p
        if out.etp is None:
            out.etp = 1
        if out.quantization is not None and out.lora_rank is None:
            raise CostgraphValueError("a quantized base is frozen: quantization needs LoRA adapters",
                                      hint="add --lora R (QLoRA)")
        if out.etp not in (1, out.t):
            raise CostgraphValueError("expert tensor parallelism is 1 or t", hint="--etp 1 (default) or --etp T")
        if isinstance(out.e, int) and isinstance(out.d, int) and isinstance(out.t, int) and isinstance(out.c, int) \
                and (out.d * out.c * out.t) % (out.e * out.etp):
            raise CostgraphValueError(f"expert parallelism e·etp = {out.e * out.etp} must divide d·c·t = "
                                      f"{out.d * out.c * out.t}", hint="experts are spread over data-parallel ranks")
        return out


#: the command-line option of each degree (errors name both: the API's field and the CLI's flag)
_FLAGS = {"t": "--tp", "p": "--pp", "c": "--cp", "e": "--ep", "v": "--virtual-stages", "gpus": "--gpus",
          "hsdp": "--hsdp", "lora_rank": "--lora", "m (micro-batches per step)": "--micro-batches"}


def _degree(v, name):
    if isinstance(v, bool) or not (isinstance(v, int) and v > 0 or isinstance(v, sympy.Expr) and v.is_positive):
        flag = f" ({_FLAGS[name]})" if name in _FLAGS else ""
        raise CostgraphValueError(f"{name}{flag} must be a positive whole number, got {v!r}")
