"""The ``param`` statements of the modules a draft's forward never calls (a vision-language model's vision tower
and projector in a text forward, an encoder's unused query tables): :func:`uncalled_lines`, with the sizes of their
weights in the probed config's symbols where one names them (:func:`outer_size`, :func:`text_size`).

Torch-free: reads the traced :class:`~costgraph.drafting.facts.Module` tree and the :class:`~costgraph.drafting.writer.Sizer`.
"""

from __future__ import annotations

from .facts import Module
from .writer import Sizer


def outer_size(n: int, sz: Sizer) -> str:
    """A size of a module outside the probed config, in symbols only when it is one large probed field times a
    small factor (Gemma 3's projector: ``h``); else its number (a vision tower's 196 positions are no ``4·kv²``)."""
    text = sz.probe.cover(n, max_coefficient=4)
    values = sz.probe.symbol_values()
    names = [t for t in (text or "").split(" * ") if t in values]
    if text is None or len(names) != 1 or values[names[0]] < 1000:
        return str(n)
    sz.used.add(names[0])
    return text


def text_size(n: int, sz: Sizer) -> str:
    """A size of an uncalled weight whose other size is the text config's (:func:`outer_size`): in any symbols where
    a product of them (LUKE's entity position table [s_max, h], k28text13), else its number."""
    text = sz.probe.cover(n)
    if text is None:
        return str(n)
    sz.used.update(t for t in text.split(" * ") if t in sz.probe.symbol_values())
    return text


def uncalled_lines(root: Module, layers: Module, sz: Sizer) -> list[str]:
    """``param`` statements for the modules a text forward never calls outside the layers (a vision-language
    model's vision tower and projector: ``parameters()`` counts them, no FLOPs). A weight with a dimension in the
    config's symbols is written apart (Gemma 3's projector ``[1152, h]``); the rest of a module, sized by the
    sub-configs the probe does not touch, as one count."""
    found: list[Module] = []

    def visit(node: Module) -> None:
        for c in node.children:
            if c.path == layers.path:     # the layers' list (a copy in index order: not the same object)
                continue
            if all(x.order is None for x in c.walk()):     # nothing in it ran (Whisper's wrapper ran its decoder)
                if c.param_count():
                    found.append(c)
            else:
                visit(c)

    visit(root)
    out = []
    for top in found:
        rest, label = 0, top.path.replace(".", "_")
        for m in top.walk():
            for pname, shape in m.params.items():
                if pname in m.tied:
                    continue
                sizes = [outer_size(n, sz) for n in shape]
                if any(not t.isdigit() for t in sizes):     # the text config's weight: its other sizes in symbols
                    sizes = [text_size(n, sz) if t.isdigit() else t for n, t in zip(shape, sizes)]
                    out.append(f"param {(m.path + '.' + pname).replace('.', '_')}[{', '.join(sizes)}]")
                else:
                    k = 1
                    for n in shape:
                        k *= n
                    rest += k
        if rest:
            out.append(f"param {label}[{rest}]   # {top.cls}: its parameters of fixed size, not in the text forward")
    if out:
        out.insert(0, "# built but never called by a text forward (parameters only): "
                      + ", ".join(f"{t.path} ({t.cls})" for t in found))
    return out
