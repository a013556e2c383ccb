"""Recognise stacks of layers a forward runs again and again (issue 28 item 2): HRM's two nested modules of layers.

transformers 5.24 modeling_hrm_text.py ``HrmTextModel`` holds two ``HrmTextStack`` (``L_module`` and ``H_module``:
``num_layers_per_stack`` layers and a ``final_norm`` each) and a parameter ``z_L_init`` [h], the low-level state's
first value. Its forward runs ``H_cycles`` high cycles, each ``L_cycles`` calls of the low stack on ``z_L + x`` then
one call of the high stack on ``x + z_L``: the low stack's weights run ``H_cycles · L_cycles`` times, the high stack's
``H_cycles`` times, each counted once. The trace sees each stack's first layer called that many times
(:attr:`costgraph.drafting.facts.Module.again`); the cycles are probed as counts (``c_H``, ``c_L``).

The draft defines the stack as a block of its own (its layers read by :func:`costgraph.drafting.writer.layer_lines`,
then its final norm) and calls each stack's instance once by name, then again with ``reuse =`` (the language's shared
instance: weights counted once, FLOPs and activations per call), in the forward's order.
"""

from __future__ import annotations

import re

from .blocks import is_norm, norm_call
from .facts import Module


def stacks(root: Module) -> tuple[Module, Module, Module] | None:
    """(the model holding them, the low stack, the high stack): two modules of one parent, each holding a ModuleList
    ``layers`` of layers built alike and a norm ``final_norm``, the first called more often than the second, a whole
    multiple of it; else None."""
    for parent in root.walk():
        found = [c for c in parent.children if _is_stack(c)]
        if len(found) != 2:
            continue
        low, high = sorted(found, key=lambda c: c.order if c.order is not None else 1 << 30)
        n_low, n_high = _calls(low), _calls(high)
        if n_high > 0 and n_low > n_high and n_low % n_high == 0 \
                and low.child("layers").children[0].signature() == high.child("layers").children[0].signature():
            return parent, low, high
    return None


def _is_stack(m: Module) -> bool:
    layers, norm = m.child("layers"), m.child("final_norm")
    return layers is not None and norm is not None and is_norm(norm) and len(m.children) == 2 and not m.params \
        and layers.cls == "ModuleList" and bool(layers.children) \
        and all(c.signature() == layers.children[0].signature() for c in layers.children)


def _calls(stack: Module) -> int:
    first = stack.child("layers").children[0]
    return 0 if first.order is None else 1 + len(first.again)


def looped_lines(root: Module, sz, rotary: bool) -> tuple[list[str], Module, Module] | None:
    """(the statements from the embeddings' output ``x`` to the high stack's last output, the low stack, the high
    stack) of a model of looped stacks (:func:`stacks`); the stack's block text added to ``sz.defined``. None when
    the model has none, or the cycles are not the probe's counts ``c_H`` and ``c_L``."""
    from .writer import layer_lines

    found = stacks(root)
    if found is None:
        return None
    parent, low, high = found
    values = sz.probe.symbol_values()
    n_high = _calls(high)
    n_low = _calls(low) // n_high
    if values.get("c_H") != n_high or values.get("c_L") != n_low:
        return None
    layers = low.child("layers")
    body = layer_lines(layers.children[0], sz, rotary)
    n = len(layers.children)
    count = "l" if values.get("l") == n else str(n)
    sz.used.update({"c_H", "c_L"} | ({"l"} if count == "l" else set()))
    text = "\n".join(body)
    dims = [s for s in values if s not in ("b", "s") and re.search(rf"\b{re.escape(s)}\b", text)]
    dims = ([count] if count == "l" else []) + [s for s in dims if s != "l"]
    block = re.sub(r"(?<!^)(?=[A-Z])", "_", low.cls).lower()     # HrmTextStack: hrm_text_stack
    norm = norm_call(low.child("final_norm"), "x")
    sz.defined.append("\n".join([
        f"# {low.cls}: {count} layers and a final norm, the unit the forward loops (called again with reuse =)",
        f"block {block}(x[B, S, H]{''.join(', ' + s for s in dims)}) {{",
        f"  repeat {count} as layers {{", *("    " + t for t in body), "  }", f"  return {norm}", "}"]))
    args = "".join(", " + s for s in dims)
    lines = [f"param {p}[{', '.join(sz.size(v, f'{parent.path}.{p}') for v in shape)}]   # {parent.cls}.{p}: the "
             "low-level state's first value" for p, shape in parent.params.items()]
    lines += [f"zl = {block}(x{args}, name = {low.name})   # high cycle 1: low cycles 1..c_L on zl + x, then the high "
              "stack on x + zl",
              f"repeat c_L - 1 as low_cycles {{",
              f"  zl = {block}(zl + x{args}, reuse = {low.name}, name = {low.name}_again)",
              "}",
              f"x = {block}(x + zl{args}, name = {high.name})",
              f"repeat c_H - 1 as high_cycles {{",
              f"  repeat c_L as low_cycles_again {{",
              f"    zl = {block}(zl + x{args}, reuse = {low.name}, name = {low.name}_again)",
              "  }",
              f"  x = {block}(x + zl{args}, reuse = {high.name}, name = {high.name}_again)",
              "}"]
    return lines, low, high
