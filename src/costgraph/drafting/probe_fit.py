"""Probe configurations a config's validator accepts (issue 28 item 2): ``costgraph import`` of a family whose
config class refuses the probe's primes.

A transformers config checks relations between its fields when it is built (``@strict``'s
``validate_architecture``): Moshi's ``ffn_dim`` must be even (transformers 5.24 configuration_moshi.py: its MLP
splits the width into a gate and a value half), Zamba's inner width ``mamba_expand · hidden_size`` must divide into
``n_mamba_heads`` heads (configuration_zamba.py), ZAYA runs one expert per token only (configuration_zaya.py:
``num_experts_per_tok`` must be 1). A probe sets every size field to primes of its own, which such a check refuses.

:func:`fitted` answers with the first of these changes that every probe's config builds with: one field probed at
twice its prime (read back as that field all the same: 2·19 is still ``i``), else one field left at the config's own
value (written in the draft as that number: the config's value, so the counts at the config's sizes are unchanged).
The same change is made at every probe, so that both probes draft the same file. Torch-free: the config is built by
the caller's ``builds``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import CostgraphValueError
from .probe import Probe


def doubled(probe: Probe, name: str) -> Probe:
    """``probe`` with the field ``name`` at twice its value (its symbol too)."""
    out = Probe(probe.index, dict(probe.fields), dict(probe.symbols), probe.b, probe.s)
    out.fields[name] *= 2
    for sym, (v, f) in probe.symbols.items():
        if f == name:
            out.symbols[sym] = (2 * v, f)
    return out


def dropped(probe: Probe, name: str) -> Probe:
    """``probe`` without the field ``name`` (the config keeps its own value; no symbol reads it)."""
    out = Probe(probe.index, dict(probe.fields), dict(probe.symbols), probe.b, probe.s)
    del out.fields[name]
    for sym, (_, f) in probe.symbols.items():
        if f == name:
            del out.symbols[sym]
    return out


def fitted(probes: list[Probe], builds: Callable[[Probe], None]) -> list[Probe]:
    """``probes`` where each builds (``builds(probe)`` returns), else the probes with the first change (a field
    doubled, in the probe's field order, then a field left at the config's value) with which every probe builds;
    ``probes`` unchanged where none does (the caller's build then reports the config's refusal).

    ``builds`` raises :class:`CostgraphValueError` where transformers refuses the probe's config."""
    def ok(candidates: list[Probe]) -> bool:
        try:
            for p in candidates:
                builds(p)
        except CostgraphValueError:
            return False
        return True

    if ok(probes):
        return probes
    names = list(probes[0].fields)
    for change in (doubled, dropped):
        for name in names:
            candidates = [change(p, name) for p in probes]
            if ok(candidates):
                return candidates
    return probes
