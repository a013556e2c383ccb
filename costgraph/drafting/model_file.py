"""The whole model file of a draft: embeddings, the layers as ``repeat``, the final norm, the head;
the ``dim`` declarations of the symbols used (each naming its config field), a ``config`` of the
user's values, and the header saying where the draft comes from and how its fields map.
"""

from __future__ import annotations

from .blocks import is_norm, norm_call
from .facts import Module
from .probe import FIELDS
from .writer import Sizer, layer_lines


def find_layers(root: Module, count: int) -> Module | None:
    """The ModuleList of the Transformer layers: ``count`` children built alike, else the longest list."""
    lists = [m for m in root.walk() if m.cls == "ModuleList" and m.children]
    exact = [m for m in lists if len(m.children) == count]
    pool = exact or lists
    return max(pool, key=lambda m: len(m.children)) if pool else None


def _parent(root: Module, path: str) -> Module:
    want = path.rsplit(".", 1)[0] if "." in path else ""
    return next(m for m in root.walk() if m.path == want)


def _is_embedding(m: Module) -> bool:
    return "embedding" in m.cls.lower() and len(m.params.get("weight", ())) == 2 and not m.children


def body_lines(root: Module, sz: Sizer, rotary: bool) -> tuple[list[str], list[str]]:
    """(input declarations, statements) of the model's body."""
    values = sz.probe.symbol_values()
    layers = find_layers(root, values.get("l", 0))
    if layers is None:
        raise ValueError("no ModuleList of layers found")
    base = _parent(root, layers.path)
    inputs, lines, emb_names = ["input tokens[b, s]: index"], [], []
    embeds = []
    for m in base.walk():
        if _is_embedding(m) and m.order is not None and not m.path.startswith(layers.path + "."):
            num, dim = m.params["weight"]
            ids = "tokens"
            if not embeds:
                emb_names.append(m.name)
            else:
                ids = "positions"
                inputs.append("input positions[s]: index")
            if "scaled" in m.cls.lower():
                sz.warnings.append(f"{m.path} ({m.cls}) scales its output: the scale is not drafted")
            embeds.append(f"embedding({ids}, {sz.size(num, 'embedding rows')}, {sz.size(dim, 'embedding width')}, "
                          f"name = {m.name})")
            if len(embeds) > 2:
                return inputs, [sz.todo(m, "a third embedding")]
    lines.append("x = " + " + ".join(embeds))
    start, end = layers.children[0].order or 0, layers.children[-1].order or 0
    after = [c for c in base.children if c.order is not None and c.order < start]
    for c in after:
        if c.cls == "Dropout" and c.attrs.get("p", 0):
            lines.append(f"x = dropout(x, name = {c.name})")
    lines += _repeat(layers, sz, rotary, values)
    tail = [c for c in base.children if c.order is not None and c.order > end]
    for c in tail:
        if is_norm(c):
            lines.append(f"x = {norm_call(c, 'x')}")
        elif c.params:
            lines.append(sz.todo(c, "after the layers, not a norm"))
    lines += _head(root, base, sz, emb_names)
    return inputs, lines


def _repeat(layers: Module, sz: Sizer, rotary: bool, values: dict) -> list[str]:
    texts = [layer_lines(layer, sz if i == 0 else sz.quiet(), rotary) for i, layer in enumerate(layers.children)]
    n = len(layers.children)
    count = "l" if values.get("l") == n else str(n)
    if count == "l":
        sz.used.add("l")
    if all(t == texts[0] for t in texts):
        return [f"repeat {count} as {_label(layers.name, values)} {{", *("  " + t for t in texts[0]), "}"]
    sz.warnings.append(f"{layers.path}: layers differ ({len(set(map(tuple, texts)))} kinds): written one by one, "
                       "each kind as its own repeat; fold the pattern by hand (repeat l as layers[j] with conditions)")
    out, i = [], 0
    while i < n:
        j = i
        while j < n and texts[j] == texts[i]:
            j += 1
        out += [f"repeat {j - i} as {_label(layers.name, values)}_{i} {{   # TODO layers {i}..{j - 1}: one kind of the pattern",
                *("  " + t for t in texts[i]), "}"]
        i = j
    return out


def _label(name: str, values: dict) -> str:
    """The repeat's name: the ModuleList's, unless a dimension has it (GPT-2's ``h``)."""
    return "layers" if name in values or name in ("b", "s") else name


def _head(root: Module, base: Module, sz: Sizer, emb_names: list[str]) -> list[str]:
    heads = [c for c in root.children if c is not base and c.order is not None and c.params]
    if not heads:
        return ["return x"]
    head = heads[0]
    w = head.params.get("weight")
    if "linear" not in head.cls.lower() or w is None or len(w) != 2 or len(heads) > 1:
        return [sz.todo(head, "an output head other than one linear"), "return x"]
    bias = "true" if "bias" in head.params else "false"
    tied = ""
    if "weight" in head.tied:
        holder = head.tied["weight"].rsplit(".", 1)[-1]
        tied = f", tied = {holder}" if holder in emb_names else ""
        if not tied:
            sz.warnings.append(f"{head.path} shares its weight with {head.tied['weight']}: not drafted as tied")
    return [f"return linear(x, {sz.size(w[0], 'output size')}, bias = {bias}{tied}, name = {head.name})"]


def render(name: str, header: list[str], inputs: list[str], lines: list[str], sz: Sizer,
           fields: dict[str, str], real: dict[str, int], config_name: str, context: int | None = None) -> str:
    """The model file's text. ``fields``: symbol → config field; ``real``: symbol → the user's value;
    ``context``: the config's context length (the configuration's ``s``; 2048 when it has none)."""
    order = ["b", "s", *(s for s in ("h", "a", "kv", "d", "i", "m", "E", "k", "l", "V", "s_max") if s in sz.used),
             *sorted(s for s in sz.used if s not in ("h", "a", "kv", "d", "i", "m", "E", "k", "l", "V", "s_max"))]
    dims = ['  dim b   "micro-batch size (sequences)"', '  dim s   "sequence length (tokens)"']
    for sym in order[2:]:
        desc = next((d for f, (s, d) in FIELDS.items() if s == sym), sym)
        dims.append(f'  dim {sym:<3} "{desc} (config.json: {fields.get(sym, "?")})"')
    body = [("  " + x) if x else "" for x in (*inputs, "", *lines)]
    values = [f"{sym} = {real[sym]}" for sym in order[2:] if sym in real]
    seq = real.get("s_max", context or 2048)
    config = f"config {config_name} {{ {', '.join(values + [f's = {seq}', 'b = 1'])} }}"
    imports = ['import "std/attention.cg"', 'import "std/mlp.cg"', 'import "std/moe.cg"']
    return "\n".join([*header, "", *imports, "", f"model {name} {{", *dims, "", *body, "}", "", config, ""])
