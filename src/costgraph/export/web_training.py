"""The training side of the calculator page (:mod:`costgraph.export.web`): memory per device, FLOPs
and the step time as :func:`costgraph.training.api.train` derives them under a
:class:`~costgraph.parallel.layout.Layout` with symbolic degrees ``TP``, ``PP``, ``DP``.

The memory of a stage is ``weights + gradients + optimizer + activations`` (the loss's fp32 logits
inside the activations; :mod:`costgraph.training.memory`), and each part depends on fewer choices
than the whole, so the page carries one closed form per part and the choices it depends on, and adds
them up (``web.js``) — not one per combination:

* weights and gradients: the precision policy × ZeRO stage;
* optimizer states: the precision policy × optimizer × ZeRO stage;
* activations: their precision (fp32 under the ``fp32`` policy, else bf16, as ``costgraph train
  --precision`` sets them) × recompute policy;

each for the whole model (``PP = 1``) and for the first and the last pipeline stage (``PP > 1``,
Megatron-LM's 1F1B schedule, ``m = PP`` micro-batches). The step time on the page's preset — the
rate ``costgraph train --hardware`` uses by default, its bubble and exposed communication — is a tree
(:mod:`costgraph.export.web_tree`) per ZeRO stage × recompute policy × ``PP = 1`` or not, under the
page's first precision policy and optimizer (the per-kernel model's optimizer step reads the optimizer's
states: :mod:`costgraph.training.step_kernels`).
"""

from __future__ import annotations

from ..choices import DEFAULT_OPTIMIZER, DEFAULT_POLICY, RECOMPUTE_SEARCHED, ZERO_STAGE

#: the precision policies the page offers (``costgraph train --precision``; the default first)
POLICIES = (DEFAULT_POLICY, "bf16", "fp32")
#: the optimizers the page offers (``costgraph train --optimizer``; the default first)
OPTIMIZERS = (DEFAULT_OPTIMIZER, "adam-8bit", "adafactor", "lion", "muon", "sgd")
#: stage sets: one stage (PP = 1); the first and the last stage (PP > 1)
STAGES = {"single": "the whole model (PP = 1)", "first": "stage 0 (first)", "last": "stage PP-1 (last)"}


def activation_precision(policy: str) -> str:
    """The activations' precision under ``policy``, as ``costgraph train --precision`` sets it."""
    return "fp32" if policy == "fp32" else "bf16"


def _stages(result, p) -> dict:
    return {"single": result.stages[0]} if p == 1 else {"first": result.stages[0], "last": result.stages[-1]}


def training_table(model, add, pipeline: bool, hardware: str, policy: str = DEFAULT_POLICY,
                   optimizer: str = DEFAULT_OPTIMIZER) -> dict:
    """The page's training table (module docstring). ``add(name, scope, quantity, unit, meaning, expr)``
    writes one exact function and returns ``{"fn", "formula"}``; ``pipeline``: the model has repeated
    layers to split into stages; ``hardware``: the preset of the step time; ``policy``, ``optimizer``: its
    precision and optimizer (the per-kernel model's optimizer step reads the optimizer's states)."""
    from ..engine.symbols import dim
    from ..parallel.layout import Layout
    from ..training.memory import training_memory   # the memory train() reports, without its FLOPs and time

    tp, pp, dp = dim("TP"), dim("PP"), dim("DP")
    degrees = (1, pp) if pipeline else (1,)
    table: dict = {"states": {}, "optimizer": {}, "activations": {}, "flops": None, "step": {}, "rate": None,
                   "step_policy": policy, "step_optimizer": optimizer, "activation_precision": {p: activation_precision(p) for p in POLICIES}}

    def layout(p, **kw):
        pol = kw.get("policy", DEFAULT_POLICY)
        return Layout(t=tp, p=p, d=dp, precision=activation_precision(pol), **kw)

    def part(c, key, what, expr):
        return add(f"train_{c}_{what}_{key}".replace("-", "_"), f"train/{what}/{key}", c, "B",
                   f"training {c} bytes per device, {STAGES[key]}", expr)

    for pol in POLICIES:
        for zero in ZERO_STAGE.values:
            for opt in OPTIMIZERS:
                for p in degrees:
                    result = training_memory(model.graph, layout(p, zero=zero, policy=pol, optimizer=opt))
                    for key, stage in _stages(result, p).items():
                        if opt == OPTIMIZERS[0]:
                            table["states"].setdefault(pol, {}).setdefault(str(zero), {})[key] = {
                                c: part(c, key, f"{pol}_z{zero}", stage.memory[c]) for c in ("weights", "gradients")}
                        table["optimizer"].setdefault(pol, {}).setdefault(opt, {}).setdefault(str(zero), {})[key] = \
                            part("optimizer", key, f"{pol}_{opt}_z{zero}", stage.memory["optimizer"])
    for pol in dict.fromkeys(POLICIES, None):
        prec = activation_precision(pol)
        if prec in table["activations"]:
            continue
        for recompute in RECOMPUTE_SEARCHED:
            for p in degrees:
                result = training_memory(model.graph, layout(p, recompute=recompute, policy=pol))
                for key, stage in _stages(result, p).items():
                    table["activations"].setdefault(prec, {}).setdefault(recompute, {})[key] = \
                        part("activations", key, f"{prec}_{recompute}", stage.memory["activations"])
    _steps(model, table, degrees, hardware, layout, add)
    return table


def _steps(model, table: dict, degrees, hardware: str, layout, add) -> None:
    """The step time trees and the FLOPs per device (module docstring), into ``table``."""
    from ..training.api import train
    from .web_tree import program as step_tree

    for zero in ZERO_STAGE.values:
        for recompute in RECOMPUTE_SEARCHED:
            steps = table["step"].setdefault(str(zero), {}).setdefault(recompute, {})
            for p in degrees:
                result = train(model, layout(p, zero=zero, recompute=recompute, policy=table["step_policy"],
                                             optimizer=table["step_optimizer"]),
                               hardware=hardware)
                steps["1" if p == 1 else "PP"] = step_tree(result.compute["step"]["total"])
                table["rate"] = table["rate"] or result.compute["rate"].describe()
                if table["flops"] is None:
                    table["flops"] = add("train_flops_per_device", "train", "flops_per_device", "FLOP",
                                         "model FLOPs per device per iteration (m = PP micro-batches of b)",
                                         result.flops["model_per_device"])


__all__ = ["OPTIMIZERS", "POLICIES", "STAGES", "activation_precision", "training_table"]
