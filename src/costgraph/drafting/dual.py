"""Dual encoders (CLIP, SigLIP, MetaCLIP 2, AIMv2, Chinese-CLIP, AltCLIP, OWL-ViT, CLIPSeg, VisionTextDualEncoder):
two towers of different sizes in one draft (issue 28 item 2, task k28dual13).

transformers 5.24 modeling_clip.py ``CLIPModel.__init__`` builds ``text_model = CLIPTextModel._from_config(
text_config)`` and ``vision_model = CLIPVisionModel._from_config(vision_config)`` (each tower a model of its own,
of its own sizes), ``visual_projection = nn.Linear(vision hidden, projection_dim, bias=False)``, ``text_projection =
nn.Linear(text hidden, projection_dim, bias=False)`` and ``logit_scale = nn.Parameter(torch.tensor(
logit_scale_init_value))`` (one element); ``CLIPModel.forward`` projects each tower's pooled output
(``pooler_output``: the vision tower's class token after ``post_layernorm``, the text tower's end-of-text token),
divides each by its L2 norm and returns ``torch.matmul(text_embeds, image_embeds.t()) * logit_scale.exp()``
(``[b, e] × [e, b]``: 2·b·b·e FLOPs). SigLIP (modeling_siglip.py ``SiglipModel``) has no projections (its text
tower's ``head`` maps to the image embeddings' width, ``projection_size``) and adds ``logit_bias`` (one element);
Chinese-CLIP's text tower is built without its pooler (its class token read); AltCLIP's text head maps to
``project_dim``, which ``text_projection`` reads.

Shapes: b image-text pairs (the b images and the b texts one batch), the text [b, s] token ids, the image
[b, c, image, image]; the logits ``logits_per_text`` [b, b]. Units: parameters and FLOPs (``matmul`` convention: the
L2 normalisations, written as weightless ``rmsnorm``, and the logit scale's ``exp`` count no matrix FLOPs). Errors:
:class:`~costgraph.errors.CostgraphValueError` where a tower's input is shaped by expressions.

Each tower is drafted alone, as the tower model transformers builds for its sub-config (``CLIPTextModel``,
``CLIPVisionModel``: the drafts the encoder and vision paths make, checked at both probes), and written as a
``block`` of its own whose parameters are the tower's symbols; the model calls the two blocks with the tower's
symbols renamed where both towers have one (``h_t``, ``a_t``, ``i_t``, ``l_t`` of the text tower, ``h_v``, ``a_v``,
``i_v``, ``l_v`` of the vision tower, as the bundled ``models/clip.cg`` names them; the vision tower's sequence
``s_v``; ``e`` the joint size, ``projection_dim``). The whole draft is checked against the dual model at two probes
that set the text tower at one probe's primes and the vision tower at the other's (so every symbol of one tower
differs from its namesake in the other), the joint size at a prime of its own
(:func:`costgraph.drafting.probe.joint_width`). Torch is passed in; this module builds nothing itself.
"""

from __future__ import annotations

import re

from ..errors import CostgraphValueError

#: the towers, in the order the draft calls them: (kind, the sub-config, the suffix of a symbol both towers have)
TOWERS = (("vision", "vision_config", "_v"), ("text", "text_config", "_t"))
#: the text tower's symbol of its head's width (SigLIP's ``projection_size``: :data:`costgraph.drafting.probe.FIELDS`),
#: where the model has no projections: the image embeddings' width, the vision tower's hidden size (``h_v``)
JOINT = "e_j"
#: the model's own parameters a dual encoder's logits read (``logit_scale`` multiplies, after ``exp``, no FLOPs
#: counted; SigLIP's ``logit_bias`` is added)
LOGIT_PARAMS = {"logit_scale": "*", "logit_bias": "+"}
#: the fields of a sub-config's dict that name no size and that a config built from it sets itself
_DROPPED = ("transformers_version", "_name_or_path", "architectures", "dtype", "id2label", "label2id")

_DIM = re.compile(r'^\s*dim\s+(\w+)\s*(?:=\s*(.*?))?\s*"(.*)"\s*$')
_WORD = re.compile(r"[A-Za-z_]\w*")


def towers(torch, model) -> dict | None:
    """``{kind: (attribute, tower module)}`` of a dual encoder (:func:`costgraph.drafting.inputs_dual.is_dual`): its
    children built from its ``text_config`` and ``vision_config`` (CLIP's ``text_model``, ``vision_model``), else
    None."""
    from .inputs_dual import is_dual

    if not is_dual(torch, model):
        return None
    found = {}
    for kind, sub, _ in TOWERS:
        want = type(getattr(model.config, sub))
        hits = [(n, m) for n, m in model.named_children() if type(getattr(m, "config", None)) is want]
        if len(hits) != 1:
            return None
        found[kind] = hits[0]
    return found


def tower_config(cfg: dict, config, sub: str) -> dict:
    """The config dict of the sub-config ``sub`` (with its model_type): the fields the dual config's dict ``cfg``
    gives it, the rest left to the sub-config class's defaults, so that a field its ``__post_init__`` makes follow
    another still follows it at the probes (SigLIP's text ``projection_size``, the hidden size where None:
    transformers 5.24 configuration_siglip.py ``SiglipTextConfig.__post_init__``)."""
    given = cfg.get(sub) if isinstance(cfg.get(sub), dict) else {}
    return {**{k: v for k, v in given.items() if k not in _DROPPED}, "model_type": getattr(config, sub).model_type}


def _split(text: str) -> tuple[list[str], list[str], list[str], list[str], list[str]]:
    """(imports, local blocks' lines, dim lines, input lines, statements) of a drafted model file."""
    lines = text.splitlines()
    start = next(j for j, x in enumerate(lines) if x.startswith("model "))
    end = next(j for j in range(start, len(lines)) if lines[j] == "}")
    imports = [x for x in lines[:start] if x.startswith("import ")]
    local = [x for x in lines[:start] if x and not x.startswith(("import ", "#"))]
    inner = [x[2:] for x in lines[start + 1:end]]
    dims = [x for x in inner if x.startswith("dim ")]
    inputs = [x for x in inner if x.startswith("input ")]
    body = [x for x in inner if x and not x.startswith(("dim ", "input "))]
    return imports, local, dims, inputs, body


def _renamed(text: str, names: dict[str, str]) -> str:
    return _WORD.sub(lambda m: names.get(m.group(0), m.group(0)), text)


def _tensor_param(line: str) -> tuple[str, str, list[str]]:
    """(name, ``name[dims]``, the shape's names) of an ``input`` line; CostgraphValueError for a shape of
    expressions (a block binds plain names only)."""
    decl = line[len("input "):].split("#")[0].split(":")[0].strip()
    name, shape = decl.split("[", 1)
    dims = [d.strip() for d in shape.rstrip("]").split(",")]
    if not all(d.isidentifier() or d.isdigit() for d in dims):
        raise CostgraphValueError(f"cannot draft the tower input {decl}: a shape of expressions",
                                  hint="write this dual encoder's model file by hand (docs: a new architecture)")
    return name.strip(), decl, [d for d in dims if d.isidentifier()]


class Tower:
    """One tower's draft as a block: ``kind`` (vision, text), the tower's :class:`~costgraph.drafting.draft.Draft`,
    its symbols renamed in the dual model (``names``: tower symbol → model symbol) and its config prefix."""

    def __init__(self, kind: str, draft, sub: str, names: dict[str, str], block: str, pooler: bool = True):
        self.kind, self.draft, self.sub, self.names, self.block = kind, draft, sub, names, block
        self.aliases = {s for s, new in names.items() if s == JOINT and new != s}   # the other tower's width
        self.imports, self.local, self.dims, self.inputs, self.body = _split(draft.text)
        if not pooler:
            self.body = _without_pooler(self.body)
        self.params = [_tensor_param(x) for x in self.inputs]
        bound = {d for _, _, ds in self.params for d in ds}
        symbols = {_DIM.match(x).group(1) for x in self.dims} | {"b", "s"}
        used = {w for x in self.body for w in _WORD.findall(x.split("#")[0])}
        self.scalars = [s for s in _ordered(symbols) if s in used and s not in bound]

    def block_lines(self) -> list[str]:
        args = ", ".join([d for _, d, _ in self.params] + self.scalars)
        return [f"block {self.block}({args}) {{", *(f"  {x}" for x in self.body), "}"]

    def call(self, attribute: str) -> str:
        args = ", ".join([n for n, _, _ in self.params] + [self.names.get(s, s) for s in self.scalars])
        return f"{self.block}({args}, name = {attribute})"

    def pooled(self) -> bool:
        """Whether the tower's draft returns one token a sequence (``select``: the vision tower's class token)."""
        return any("select(" in x for x in self.body[-3:])

    def dim_lines(self, taken: set[str]) -> list[str]:
        out = []
        for x in self.dims:
            sym, expr, desc = _DIM.match(x).groups()
            new = self.names.get(sym, sym)
            if sym in self.aliases or new in taken or (sym in ("b", "s") and self.kind == "text"):
                continue
            taken.add(new)
            desc = desc.replace("(config.json: ", f"(config.json: {self.sub}.")
            lead = f"{self.kind} tower: "
            if expr is None:
                out.append(f'  dim {new:<5} "{lead}{desc}"')
            else:
                out.append(f'  dim {new} = {_renamed(expr, self.names)} "{lead}{desc}"')
        return out


def _without_pooler(body: list[str]) -> list[str]:
    """A text tower's statements without its pooler's (the dense and tanh after the class token's ``select``): the
    tower as a dual encoder builds it, ``add_pooling_layer=False`` (transformers 5.24 modeling_chinese_clip.py
    ``ChineseCLIPModel.__init__``: ``ChineseCLIPTextModel(text_config, add_pooling_layer=False)``; its text features
    are ``last_hidden_state[:, 0, :]``, the class token)."""
    cut = max((j for j, x in enumerate(body) if "select(" in x), default=None)
    if cut is None or not body[-1].startswith("return"):
        raise CostgraphValueError("cannot draft a text tower without its pooler: no class token selected before it",
                                  hint="write this dual encoder's model file by hand (docs: a new architecture)")
    return body[:cut + 1] + [body[-1] if body[-1] == "return x" else "return x"]


def _ordered(symbols: set[str]) -> list[str]:
    first = ("b", "s", "h", "a", "kv", "d", "i", "l", "V", "s_max", "n", "image", "p", "c")
    return [s for s in first if s in symbols] + sorted(s for s in symbols if s not in first)


def rename_maps(text_draft, vision_draft, projected: bool = True) -> dict[str, dict[str, str]]:
    """tower kind → (tower symbol → model symbol): a symbol both towers use gets the tower's suffix (``h_t``,
    ``h_v``); the text tower's ``s`` (its tokens) stays ``s``, the vision tower's (derived from the image) is
    ``s_v``; ``b`` is shared (b image-text pairs). Without projections (``projected`` False: SigLIP) the text head's
    width :data:`JOINT` is the image embeddings' (the vision tower's ``h``); with them it is a size of its own
    (AltCLIP's ``project_dim``, which ``text_projection`` reads)."""
    syms = {k: {_DIM.match(x).group(1) for x in _split(d.text)[2]} for k, d in (("text", text_draft),
                                                                                   ("vision", vision_draft))}
    both = (syms["text"] & syms["vision"]) - {"b", "s"}
    out = {}
    for kind, _, suffix in TOWERS:
        names = {s: s + suffix for s in both}
        if kind == "vision" and "s" in syms["vision"]:
            names["s"] = "s_v"
        out[kind] = names
    if JOINT in syms["text"] and not projected:    # SigLIP: the text head outputs the image embeddings' width
        out["text"][JOINT] = out["vision"].get("h", "h")
    return out


def projections(torch, model, found: dict) -> dict[str, tuple[str, bool]] | None:
    """tower kind → (attribute, bias) of the dual model's own ``nn.Linear`` mapping that tower's pooled output to the
    joint size (CLIP's ``visual_projection``, ``text_projection``: ``[projection_dim, tower hidden]``); {} where the
    model has none (SigLIP); None where a top-level module is neither a tower, a projection nor of no parameters."""
    out = {}
    joint = getattr(model.config, "projection_dim", None)
    towers_ = {id(m) for _, m in found.values()}
    for attr, m in model.named_children():
        if id(m) in towers_ or not any(True for _ in m.parameters()):
            continue
        kind = "vision" if any(w in attr for w in ("visual", "vision", "image")) else "text" if "text" in attr else None
        sub = getattr(model.config, f"{kind}_config", None) if kind else None
        hidden = getattr(sub, "project_dim", None) or getattr(sub, "hidden_size", None)    # AltCLIP's text head's
        if not isinstance(m, torch.nn.Linear) or kind in out or m.in_features != hidden or m.out_features != joint:
            return None
        out[kind] = (attr, m.bias is not None)
    return out


def logit_params(model) -> list[tuple[str, int]] | None:
    """(name, elements) of the dual model's own parameters (:data:`LOGIT_PARAMS`), None where it holds another."""
    own = [(n, p.numel()) for n, p in model.named_parameters(recurse=False)]
    return own if all(n in LOGIT_PARAMS for n, _ in own) else None


def model_lines(name: str, parts: dict, projected: dict, logits: list[tuple[str, int]]) -> list[str]:
    """The dual model's ``model`` block: the dims (b, s, e, each tower's renamed), the towers' inputs, the two calls,
    the projections, the L2 normalisations and the logits (``parts``: kind → (:class:`Tower`, attribute))."""
    vision, text = parts["vision"][0], parts["text"][0]
    taken = {"b", "s"}
    dims = ['  dim b     "micro-batch size (image-text pairs: b images and b texts)"',
            '  dim s     "text sequence length (tokens)"']
    if projected:
        taken.add("e")
        dims.append('  dim e     "joint embedding size (config.json: projection_dim)"')
    for kind in ("text", "vision"):
        dims += parts[kind][0].dim_lines(taken)
    inputs, seen = [], set()
    for t in (text, vision):
        for (pname, _, _), line in zip(t.params, t.inputs):
            if pname not in seen:
                seen.add(pname)
                decl, sep, note = line.partition("#")
                inputs.append(_renamed(decl, t.names) + sep + note)
    body = [f"img = {vision.call(parts['vision'][1])}"
            + ("   # pooled: [b, h_v]" if vision.pooled() else ""),
            f"txt = {text.call(parts['text'][1])}"
            + (f"   # its head {text.names[JOINT]} wide: the image embeddings' (projection_size)"
               if text.aliases else "")]
    if not text.pooled():
        inputs.append("input eos[b]: index   # each text's pooled token (CLIP: its end-of-text token, the argmax of "
                      "the ids: no cost)")
        body.append("txt = gather(txt, eos)   # pooled: one token of each text (CLIP: x[arange(b), eos])")
    for kind, var in (("vision", "img"), ("text", "txt")):
        if kind in projected:
            attr, bias = projected[kind]
            body.append(f"{var} = linear({var}, e, bias = {'true' if bias else 'false'}, name = {attr})   # [b, e]")
    body += ["img = rmsnorm(img, weight = false, name = image_norm)   # / its L2 norm (no matrix FLOPs)",
             "txt = rmsnorm(txt, weight = false, name = text_norm)",
             "y = matmul(txt, transpose(img))   # logits_per_text [b, b]: every text with every image"]
    for pname, numel in logits:
        body += [f"param {pname}[{numel}]", f"y = y {LOGIT_PARAMS[pname]} {pname}"
                 + ("   # exp(logit_scale): not counted" if pname == "logit_scale" else "")]
    body.append("return y")
    return [f"model {name} {{", *dims, "", *(f"  {x}" for x in inputs), "", *(f"  {x}" for x in body), "}"]
