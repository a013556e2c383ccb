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

import dataclasses
from collections.abc import Callable

from ..errors import CostgraphValueError
from .probe import FIELDS, Probe
from .fast_conformer import FRAMES


def _copy(probe: Probe) -> Probe:
    """``probe`` with fields and symbols of its own (the changes below never touch the original)."""
    return dataclasses.replace(probe, fields=dict(probe.fields), symbols=dict(probe.symbols))


def doubled(probe: Probe, name: str) -> Probe:
    """``probe`` with the field ``name`` at twice its value (its symbol too)."""
    out = _copy(probe)
    out.fields[name] *= 2
    for sym, (v, f) in probe.symbols.items():
        if f == name:
            out.symbols[sym] = (2 * v, f)
    return out


def dropped(probe: Probe, name: str) -> Probe:
    """``probe`` without the field ``name`` (the config keeps its own value; no symbol reads it)."""
    out = _copy(probe)
    del out.fields[name]
    for sym, (_, f) in probe.symbols.items():
        if f == name:
            del out.symbols[sym]
    return out


#: fields never left at the config's value: every shape holds the hidden size, a draft with it as a number reads no
#: size (Dots3-Note's wrapper requires its vision and audio adapters' widths to equal the text hidden size:
#: transformers 5.24 configuration_dots3_note.py; such a config is left to fail, not drafted in numbers)
KEPT = ("hidden_size",)


def fitted(probes: list[Probe], builds: Callable[[Probe], None]) -> list[Probe]:
    """``probes`` where each builds (``builds(probe)`` returns), else the probes with the first change (a field
    doubled, in the probe's field order, then a field other than :data:`KEPT` left at the config's value) with which
    every probe builds; ``probes`` unchanged where none does (the caller's build then reports the config's refusal).

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
            if change is dropped and name in KEPT:
                continue
            candidates = [change(p, name) for p in probes]
            if ok(candidates):
                return candidates
    return probes


#: the experts each token passes through, a field a default config may leave None while its model routes by it
#: (transformers 5.24 configuration_deepseek_v2.py: ``num_experts_per_tok: int | None = None``, which
#: ``DeepseekV2Moe.route_tokens_to_experts`` hands to ``torch.topk`` as ``k``)
TOPK_FIELDS = tuple(f for f, (sym, _) in FIELDS.items() if sym == "k")
#: the fields that say the config has routed experts (read as ``E``)
EXPERT_FIELDS = tuple(f for f, (sym, _) in FIELDS.items() if sym == "E")


def unset_counts(config, present: list[str]) -> list[str]:
    """The top-k fields (:data:`TOPK_FIELDS`) ``config`` leaves None although it has routed experts (a field of
    :data:`EXPERT_FIELDS` in ``present``): probed all the same (a forward needs a k), and read back as the symbol
    ``k``, which the draft's config block then leaves for the user to set (the config has no value for it)."""
    if not any(f in present for f in EXPERT_FIELDS):
        return []
    held = config.to_dict()
    return [f for f in TOPK_FIELDS if f in held and held[f] is None and f not in present]


def params_at_config(built, values: dict[str, int], mapping: dict[str, str]) -> int:
    """The draft model ``built``'s parameters at the config's values (``b = s = 1``, an encoder-decoder's ``t = 1``; a
    vision encoder's ``s`` derived, a speech encoder's from L = 16000 samples). A symbol the config leaves
    without a value (:func:`unset_counts`: a top-k, which sizes no weight) is given 1 and then 2: the two counts must
    be equal (the parameters do not depend on it), else :class:`CostgraphValueError`."""
    free = [sym for sym in mapping if sym not in values]
    counts = set()
    for k in ((1, 2) if free else (1,)):
        at = {**values, **{sym: k for sym in free}, "b": 1}
        if "L" in built.symbols:      # a speech encoder's s follows its samples L (the frames): one second's
            at["L"] = 16000
        elif "T" in built.symbols:    # a FastConformer's s follows its spectrogram frames T (fast_conformer.FRAMES)
            at["T"] = FRAMES
        elif "s" in built.symbols:    # a free s: 1 (a vision encoder's s follows its image, AST's its patches: derived);
            at.setdefault("s", 1)     # a convolutional backbone's image side s is the config's (values: IMAGE_SIDE)
        if "t" in built.symbols:     # an encoder-decoder's decoder length (:mod:`.inputs_seq2seq`)
            at["t"] = 1
        counts.add(int(built.costs("model", convention="matmul").evaluate(None, at)["params"]))
    if len(counts) > 1:
        raise CostgraphValueError(f"the draft's parameters depend on {', '.join(free)}, which the config leaves unset",
                                  hint="set it in the config.json")
    return counts.pop()


#: config fields counting the last layers that reuse an earlier layer's keys and values (Gemma 3n's: transformers 5.24
#: configuration_gemma3n.py ``kv_sharing_modes``: the last ``num_kv_shared_layers`` layers "reuse" the KV of the last
#: earlier layer of their kind, which a probe with fewer layers than that leaves with no layer to reuse)
SHARED_KV_FIELDS = ("num_kv_shared_layers",)


def layer_period(config, period: int) -> int:
    """The layer pattern's period the probes' layer count is chosen by (:meth:`Probe.make`: over twice it): ``period``,
    or more where the config's last layers reuse earlier layers' keys and values (:data:`SHARED_KV_FIELDS`), so that
    the layers before them still show the pattern twice: half of the shared layers plus the period."""
    shared = [getattr(config, f, None) for f in SHARED_KV_FIELDS]
    n = max((v for v in shared if isinstance(v, int) and not isinstance(v, bool)), default=0)
    period = max(period, (n + 2 * period + 1) // 2) if n > 0 else period
    return _around_period(config, period)


def _leading_run(kinds) -> int:
    """How many first entries of a list of layer kinds are of a kind the rest never is (Beam's three ``dense``
    MLP layers before the ``sparse`` ones), 0 for none or a list of one kind."""
    if not isinstance(kinds, list) or not kinds:
        return 0
    lead = next((j for j, t in enumerate(kinds) if t != kinds[0]), 0)
    return lead if lead and kinds[0] not in kinds[lead:] else 0


def _around_period(config, period: int) -> int:
    """``period``, or more where the config's layers of a period > 1 come between first layers of their own kind
    (its ``mlp_layer_types``' leading run: Beam's three dense MLP layers, transformers 5.24 configuration_beam.py
    ``__post_init__``) and a last layer forced to full attention (its ``layer_types``' last entry a kind the layer a
    period before is not): the probes' layer count (:meth:`Probe.make`: over twice the period returned) then leaves
    the pattern shown twice between them, ``l ≥ 2·period + first + last``, so that the writer folds it alike at both
    probes (``model_file._prefixed_period``)."""
    if period < 2:
        return period
    lead = _leading_run(getattr(config, "mlp_layer_types", None))
    kinds = getattr(config, "layer_types", None)
    last = int(isinstance(kinds, list) and len(kinds) > period and kinds[-1] != kinds[-1 - period])
    return period + (lead + last) // 2 if lead + last > 1 else period
