"""Which weights a quantized checkpoint stores quantized (``--quantized``,
``modules_to_not_convert``).

A weight dtype of ``dtypes.toml`` (``awq``, ``fp8-block``, ``mxfp4`` …) says how
a quantized weight is stored; this module says *which* weights are: the rest
stay at ``unquantized_bits`` (16). Scopes (:data:`SCOPES`):

* ``linear`` (default) — the ``weight`` of every linear except the output head
  and the MoE routers: AutoAWQ, GPTQ and vLLM keep ``lm_head``, the embeddings,
  norms and biases in 16 bits, and vLLM builds every router unquantized
  (``ReplicatedLinear(..., quant_config=None)`` for Mixtral's, DeepSeek's and
  Qwen-MoE's ``gate``; gpt-oss lists ``mlp.router`` in
  ``modules_to_not_convert``; AutoAWQ's Mixtral keeps ``gate``).
* ``linear+head`` — also the output head (vLLM's ``ParallelLMHead`` under
  ModelOpt NVFP4 or GGUF).
* ``all`` — also the embedding tables (llama.cpp's GGUF quantizes
  ``token_embd``); norms and biases stay.
* ``experts`` — only the routed experts' weights (a mixture's, whose active
  copies are fewer than its copies): gpt-oss ships MXFP4 on the MoE
  ``mlp1``/``mlp2`` weights only (gpt-oss @ 7a9ea757
  ``gpt_oss/torch/weights.py::Checkpoint._get_mxfp4_tensor``).

A router is a linear that sits beside a mixture (same parent path as the
experts' group, outside it): ``mlp/gate`` beside ``mlp/experts``.

``keep`` (``modules_to_not_convert`` of a ``config.json``, or ``--not-quantized``):
Hugging Face module names or patterns (``model.layers.*.self_attn``,
``lm_head``); a weight is kept in 16 bits when a pattern's last named
component (indices, ``*`` and the ``model.`` prefix dropped) is a component of
its graph path, so ``self_attn`` keeps every attention projection and
``lm_head`` the head. A pattern that matches no weight is reported.
"""

from __future__ import annotations

import sympy

from ..engine.graph import CostGraph
from ..errors import CostgraphValueError
from ..ops.registry import has_role

#: the ``--quantized`` scopes (module docstring)
SCOPES = ("linear", "linear+head", "all", "experts")
DEFAULT_SCOPE = "linear"


def _graph(cg) -> CostGraph:
    return cg if isinstance(cg, CostGraph) else getattr(cg, "graph", cg)


def expert_weights(cg) -> set[str]:
    """Weights of a mixture's experts: fewer active copies than copies (``k·l`` of ``E·l``)."""
    cg = _graph(cg)
    return {wid for wid, w in cg.weights.items() if sympy.simplify(w.active - w.count) != 0}


def _mixture_parents(cg: CostGraph, experts: set[str]) -> set[str]:
    """The parent paths of the experts' groups (``layers/layer/mlp`` for ``layers/layer/mlp/experts``)."""
    parents = set()
    for wid in experts:
        groups = [g for g in cg.groups if wid.startswith(g + "/")]
        if groups:
            g = max(groups, key=len)
            parents.add(g.rsplit("/", 1)[0] if "/" in g else "")
    return parents


def routers(cg) -> set[str]:
    """Paths of the MoE routers: linear operators beside a mixture (module docstring)."""
    cg = _graph(cg)
    experts = expert_weights(cg)
    parents = _mixture_parents(cg, experts)
    found = set()
    for path, d in cg.ops():
        if not has_role(d["kind"], "matrix") or any(w in experts for w in d["cost"].weights):
            continue
        parent = path.rsplit("/", 1)[0] if "/" in path else ""
        if parent in parents:
            found.add(path)
    return found


def _pattern_name(pattern: str) -> str | None:
    """The last named component of a Hugging Face module pattern (``model.layers.*.self_attn`` → ``self_attn``)."""
    parts = [p for p in pattern.replace("/", ".").split(".") if p and p != "*" and not p.isdigit()]
    return parts[-1] if parts else None


def keep_names(patterns) -> tuple[str, ...]:
    """``patterns`` as a tuple of names (one name given as a string is one pattern).

    Raises CostgraphValueError for anything but names."""
    if patterns is None:
        return ()
    if isinstance(patterns, str):
        patterns = tuple(p.strip() for p in patterns.split(",") if p.strip())
    if not isinstance(patterns, (list, tuple, set, frozenset)) or not all(isinstance(p, str) for p in patterns):
        raise CostgraphValueError(f"modules to keep unquantized must be names, not {patterns!r}",
                                  hint="Hugging Face module names such as lm_head or model.layers.*.self_attn")
    return tuple(patterns)


def kept_by(cg, patterns) -> tuple[set[str], list[str]]:
    """``(weight ids, unmatched patterns)``: the weights ``patterns`` keep unquantized (module docstring)."""
    cg = _graph(cg)
    kept, unmatched = set(), []
    for pattern in keep_names(patterns):
        name = _pattern_name(pattern)
        hit = {wid for wid in cg.weights if name is not None and name in wid.split("/")[:-1]}
        if not hit:
            unmatched.append(pattern)
        kept |= hit
    return kept, unmatched


def quantized_weights(cg, scope: str = DEFAULT_SCOPE, keep=(), dtype=None) -> set[str]:
    """The weight ids stored in the quantized dtype under ``scope`` (:data:`SCOPES`),
    less those ``keep`` names (:func:`kept_by`); none when ``dtype`` (a
    :class:`~costgraph.inference.dtypes.WeightDtype`) is an unquantized one (bf16, fp16).

    Raises
    ------
    CostgraphValueError
        An unknown scope (the known ones listed)."""
    from ..training.states import output_heads

    if scope not in SCOPES:
        raise CostgraphValueError(f"unknown --quantized scope {scope!r}", hint="one of: " + ", ".join(SCOPES))
    keep = keep_names(keep)
    if dtype is not None and not dtype.quantized:
        return set()
    cg = _graph(cg)
    heads = output_heads(cg)
    skip = routers(cg) | (set() if scope in ("linear+head", "all") else set(heads))
    chosen = {w for p, d in cg.ops() if has_role(d["kind"], "matrix") and p not in skip
              for w in d["cost"].weights if w.endswith("/weight")}
    if scope == "all":
        chosen |= {w for p, d in cg.ops() if has_role(d["kind"], "embedding") for w in d["cost"].weights}
    if scope == "experts":
        chosen &= expert_weights(cg)
    return chosen - kept_by(cg, keep)[0]


def quantization_note(inf, scope: str, keep: tuple) -> list[str]:
    """The assumption lines of ``infer`` for a quantized weight dtype (none for bf16/fp16):
    the layout, which weights take it, the patterns that kept some in 16 bits or matched nothing."""
    w = inf.weights
    if not w.quantized:
        return []
    which = {"linear": "linear layers except the output head and MoE routers",
             "linear+head": "linear layers and the output head, not MoE routers",
             "all": "linear layers, the output head and the embedding tables, not MoE routers",
             "experts": "the MoE experts' linear layers only"}[scope]
    notes = [f"weights {w.name}: {w.description}; quantized: {which} ({len(inf._quantized)} weight tensors "
             "of the graph); every other weight in 16 bits"]
    keep = keep_names(keep)
    if keep:
        _, unmatched = kept_by(inf.cg, keep)
        notes.append("kept in 16 bits (modules_to_not_convert): " + ", ".join(keep)
                     + ("; matching no weight: " + ", ".join(unmatched) if unmatched else ""))
    return notes
