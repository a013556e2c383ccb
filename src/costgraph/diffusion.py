"""FLOPs of a diffusion Transformer (models/dit.cg, models/sd3.cg) per denoising step and per image.

A diffusion model's forward pass is one denoising step: a sampler runs it ``steps`` times per
image (50 in diffusers' DiT and SD3 pipelines, 28 in SD3's model card). With classifier-free
guidance (the model's option ``cfg = true``) each step runs the conditional and the
unconditional inputs in one batch of ``2b`` rows for ``b`` images. So, for the forward FLOPs
``F(b)`` of one step (what ``derive`` prints, already over 2b rows with cfg):

    per step  = F(b)                     (b images, one step)
    per image = steps · F(b) / b         (every step of one image; F is linear in b)

``steps`` is a dimension (a SymPy symbol) unless a number is given. The graph is the same
for every step, so parameters, activation memory and the training step are ``derive`` /
``train``'s; a decoder's prefill/decode split does not apply (``infer`` refuses these models,
:func:`no_decode_phase`).

>>> import costgraph
>>> from costgraph.diffusion import per_image
>>> m = costgraph.load("dit")
>>> d = per_image(m, 50, values=m.configs["dit-xl-2-256"])
>>> d.per_step_value, d.per_image_value          # DiT-XL/2 at 256 pixels, 50 steps, no guidance
(237333676032, 11866683801600)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import sympy

from .errors import CostgraphValueError



def is_diffusion(graph) -> bool:
    """Whether ``graph`` (a :class:`costgraph.engine.graph.CostGraph`) embeds a diffusion timestep
    (a node whose operator declares the role ``timestep``, as ``sinusoidal`` does): a denoiser run
    once per sampling step."""
    from .ops.registry import has_role

    return any(has_role(d["kind"], "timestep") for _, d in graph.ops())


def no_decode_phase(name: str) -> CostgraphValueError:
    """The error ``infer`` raises for a diffusion Transformer (no KV cache, no decode phase),
    with the hint that says how its cost per image is had."""
    return CostgraphValueError(
        f"model '{name}' is a diffusion Transformer: it denoises a latent in steps, with no prompt, "
        "KV cache or decode phase to model",
        hint="one forward pass is one denoising step: `costgraph derive` gives its FLOPs for b images (with "
             f"classifier-free guidance, a batch of 2b: `costgraph derive {name} --set cfg=true`); per image: "
             "steps × those FLOPs / b (Python: costgraph.diffusion.per_image(model, steps=50)); "
             "`costgraph train` trains it")


@dataclass
class Denoising:
    """:func:`per_image`'s result. ``per_step``: forward FLOPs of one step for ``b`` images (SymPy;
    over ``2b`` rows when ``cfg``); ``per_image``: ``steps · per_step / b``; ``steps`` an int or
    the symbol ``steps``; the ``*_value`` fields: exact ints at ``values`` (None without them)."""

    model: str
    steps: int | sympy.Symbol
    cfg: bool
    convention: str
    per_step: sympy.Expr
    per_image: sympy.Expr
    values: dict = field(default_factory=dict)
    per_step_value: int | None = None
    per_image_value: int | None = None

    def to_dict(self) -> dict:
        """JSON-ready: the expressions as text, the values as ints (or null)."""
        from .numbers.printing import to_text

        return {"model": self.model, "steps": self.steps if isinstance(self.steps, int) else str(self.steps),
                "cfg": self.cfg, "convention": self.convention,
                "flops_per_step": to_text(self.per_step), "flops_per_image": to_text(self.per_image),
                "values": dict(self.values), "flops_per_step_value": self.per_step_value,
                "flops_per_image_value": self.per_image_value}


def per_image(model, steps: int | None = None, *, values: dict | None = None,
              convention: str = "matmul") -> Denoising:
    """Forward FLOPs of a diffusion Transformer per denoising step and per image.

    ``model``: a :class:`costgraph.model.Model` (or a ``from_hf_config`` result) of a diffusion
    Transformer, loaded with the options wanted (``options={"cfg": True}``: guidance doubles the
    batch of every step); ``steps``: sampling steps per image, a whole number ≥ 1, or None for the
    symbol ``steps``; ``values``: dimension values (``b`` included) for exact numbers;
    ``convention``: ``matmul`` (default, as FlopCounterMode) or ``all``.

    Raises CostgraphValueError for a model without a timestep embedding (not a diffusion model),
    a ``steps`` that is not a whole number ≥ 1, or missing values."""
    from .engine.symbols import dim

    model = getattr(model, "model", model)   # an HFModel holds its Model
    graph = model.graph
    if not is_diffusion(graph):
        raise CostgraphValueError(f"model '{graph.name}' is not a diffusion Transformer (no timestep embedding)",
                                  hint="per-image FLOPs are for denoisers run once per step: dit, sd3")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise CostgraphValueError(f"steps must be a whole number ≥ 1, got {steps!r}",
                                  hint="the sampler's number of denoising steps (50 in diffusers' pipelines)")
    costs = model.costs("model", convention=convention)
    b = dim("b")
    n_steps = dim("steps") if steps is None else steps
    per_step = costs.flops_forward
    result = Denoising(graph.name, n_steps, bool(graph.options.get("cfg", False)), convention, per_step,
                       sympy.expand(n_steps * per_step / b))
    if values is not None:
        result.values = dict(values)
        step = int(costs.evaluate(None, values)["flops_forward"])
        result.per_step_value = step
        if steps is not None:
            image = Fraction(steps * step, values["b"]) if "b" in values else None
            if image is None or image.denominator != 1:
                raise CostgraphValueError("per-image FLOPs need the batch b among the values")
            result.per_image_value = int(image)
    return result
