"""The step time of the calculator page (:mod:`costgraph.export.web`) on every preset of the menu, for every
precision policy, optimizer, ZeRO stage, recompute policy and ``PP = 1`` or not the menus offer.

``costgraph train --hardware``'s default step time (:func:`costgraph.training.steptime.step_time`: the
per-kernel model of ``kernels.toml`` on a preset with a kernel table, else 1/2 of the peaks; the pipeline
bubble; the exposed communication under Megatron's overlap; the per-kernel model's optimizer step) is

    total = rest(preset, policy, ZeRO, recompute, PP) + optimizer(preset, policy, optimizer, ZeRO, PP)

(:func:`costgraph.training.steptime.combine`: the optimizer step is added once per step, after the
gradients; nothing else reads the optimizer: ``tests/export/test_web.py`` checks the sum against ``train`` for
other optimizers), so the page carries ``rest`` per step-time model × policy × ZeRO × recompute × stage set
and the optimizer step per policy × optimizer × ZeRO × stage set, and adds them. Every closed form is
written into one pool of shared parts (:func:`costgraph.export.web_tree.interned`): a part met in several
combinations (the compute of a recompute policy under every ZeRO stage, the communication of a ZeRO stage
under every recompute policy, the same tree under ``mixed`` and ``bf16``) is written once.

Step-time models (:func:`step_models`): a preset with a kernel table (``h100-sxm``, ``h200``, ``b200``,
``gb200``, ``gb300``) is its own; the flat-efficiency presets share one per structure — their scale-up domain, which
links are absent, which of the page's policies run there and the FP8 weight transpose Transformer Engine
keeps (:func:`costgraph.training.fp8.on_hardware`) — derived on the preset with its numbers as symbols
(:data:`NUMBERS`: the peaks, the links' bandwidths and latencies; a number that is 0 stays 0), which the
page fills with each preset's. Every layout meets its preset through
:func:`costgraph.training.fp8.on_hardware`, as in ``costgraph train``; the FP8 policies only where the
preset has an FP8 peak and runs the recipe (``train`` refuses them elsewhere).
"""

from __future__ import annotations

from ..choices import RECOMPUTE_SEARCHED, ZERO_STAGE

#: the preset numbers the flat step time reads, as the symbols the page fills per preset (upper case:
#: no model dimension uses them)
NUMBERS = {"peak_flops_bf16": "HW_PEAK_BF16", "peak_flops_fp8": "HW_PEAK_FP8",
           "scale_up_bandwidth": "HW_UP_BW", "scale_out_bandwidth": "HW_OUT_BW",
           "scale_up_busbw": "HW_UP_BUSBW", "scale_out_busbw": "HW_OUT_BUSBW",
           "latency_scale_up_ns": "HW_UP_NS", "latency_scale_out_ns": "HW_OUT_NS"}


def runs(policy: str, hw) -> bool:
    """Whether ``costgraph train --precision policy --hardware hw`` runs: not an FP8 policy, or one on a
    preset with an FP8 peak whose GPU runs its recipe (:func:`costgraph.training.fp8.check_supported`)."""
    from ..errors import CostgraphValueError
    from ..training.fp8 import check_supported, policy_recipe

    if policy_recipe(policy) is None:
        return True
    if not hw.peak_flops_fp8:
        return False
    try:
        check_supported(policy, hw)
    except CostgraphValueError:
        return False
    return True


def fp8_transposes(policy: str) -> dict[str, str]:
    """Preset → the FP8 weight transpose a layout under the FP8 ``policy`` keeps there, as ``train``
    resolves it (:func:`costgraph.training.fp8.on_hardware`; ``separate`` where the recipe does not run:
    the memory ``train --memory`` would count without the preset)."""
    from ..hardware import presets
    from ..parallel.layout import Layout
    from ..training.fp8 import on_hardware

    return {k: on_hardware(Layout(policy=policy), hw if runs(policy, hw) else None).fp8_transpose
            for k, hw in presets().items() if hw.peak_flops_bf16}


def step_models(policies) -> tuple[dict, dict]:
    """``(models, of)``: ``models``: model name → ``(Hardware, policies)``, the preset (numbers as symbols
    for a flat one) the step time is derived on and the ``policies`` that run there; ``of``: preset →
    ``(model name, {symbol: value})`` (module docstring)."""
    import dataclasses

    from ..engine.symbols import dim
    from ..hardware import presets
    from ..parallel.layout import Layout
    from ..training.contention import contention_of
    from ..training.fp8 import on_hardware
    from ..training.kernel_table import kernel_table

    models: dict = {}
    of: dict = {}
    flat: dict = {}
    for key, hw in presets().items():
        if not hw.peak_flops_bf16:
            continue
        ran = tuple(p for p in policies if runs(p, hw))
        if kernel_table(hw) is not None:
            models[key], of[key] = (hw, ran), (key, {})
            continue
        numbers = {s: getattr(hw, f) for f, s in NUMBERS.items() if getattr(hw, f)}
        transpose = on_hardware(Layout(policy="fp8-delayed"), hw if hw.peak_flops_fp8 else None).fp8_transpose
        # the overlap contention's entry too (training.contention: read by the preset's key, kept by the first one's)
        shape = (hw.scale_up_domain, tuple(sorted(numbers)), ran, transpose, contention_of(hw))
        if shape not in flat:
            flat[shape] = f"flat-{len(flat) + 1}"
            symbolic = dataclasses.replace(hw, **{f: dim(s) for f, s in NUMBERS.items() if s in numbers})
            models[flat[shape]] = (symbolic, ran)
        of[key] = (flat[shape], {s: str(v) for s, v in numbers.items()})
    return models, of


def step_table(model, layout, degrees, policies, optimizers) -> dict:
    """``{"pool", "rest", "optimizer", "bandwidth", "rate", "model", "numbers", "failed", "presets"}``
    (module docstring): ``rest``: step-time model → policy → ``[ZeRO][recompute][stage set]`` → tree (lists
    in the order of ``ZERO_STAGE.values``, ``RECOMPUTE_SEARCHED`` and ``"1"``, ``"PP"``);
    ``model``: preset → its step-time model; ``numbers``: preset → symbol → value (a flat preset's);
    ``optimizer``: policy → optimizer → ``[ZeRO][stage set]`` → the optimizer step's bytes
    (:func:`costgraph.training.step_kernels.optimizer_seconds` at 1 B/s), divided on the page by
    ``bandwidth[preset]`` (the kernel table's HBM B/s; absent on a flat preset: no optimizer step there);
    ``rate``: preset → the rate's description; ``failed``: step-time model → why ``train`` refuses its
    layouts (none so far). ``layout(p, **choices)`` a :class:`~costgraph.parallel.layout.Layout` with
    symbolic degrees; ``degrees``: ``(1,)`` or ``(1, PP)``."""
    import sympy

    from ..hardware import preset
    from ..training.steptime import Rate, kernel_rate

    models, of = step_models(policies)
    out: dict = {"pool": [], "rest": {}, "optimizer": {}, "bandwidth": {}, "rate": {}, "failed": {},
                 "model": {k: name for k, (name, _) in of.items()},
                 "numbers": {k: nums for k, (_, nums) in of.items() if nums}, "presets": list(of)}
    seen: dict = {}
    _rest(model, layout, degrees, models, out, seen)
    _optimizer(model, layout, degrees, policies, optimizers, out, seen)
    # nested lists, not objects: indexed by ZeRO stage, recompute policy (DATA.recompute's order) and stage set
    # ("1", "PP"): the keys written once here, not at every leaf (a third of the page's references)
    stages = ["1", "PP"][:len(degrees)]
    out["rest"] = {name: {pol: [[[by[str(z)][r][s] for s in stages] for r in RECOMPUTE_SEARCHED]
                                for z in ZERO_STAGE.values] for pol, by in pols.items()}
                   for name, pols in out["rest"].items()}
    out["optimizer"] = {pol: {opt: [[by[str(z)][s] for s in stages] for z in ZERO_STAGE.values]
                              for opt, by in opts.items()} for pol, opts in out["optimizer"].items()}
    for key, name in out["model"].items():
        hw = preset(key)
        peaks = {"bf16": hw.peak_flops_bf16}
        rate = kernel_rate(hw, peaks)
        if rate is not None:
            out["bandwidth"][key] = str(rate.table.hbm_bandwidth)
        out["rate"][key] = (rate or Rate("efficiency", sympy.Rational(1, 2), peaks)).describe()
    return out


def _rest(model, layout, degrees, models: dict, out: dict, seen: dict) -> None:
    """``out["rest"]``: the step time less the optimizer step, per model × policy × ZeRO × recompute × stage."""
    from ..errors import CostgraphValueError
    from ..parallel.communication import communication
    from ..parallel.placement import placement as place
    from ..training.compute import training_flops
    from ..training.fp8 import on_hardware
    from ..training.steptime import step_time
    from .web_tree import interned

    policies = list(dict.fromkeys(p for _, ran in models.values() for p in ran))
    flops_of: dict = {}
    for pol in policies:
        for zero in ZERO_STAGE.values:
            for p in degrees:
                stage = "1" if p == 1 else "PP"
                for recompute in RECOMPUTE_SEARCHED:
                    L = layout(p, zero=zero, recompute=recompute, policy=pol)
                    # the FLOPs, placement and collectives read no preset: derived once, shared by every model;
                    # the FLOPs read the degrees, the recompute plan and the activations' precision, not the
                    # ZeRO stage nor the policy's GEMM precision (training.compute: a bf16 breakdown): one per
                    # stage set, recompute policy and activation precision
                    filled = L.filled()
                    key = (p, recompute, filled.precision)
                    if key not in flops_of:
                        flops_of[key] = training_flops(model.graph, filled)
                    pl = place(model.graph, filled)
                    shared = {"flops": flops_of[key], "placement": pl,
                              "collectives": communication(model.graph, filled, placement=pl)}
                    derived: dict = {}   # derivation key → tree: flat models alike under this policy share it
                    for name, (hw, ran) in models.items():
                        if pol not in ran or name in out["failed"]:
                            continue
                        on = on_hardware(L, hw)   # the layout on the preset, as train meets them
                        same = _derivation(name, hw, on)
                        if same not in derived:
                            try:
                                parts = step_time(model.graph, on, hw, with_optimizer=False, **shared)
                            except CostgraphValueError as e:
                                out["failed"][name] = e.message
                                out["rest"].pop(name, None)
                                continue
                            # the optimizer step: added by the page (_optimizer)
                            derived[same] = interned(parts["total"], out["pool"], seen)
                        out["rest"].setdefault(name, {}).setdefault(pol, {}).setdefault(str(zero), {}).setdefault(
                            recompute, {})[stage] = derived[same]


def _derivation(name: str, hw, on) -> tuple:
    """What a step time on the step-time model ``name`` (its preset ``hw``) under the layout ``on`` (met
    on the preset) reads: a kernel-table preset its own; a flat one its scale-up domain, which of its
    numbers are symbols (:data:`NUMBERS`) and the FP8 weight transpose, not which other policies run
    there (:func:`step_models`' shape): two flat models alike in these give one tree under one policy."""
    import sympy

    if not str(name).startswith("flat-"):
        return (name,)
    return ("flat", hw.scale_up_domain, tuple(f for f in NUMBERS if isinstance(getattr(hw, f), sympy.Symbol)),
            on.fp8_transpose)


def _optimizer(model, layout, degrees, policies, optimizers, out: dict, seen: dict) -> None:
    """``out["optimizer"]``: the per-kernel model's optimizer step, its bytes at 1 B/s (one for every preset
    with a kernel table: the page divides by the table's HBM bandwidth)."""
    from ..training.step_kernels import optimizer_seconds
    from .web_tree import interned

    if not any(name == key for key, name in out["model"].items()):   # no kernel-table preset: no optimizer step
        return
    for pol in policies:
        for zero in ZERO_STAGE.values:
            for p in degrees:
                stage = "1" if p == 1 else "PP"
                for opt in optimizers:
                    out["optimizer"].setdefault(pol, {}).setdefault(opt, {}).setdefault(str(zero), {})[stage] = \
                        interned(optimizer_seconds(model.graph, layout(p, zero=zero, policy=pol, optimizer=opt), 1),
                                 out["pool"], seen)


__all__ = ["NUMBERS", "fp8_transposes", "runs", "step_models", "step_table"]
