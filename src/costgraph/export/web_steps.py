"""The step time of the calculator page (:mod:`costgraph.export.web`) on every preset it computes, for every
precision policy, optimizer, ZeRO stage, recompute policy and ``PP = 1`` or not the menus offer.

``costgraph train --hardware``'s default step time (:func:`costgraph.training.steptime.step_time`: the
per-kernel model of ``kernels.toml`` on a preset with a kernel table, else 1/2 of the peaks; the pipeline
bubble; the exposed communication under Megatron's overlap; the per-kernel model's optimizer step) is

    total = rest(preset, policy, ZeRO, recompute, PP) + optimizer(preset, policy, optimizer, ZeRO, PP)

(:func:`costgraph.training.steptime.combine`: the optimizer step is added once per step, after the
gradients; nothing else reads the optimizer: ``tests/export/test_web.py`` checks the sum against ``train`` for
other optimizers), so the page carries ``rest`` per preset × policy × ZeRO × recompute × stage set and the
optimizer step per preset × policy × optimizer × ZeRO × stage set, and adds them. Every closed form is
written into one pool of shared parts (:func:`costgraph.export.web_tree.interned`): a part met in several
combinations (the compute of a recompute policy under every ZeRO stage, the communication of a ZeRO stage
under every recompute policy, the same tree under ``mixed`` and ``bf16``) is written once.

Presets: those with a kernel table (``h100-sxm``, ``h200``, ``b200``, ``gb200``) and the page's
``--hardware`` preset (a flat-efficiency one when it has no table); the FP8 policies only on a preset
with an FP8 peak (``train`` refuses them elsewhere).
"""

from __future__ import annotations

from ..choices import RECOMPUTE_SEARCHED, ZERO_STAGE


def step_presets(hardware: str) -> tuple[str, ...]:
    """The presets whose step time the page computes: those with a kernel table, and ``hardware``."""
    from ..hardware import presets
    from ..training.kernel_table import kernel_table

    keys = [k for k, hw in presets().items() if hw.peak_flops_bf16 and kernel_table(hw) is not None]
    return tuple(keys + ([hardware] if hardware not in keys else []))


def step_table(model, layout, degrees, hardware: str, policies, optimizers) -> dict:
    """``{"pool", "rest", "optimizer", "bandwidth", "rate", "presets"}`` (module docstring): ``rest``:
    preset → policy → ZeRO → recompute → ``"1"`` or ``"PP"`` → tree; ``optimizer``: policy → optimizer →
    ZeRO → stage set → the optimizer step's bytes (:func:`costgraph.training.step_kernels.optimizer_seconds`
    at 1 B/s), divided on the page by ``bandwidth[preset]`` (the kernel table's HBM B/s; absent on a flat
    preset: no optimizer step there); ``rate``: preset → the rate's description. ``layout(p, **choices)`` a
    :class:`~costgraph.parallel.layout.Layout` with symbolic degrees; ``degrees``: ``(1,)`` or ``(1, PP)``."""
    import dataclasses

    import sympy

    from ..hardware import preset
    from ..training.fp8 import policy_recipe, transpose_for
    from ..training.step_kernels import optimizer_seconds
    from ..parallel.communication import communication
    from ..parallel.placement import placement as place
    from ..training.compute import training_flops
    from ..training.steptime import Rate, kernel_rate, step_time
    from .web_tree import interned

    pool: list = []
    seen: dict = {}
    moved: dict = {}      # (policy, optimizer, ZeRO, stage set) -> the optimizer step's bytes: one per preset
    out: dict = {"pool": pool, "rest": {}, "optimizer": {}, "bandwidth": {}, "rate": {}, "presets": []}
    keys = step_presets(hardware)
    hws = {key: preset(key) for key in keys}
    out["presets"] = list(keys)
    for pol in policies:
        fp8 = policy_recipe(pol) is not None
        for zero in ZERO_STAGE.values:
            for p in degrees:
                stage = "1" if p == 1 else "PP"
                for recompute in RECOMPUTE_SEARCHED:
                    L = layout(p, zero=zero, recompute=recompute, policy=pol, optimizer=optimizers[0])
                    # the FLOPs, placement and collectives read no preset: derived once, shared by every preset
                    filled = L.filled()
                    flops, pl = training_flops(model.graph, filled), place(model.graph, filled)
                    shared = {"flops": flops, "placement": pl,
                              "collectives": communication(model.graph, filled, placement=pl)}
                    for key, hw in hws.items():
                        if fp8 and not hw.peak_flops_fp8:
                            continue
                        # train resolves the FP8 transpose from the preset (training.api; fp8.transpose_for)
                        parts = step_time(model.graph, dataclasses.replace(L, fp8_transpose=transpose_for(hw))
                                          if fp8 else L, hw, **shared)
                        rest = parts["total"] - parts.get("optimizer", sympy.Integer(0))
                        out["rest"].setdefault(key, {}).setdefault(pol, {}).setdefault(str(zero), {}).setdefault(
                            recompute, {})[stage] = interned(rest, pool, seen)
                for key, hw in hws.items():
                    rate = kernel_rate(hw, {"bf16": hw.peak_flops_bf16})
                    if rate is None or (fp8 and not hw.peak_flops_fp8):
                        continue
                    # the per-kernel model's optimizer step: its bytes (at 1 B/s) / the table's HBM bandwidth
                    out["bandwidth"][key] = str(rate.table.hbm_bandwidth)
                    for opt in optimizers:
                        if (pol, opt, zero, stage) not in moved:
                            moved[pol, opt, zero, stage] = interned(optimizer_seconds(
                                model.graph, layout(p, zero=zero, policy=pol, optimizer=opt), 1), pool, seen)
                        out["optimizer"].setdefault(pol, {}).setdefault(opt, {}).setdefault(
                            str(zero), {})[stage] = moved[pol, opt, zero, stage]
    for key, hw in hws.items():
        peaks = {"bf16": hw.peak_flops_bf16}
        out["rate"][key] = (kernel_rate(hw, peaks) or Rate("efficiency", sympy.Rational(1, 2), peaks)).describe()
    return out


__all__ = ["step_presets", "step_table"]
