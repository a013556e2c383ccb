"""Layer patterns folded into conditions (issue 28 item 1: "layer patterns (``layer_types``, ``*_layers`` lists,
every-n rules) into conditions"): the period of the layers' drafted texts (:func:`_period`), a period after a few
first layers of their own (:func:`_prefixed_period`), and the ``repeat`` with one branch per kind (:func:`_periodic`),
as :mod:`costgraph.drafting.model_file` writes the layers. Text only: no torch.
"""

from __future__ import annotations

import re


def _period(texts: list) -> int | None:
    """The least m with layer j drafted as layer j mod m for every j (RecurrentGemma's block_types,
    Gemma 3's sliding_window_pattern, Jamba's attn_layer_period), or None. m is at most ⌈n/2⌉: a
    pattern seen less than about twice is no evidence (the second probe, of more layers, confirms it)."""
    n = len(texts)
    return next((m for m in range(2, (n + 1) // 2 + 1) if all(texts[j] == texts[j % m] for j in range(n))), None)


def _prefixed_period(texts: list, most: int = 3) -> tuple[int, int, bool] | None:
    """(p, m, last): the least first layers p ≤ ``most`` of a kind of their own (and, if ``last``, the last layer of
    its own) between which layer j is drafted as every layer of its residue j mod m (Kimi Linear: a dense first
    layer, then MLA every 4th; Flint: two dense full-attention layers, full attention every 4th and last), m the
    least such period shown at least twice; else None."""
    n = len(texts)
    for last in (False, True):
        for p in range(0 if last else 1, most + 1):
            end = n - 1 if last else n
            for m in range(2, (end - p) // 2 + 1):
                first = {}
                for j in range(p, end):
                    first.setdefault(j % m, j)
                if len(first) == m and all(texts[j] == texts[first[j % m]] for j in range(p, end)) \
                        and all(texts[j] != texts[first[j % m]] for j in range(p)) \
                        and (not last or texts[n - 1] != texts[first[(n - 1) % m]]):
                    return p, m, last
    return None


def _periodic(texts: list, m: int, label: str, listed: bool = False, prefix: int = 0, last: bool = False) -> list[str]:
    """``repeat l as layers[j]`` with one branch per kind of layer: ``if j % m == r or ...``, the most
    frequent kind of the period last (``else``); the nodes of the other kinds named apart (``_at{r}``, r
    the first residue: each branch builds nodes of its own). ``listed``: the m layers are all the layers
    (a fixed list): ``repeat m as layers[j]`` with ``if j in [...]``."""
    kinds: list = []
    window = texts[prefix:prefix + m]
    at = {j % m: texts[j] for j in range(prefix, prefix + m)}     # residue -> its kind
    for t in window:
        if t not in kinds:
            kinds.append(t)
    # a kind that reuses a block instance (reuse = NAME) comes after the kinds as frequent: its source built first
    kinds.sort(key=lambda k: -sum(1 for t in window if t == k) - 0.5 * any("reuse = " in line for line in k))
    out = [f"repeat {m} as {label}[j] {{   # the config's list of {m} layers" if listed else
           f"repeat l as {label}[j] {{   # layer j drafted as layer j % {m}: a pattern of period {m}"]

    def branch(rest: list, depth: int) -> list[str]:
        pad = "  " * depth
        if len(rest) == 1:
            return [pad + "  " + line for line in rest[0]]
        kind = rest[-1]
        residues = [r for r in range(m) if at[r] == kind]
        cond = f"j in [{', '.join(map(str, residues))}]" if listed else " or ".join(f"j % {m} == {r}" for r in residues)
        named = [re.sub(r"name = (\w+)", rf"name = \1_at{residues[0]}", line) for line in kind]   # apart
        return [f"{pad}  if {cond} {{", *(pad + "    " + line for line in named), f"{pad}  }} else {{",
                *("  " + line for line in branch(rest[:-1], depth)), f"{pad}  }}"]

    if not prefix and not last:
        return out + branch(kinds, 0) + ["}"]
    own = " and the last" if last else ""
    out[0] = f"repeat l as {label}[j] {{   # the first {prefix} layer(s){own} of their own, then layer j as layer j % {m}"
    first: list = []     # (index list, its kind, the name suffix)
    for j in range(prefix):
        if texts[j] not in [k for _, k, _ in first]:
            first.append((", ".join(str(i) for i in range(prefix) if texts[i] == texts[j]), texts[j], f"_first{j}"))
    if last:
        first.insert(0, ("l - 1", texts[-1], "_last"))
    lines = branch(kinds, len(first))
    for depth, (listed_j, kind, suffix) in reversed(list(enumerate(first))):
        pad = "  " * depth
        named = [re.sub(r"name = (\w+)", rf"name = \1{suffix}", line) for line in kind]
        lines = [f"{pad}  if j in [{listed_j}] {{", *(pad + "    " + line for line in named), f"{pad}  }} else {{",
                 *lines, f"{pad}  }}"]
    return out + lines + ["}"]
