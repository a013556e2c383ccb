"""Layers held as parallel ModuleLists (XLM: ``attentions``, ``layer_norm1``, ``ffns``, ``layer_norm2``, each of
``n_layers`` modules, layer i made of the i-th of each; transformers 5.24 modeling_xlm.py ``XLMModel``) folded into
one list of layers, each holding its modules under the lists' names, for :func:`costgraph.drafting.model_file.body_lines`.

Torch-free: it rewrites :class:`costgraph.drafting.facts.Module` facts.
"""

from __future__ import annotations

from dataclasses import replace

from .blocks import is_norm
from .facts import Module


def _moved(m: Module, path: str, name: str) -> Module:
    """``m`` and its subtree under a new path (its children's paths follow)."""
    return replace(m, path=path, name=name, children=[_moved(c, f"{path}.{c.name}", c.name) for c in m.children])


def fold_parallel_lists(root: Module, count: int) -> Module:
    """``root`` with a module's parallel ModuleLists of ``count`` modules each (two or more, side by side, and no
    other list of ``count``) replaced by one ModuleList ``layers``: layer i holds the i-th module of each list,
    named after its list, in the order of their calls. The forward's dataflow between them is not traced (each
    reads a residual sum): folded only when a layer's first call is no norm (post-norm, as XLM's ``forward``: the
    attention reads the layer's input, a norm follows each residual sum); else ``root`` unchanged."""
    lists = [m for m in root.walk() if m.cls == "ModuleList" and len(m.children) == count and count > 1]
    parents = {m.path.rpartition(".")[0] for m in lists}
    if len(lists) < 2 or len(parents) != 1:
        return root
    parent_path = parents.pop()
    if any(c.order is None for m in lists for c in m.children):
        return root
    layers = []
    for i in range(count):
        kids = sorted((m.children[i] for m in lists), key=lambda c: c.order)
        if is_norm(kids[0]):
            return root
        path = f"{parent_path + '.' if parent_path else ''}layers.{i}"
        moved = [_moved(c, f"{path}.{m.name}", m.name) for c, m in
                 sorted(((m.children[i], m) for m in lists), key=lambda cm: cm[0].order)]
        moved[0] = replace(moved[0], src="input")
        layers.append(Module(path, str(i), "+".join(m.cls for m in moved), children=moved, order=kids[0].order))
    folded = Module(f"{parent_path + '.' if parent_path else ''}layers", "layers", "ModuleList", children=layers)
    return _rebuilt(root, parent_path, {m.path for m in lists}, folded)


def _rebuilt(node: Module, parent_path: str, gone: set, folded: Module) -> Module:
    """``node`` with the lists ``gone`` under ``parent_path`` replaced by ``folded`` (at the first list's place)."""
    if node.path == parent_path:
        children, placed = [], False
        for c in node.children:
            if c.path in gone:
                if not placed:
                    children.append(folded)
                    placed = True
                continue
            children.append(c)
        return replace(node, children=children)
    return replace(node, children=[_rebuilt(c, parent_path, gone, folded) for c in node.children])
