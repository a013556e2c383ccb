"""The result of ``costgraph import`` (:func:`costgraph.drafting.api.draft_model`): the drafted model file and its
checks against PyTorch, as plain typed data (torch-free).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Check:
    """One probe's comparison: the draft's count and PyTorch's at the probe sizes and ``(b, s)``.

    ``forward_flops_torch``: FlopCounterMode's forward FLOPs under the routed-experts convention (k experts per token,
    as the draft counts them); ``forward_flops_counted``: FlopCounterMode's own total where the two differ, a model
    whose experts run every token through every expert (Llama 4's ``Llama4TextMoe``: E per token,
    :mod:`costgraph.drafting.routing`), else None."""

    probe: int
    values: dict[str, int]
    params_torch: int
    params_draft: int
    forward_flops_torch: int
    forward_flops_draft: int
    forward_flops_counted: int | None = None

    @property
    def exact(self) -> bool:
        return self.params_torch == self.params_draft and self.forward_flops_torch == self.forward_flops_draft


@dataclass
class Draft:
    """:func:`draft_model`'s result. ``text``: the model file; ``mapping``: symbol → config.json field;
    ``values``: symbol → the config's value (the file's ``config`` block); ``warnings``; ``todos``
    (module paths left as TODO); ``confirmed``: the second probe drafted the same text; ``checks``:
    one :class:`Check` per probe; ``config_params``: [PyTorch's, the draft's] parameters at the config's own sizes
    (the model built on meta from the config itself: a size the probes cannot tell from a number, such as LFM2's MLP
    width rounded up to a multiple of 256, differs there); ``exact``: confirmed, no TODO, every check exact and the
    parameters at the config equal."""

    text: str
    name: str
    model_type: str
    torch_class: str
    versions: str
    mapping: dict[str, str]
    values: dict[str, int]
    warnings: list[str] = field(default_factory=list)
    todos: list[str] = field(default_factory=list)
    confirmed: bool = False
    checks: list[Check] = field(default_factory=list)
    config_params: list[int] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return self.confirmed and not self.todos and bool(self.checks) and all(c.exact for c in self.checks) \
            and len(self.config_params) == 2 and self.config_params[0] == self.config_params[1]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["exact"] = self.exact
        for c, obj in zip(d["checks"], self.checks):
            c["exact"] = obj.exact
        return d
