"""The training side of the calculator page (:mod:`costgraph.export.web`): memory per device, FLOPs
and the step time as :func:`costgraph.training.api.train` derives them under a
:class:`~costgraph.parallel.layout.Layout` with symbolic degrees ``TP``, ``PP``, ``DP``.

The memory of a stage is ``weights + gradients + optimizer + activations`` (the loss's fp32 logits
inside the activations; :mod:`costgraph.training.memory`), ``+ fp8`` under an FP8 policy (Transformer
Engine's FP8 weight copies, transposes, scales and amax history: :func:`costgraph.training.fp8.fp8_memory`),
and each part depends on fewer choices
than the whole, so the page carries one closed form per part and the choices it depends on, and adds
them up (``web.js``) — not one per combination:

* weights, gradients and the FP8 buffers: the precision policy × ZeRO stage;
* optimizer states: the precision policy × optimizer × ZeRO stage;
* activations: their precision (fp32 under the ``fp32`` policy, else bf16, as ``costgraph train
  --precision`` sets them) × recompute policy;

each for the whole model (``PP = 1``) and for the first and the last pipeline stage (``PP > 1``,
Megatron-LM's 1F1B schedule, ``m = PP`` micro-batches). FP8 policies' activations are their own
(the FP8 copies of the GEMMs' saved inputs). The step time — the rate ``costgraph train --hardware``
uses by default, its bubble, exposed communication and optimizer step — for every policy, optimizer,
ZeRO stage, recompute policy and stage set on every preset of the menu: :mod:`costgraph.export.web_steps`.
The FP8 buffers per FP8 weight transpose the presets keep, each preset's as ``train`` resolves it
(:func:`costgraph.training.fp8.on_hardware`).
"""

from __future__ import annotations

from ..choices import DEFAULT_OPTIMIZER, DEFAULT_POLICY, RECOMPUTE_SEARCHED, ZERO_STAGE

#: the FP8 policies the page offers (``costgraph train --precision``): Transformer Engine's recipes of
#: policies.toml — delayed and current (tensor-wise) scaling, blockwise (1×128 and 128×128 tiles, compute capability
#: 9.0 and up) and MXFP8 (compute capability 10.x) — each on the presets that run it, as train refuses it elsewhere
#: (fp8.toml's capability bounds: :func:`costgraph.export.web_steps.runs`)
FP8_POLICIES = ("fp8-delayed", "fp8-current", "fp8-blockwise", "fp8-mxfp8")
POLICIES = (DEFAULT_POLICY, "bf16", "fp32") + FP8_POLICIES
#: the optimizers the page offers (``costgraph train --optimizer``; the default first)
OPTIMIZERS = (DEFAULT_OPTIMIZER, "adam-8bit", "adafactor", "lion", "muon", "sgd")
#: stage sets: one stage (PP = 1); the first and the last stage (PP > 1)
STAGES = {"single": "the whole model (PP = 1)", "first": "stage 0 (first)", "last": "stage PP-1 (last)"}


#: the parts' letters in the page's function names
_SHORT = {"weights": "w", "gradients": "g", "optimizer": "o", "activations": "a", "fp8": "f8"}


def activation_precision(policy: str) -> str:
    """The activations' precision under ``policy``, as ``costgraph train --precision`` sets it."""
    return "fp32" if policy == "fp32" else "bf16"


def activation_key(policy: str) -> str:
    """The key of ``policy``'s activations in the page's table: their precision, or an FP8 policy's own
    name (its GEMMs save FP8 copies of their inputs: :mod:`costgraph.training.fp8`)."""
    return policy if policy in FP8_POLICIES else activation_precision(policy)


def _keys(p) -> tuple:
    """The stage sets of ``p`` stages (:data:`STAGES`)."""
    return ("single",) if p == 1 else ("first", "last")


def _stages(result, p) -> dict:
    return {"single": result.stages[0]} if p == 1 else {"first": result.stages[0], "last": result.stages[-1]}


def training_table(model, add, pipeline: bool) -> dict:
    """The page's training table (module docstring). ``add(name, scope, quantity, unit, meaning, expr)``
    writes one exact function and returns ``{"fn"}``; ``pipeline``: the model has repeated
    layers to split into stages. An FP8 policy's buffers: transpose → part, for each FP8 weight transpose
    a preset keeps (:func:`costgraph.export.web_steps.fp8_transposes`; the page picks the preset's)."""
    import sympy

    from ..engine.symbols import dim
    from ..parallel.layout import Layout
    from ..training.memory import training_memory   # the memory train() reports, without its FLOPs and time
    from .web_steps import fp8_transposes

    tp, pp, dp = dim("TP"), dim("PP"), dim("DP")
    degrees = (1, pp) if pipeline else (1,)
    table: dict = {"states": {}, "optimizer": {}, "activations": {}, "flops": None, "step": None,
                   "activation_precision": {p: activation_key(p) for p in POLICIES}, "fp8": list(FP8_POLICIES),
                   "fp8_transpose": {p: fp8_transposes(p) for p in FP8_POLICIES}}

    def layout(p, **kw):
        pol = kw.get("policy", DEFAULT_POLICY)
        return Layout(t=tp, p=p, d=dp, precision=activation_precision(pol), **kw)

    def part(c, key, what, expr):   # expanded here, the one part shown (train expands every part)
        # short names (t_o_mixed_adam_z1_f: optimizer states, ``mixed``, Adam, ZeRO-1, the first stage): a name is
        # written wherever its closed form is used
        return add(f"t_{_SHORT[c]}_{what}_{key[0]}".replace("-", "_"), f"train/{what}/{key}", c, "B",
                   f"training {c} bytes per device, {STAGES[key]}", sympy.expand(expr))

    def memory(L):   # each stage's parts unexpanded: the same values, only the parts used are expanded (part)
        return training_memory(model.graph, L, expand=False)

    for pol in POLICIES:
        # the transposes the presets keep (first: the one the other parts are derived under; they read none)
        transposes = sorted(set(table["fp8_transpose"][pol].values()), reverse=True) if pol in FP8_POLICIES \
            else [None]
        for zero in ZERO_STAGE.values:
            for opt in OPTIMIZERS:
                for p in degrees:
                    if opt != OPTIMIZERS[0] and zero >= 2:   # ZeRO-2 and -3 shard the optimizer states as ZeRO-1
                        # does ((M + S)/n at every stage from 1: training.states.assemble): ZeRO-1's parts, not
                        # another derivation of the whole memory for them
                        by = table["optimizer"][pol][opt]
                        by[str(zero)] = {**by.get(str(zero), {}), **{k: by["1"][k] for k in _keys(p)}}
                        continue
                    tr = {"fp8_transpose": transposes[0]} if transposes[0] else {}
                    result = memory(layout(p, zero=zero, policy=pol, optimizer=opt, **tr))
                    for key, stage in _stages(result, p).items():
                        if opt == OPTIMIZERS[0]:
                            table["states"].setdefault(pol, {}).setdefault(str(zero), {})[key] = {
                                c: part(c, key, f"{pol}_z{zero}", stage.memory[c]) for c in ("weights", "gradients")}
                        if opt == OPTIMIZERS[0] and "fp8" in stage.memory:   # TE's FP8 weight copies, scales
                            table["states"][pol][str(zero)][key]["fp8"] = {transposes[0]: part(
                                "fp8", key, f"{pol}_z{zero}_{transposes[0]}", stage.memory["fp8"])}
                            for t in transposes[1:]:   # Blackwell keeps no transpose (training.fp8.transpose_for)
                                other = memory(layout(p, zero=zero, policy=pol, optimizer=opt, fp8_transpose=t))
                                table["states"][pol][str(zero)][key]["fp8"][t] = part(
                                    "fp8", key, f"{pol}_z{zero}_{t}", _stages(other, p)[key].memory["fp8"])
                        table["optimizer"].setdefault(pol, {}).setdefault(opt, {}).setdefault(str(zero), {})[key] = \
                            part("optimizer", key, f"{pol}_{opt}_z{zero}", stage.memory["optimizer"])
    for pol in dict.fromkeys(POLICIES, None):
        prec = activation_key(pol)
        if prec in table["activations"]:
            continue
        for recompute in RECOMPUTE_SEARCHED:
            for p in degrees:
                result = memory(layout(p, recompute=recompute, policy=pol))
                for key, stage in _stages(result, p).items():
                    table["activations"].setdefault(prec, {}).setdefault(recompute, {})[key] = \
                        part("activations", key, f"{prec}_{recompute}", stage.memory["activations"])
    _steps(model, table, degrees, layout, add)
    return table


def _steps(model, table: dict, degrees, layout, add) -> None:
    """The FLOPs per device and the step time (:mod:`costgraph.export.web_steps`), into ``table``."""
    from ..training.compute import training_flops
    from .web_steps import step_table

    flops = training_flops(model.graph, layout(1).filled())   # train's (PP = 1: m = PP micro-batches)
    table["flops"] = add("train_flops_per_device", "train", "flops_per_device", "FLOP",
                         "model FLOPs per device per iteration (m = PP micro-batches of b)", flops["model_per_device"])
    table["step"] = step_table(model, layout, degrees, POLICIES, OPTIMIZERS)


__all__ = ["FP8_POLICIES", "OPTIMIZERS", "POLICIES", "STAGES", "activation_key", "activation_precision", "training_table"]
