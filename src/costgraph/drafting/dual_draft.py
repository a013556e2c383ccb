"""The draft of a dual encoder (:mod:`costgraph.drafting.dual`): its two towers drafted alone, joined in one file and
checked against the dual model at two probes (issue 28 item 2, task k28dual13).

Probe k (0, 1) sets the text tower's fields at the values the text tower's own probe k checked, the vision tower's at
those of its probe 1 − k (every size of one tower then differs from its namesake in the other: h_t = 40040 beside
h_v = 61880), ``projection_dim`` at :func:`~costgraph.drafting.probe.joint_width` (k), and traces one forward
of b image-text pairs (token ids [b, s] and an image, :mod:`costgraph.drafting.inputs_dual`) at the text probe's
(b, s). Torch, the single-config drafter and its check at the config's sizes are passed in (no import cycle with
:mod:`costgraph.drafting.api`).
"""

from __future__ import annotations

import re

from ..errors import CostgraphValueError
from .configs import _config_object
from .draft import Check, Draft
from .dual import JOINT, TOWERS, Tower, logit_params, model_lines, projections, rename_maps, \
    tower_config, towers
from .model_build import _build
from .probe import joint_width

#: the token-id fields a probe sets to 0, 1, 2 (as the single-config probe does: ids below every probe vocabulary)
TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id")


def _text_s(text: str) -> int:
    """The ``s`` of a drafted file's ``config`` line (the text tower's context), 77 where it has none."""
    m = re.search(r"^config \w+ \{.*\bs = (\d+)", text, re.M)
    return int(m.group(1)) if m else 77


def _probe_cfg(cfg: dict, config, drafts: dict, k: int, projected: bool) -> tuple[dict, dict[str, int]]:
    """(the dual config at probe k, the draft's symbols there: towers renamed, e, b and s); ``projected``: the model
    has the towers' projections (:func:`costgraph.drafting.dual.rename_maps`)."""
    names = rename_maps(drafts["text"], drafts["vision"], projected)
    out = {**cfg}
    values: dict[str, int] = {}
    for kind, sub, _ in TOWERS:
        at = drafts[kind].checks[k if kind == "text" else 1 - k].values
        fields = {f: at[sym] for sym, f in drafts[kind].mapping.items()}
        inner = {**tower_config(cfg, config, sub), **fields}
        for i, t in enumerate(TOKEN_IDS):
            if isinstance(inner.get(t), int):
                inner[t] = i
        out[sub] = inner
        values.update({names[kind].get(sym, sym): v for sym, v in at.items()
                       if sym not in ("b", "s") and (projected or sym != JOINT)})
        if kind == "text":
            values.update(b=at["b"], s=at["s"])
    joint = drafts["text"].mapping.get(JOINT)
    if joint is not None and not projected:     # SigLIP: the head outputs the image width
        out[next(sub for kind, sub, _ in TOWERS if kind == "text")][joint] = values[names["text"][JOINT]]
    if isinstance(getattr(config, "projection_dim", None), int):
        out["projection_dim"] = values["e"] = joint_width(k)
    return out, values


def _tower_class(transformers, dual: str, kind: str, tower) -> str:
    """The transformers class a tower is drafted as: its own where transformers exports it (CLIP's ``CLIPTextModel``),
    else the dual class's ``…TextModel`` or ``…VisionModel`` of the tower's config (OWL-ViT's
    ``OwlViTTextTransformer`` is no export: transformers 5.24 modeling_owlvit.py ``OwlViTTextModel`` holds one as
    ``text_model``, the same parameters and forward)."""
    own = type(tower).__name__
    if hasattr(transformers, own):
        return own
    named = dual[:-len("Model")] + kind.capitalize() + "Model" if dual.endswith("Model") else own
    cls = getattr(transformers, named, None)
    return named if cls is not None and getattr(cls, "config_class", None) is type(tower.config) else own


def _pooler_kept(torch, tcfg: dict, cls: str, tower, have: int) -> bool:
    """Whether the tower the dual model holds has the pooler of the tower model drafted alone (``have`` parameters at
    the config, its draft's check): True where their parameters agree; False where the alone one's ``pooler`` is all
    they differ by (ChineseCLIP's text tower, built ``add_pooling_layer=False``); CostgraphValueError otherwise."""
    want = sum(p.numel() for p in tower.parameters())
    if have == want:
        return True
    alone = _build(torch, tcfg, cls)
    pooler = getattr(alone, "pooler", None)
    if pooler is not None and have - sum(p.numel() for p in pooler.parameters()) == want:
        return False
    raise CostgraphValueError(f"the dual model's tower {type(tower).__name__} holds {want:,} parameters, {cls} drafted "
                              f"alone {have:,}", hint="write this dual encoder's model file by hand (docs: a new "
                                                      "architecture in ten minutes)")


def draft_dual(torch, cfg: dict, class_name: str | None, name: str | None, check: bool, draft_one,
               at_config) -> Draft | None:
    """The draft of ``cfg``'s dual encoder, or None where the config builds no dual encoder this module drafts (no
    ``text_config`` and ``vision_config``, no logit scale, a top-level module other than the towers' projections).
    ``draft_one(torch, cfg, class_name, name, check)``: the single-config drafter (each tower's, checked);
    ``at_config(torch, cfg, class_name, built, result)``: the comparison at the config's own sizes (api's).

    Raises CostgraphValueError where a tower's own draft is not exact (naming the tower and why)."""
    import transformers

    config = _config_object(cfg)
    if getattr(config, "text_config", None) is None or getattr(config, "vision_config", None) is None:
        return None
    try:
        model = _build(torch, cfg, class_name, config)
    except CostgraphValueError:     # not built at the config itself: the single-config path says why at its probe
        return None
    found = towers(torch, model)
    projected = projections(torch, model, found) if found else None
    logits = logit_params(model) if found else None
    if found is None or logits is None or projected is None or set(projected) not in ({"text", "vision"}, set()):
        return None
    drafts, pooled = {}, {}
    for kind, sub, _ in TOWERS:
        cls = _tower_class(transformers, type(model).__name__, kind, found[kind][1])
        d = draft_one(torch, tower_config(cfg, config, sub), cls, None, True)
        if not d.exact:
            raise CostgraphValueError(f"the {kind} tower of {type(model).__name__} ({cls}) does not draft exactly: "
                                      + ("; ".join(d.warnings) or "a count differs at a probe")[:300],
                                      hint="draft the tower alone (costgraph import of its sub-config) to see why")
        drafts[kind] = d
        pooled[kind] = _pooler_kept(torch, tower_config(cfg, config, sub), cls, found[kind][1], d.config_params[0])
    if not projected and JOINT not in drafts["text"].mapping:
        raise CostgraphValueError(f"the towers of {type(model).__name__} meet at no projection and the text tower's "
                                  "output width is no config field", hint="write this dual encoder's model file by "
                                                                          "hand (docs: a new architecture)")
    model_name = name or "".join(ch if ch.isalnum() else "_" for ch in cfg["model_type"])
    names = rename_maps(drafts["text"], drafts["vision"], bool(projected))
    parts = {kind: (Tower(kind, drafts[kind], sub, names[kind], f"{model_name}_{kind}", pooled[kind]),
                    found[kind][0]) for kind, sub, _ in TOWERS}
    mapping = {names[k].get(sym, sym): f"{sub}.{f}" for k, sub, _ in TOWERS for sym, f in drafts[k].mapping.items()
               if sym not in parts[k][0].aliases}
    real = {names[k].get(sym, sym): v for k, _, _ in TOWERS for sym, v in drafts[k].values.items()
            if sym not in parts[k][0].aliases}
    if projected:
        mapping["e"], real["e"] = "projection_dim", int(config.projection_dim)
    text = _text(cfg, model_name, type(model).__name__, parts, projected, logits, mapping, real,
                 _text_s(drafts["text"].text), transformers.__version__)
    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    warnings = [f"{k} tower: {w}" for k, _, _ in TOWERS for w in drafts[k].warnings]
    result = Draft(text, model_name, cfg["model_type"], type(model).__name__, versions, mapping, real, warnings, [],
                   confirmed=all(d.confirmed for d in drafts.values()))
    if check:
        built = _check(torch, cfg, config, class_name, drafts, text, model_name, result, bool(projected))
        at_config(torch, cfg, class_name, built, result)
    return result


def _text(cfg, model_name, torch_class, parts, projected, logits, mapping, real, s, version) -> str:
    header = [f"# Drafted by `costgraph import` from transformers {version} `{torch_class}`",
              f"# (model_type {cfg['model_type']}) on the meta device: a dual encoder, each tower drafted alone and "
              "written as a block",
              "# (costgraph.drafting.dual). Read it before relying on it: it was compared with PyTorch at two probe",
              "# configurations (parameters and forward FLOPs, at the end of the file).",
              "# config.json fields: " + ", ".join(f"{sym} = {f}" for sym, f in mapping.items())]
    imports, local = [], []
    for t, _ in parts.values():
        imports += [x for x in t.imports if x not in imports]
        local += [x for x in t.local if x not in local]
    blocks = [x for kind in ("vision", "text") for x in (*parts[kind][0].block_lines(), "")]
    values = ", ".join(f"{sym} = {v}" for sym, v in real.items())
    return "\n".join([*header, "", *imports, "", *local, *blocks,
                      *model_lines(model_name, parts, projected, logits), "",
                      f"config imported {{ {values}, b = 1, s = {s} }}", ""])


def _counted(torch, model, b: int, s: int) -> int:
    """FlopCounterMode's forward FLOPs of one forward of b image-text pairs (:func:`costgraph.drafting.inputs_dual.
    dual_inputs`), as :func:`costgraph.drafting.model_build._forward` counts them, without its module facts (the
    towers' were read from their own traces): dense towers, every FLOP counted as run."""
    from ..torch_measure import flop_counter, meta_forward
    from .inputs_dual import dual_inputs
    from .model_build import _no_weights_built

    counter = flop_counter()
    with torch.no_grad(), meta_forward(), counter, _no_weights_built(torch):
        model(**dual_inputs(torch, model, b, s))
    return int(counter.get_total_flops())


def _check(torch, cfg, config, class_name, drafts, text, model_name, result: Draft, projected: bool):
    """``result.checks`` at the two dual probes; returns the loaded draft."""
    from .. import model as cg

    built = cg.loads(text, path=f"<import {model_name}>")
    for k in (0, 1):
        probed, values = _probe_cfg(cfg, config, drafts, k, projected)
        model = _build(torch, probed, class_name)
        fl = counted = _counted(torch, model, values["b"], values["s"])
        values = {sym: v for sym, v in values.items() if sym in built.symbols}
        got = built.costs("model", convention="matmul").evaluate(None, values)
        params = int(sum(p.numel() for p in model.parameters()))
        result.checks.append(Check(k, values, params, int(got["params"]), fl, int(got["flops_forward"]),
                                   None if counted == fl else counted))
    return built
