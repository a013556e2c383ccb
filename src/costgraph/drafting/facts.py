"""What a traced PyTorch module tree is, as plain data (torch-free): the input of the recognisers.

:func:`costgraph.drafting.trace.trace` fills it from a module built on the meta device: one
:class:`Module` per ``nn.Module``, its own parameters' shapes, the attributes the recognisers read
(heads, head size, top-k, dropout rate, activation class), and where its first call's input came
from among its siblings (the dataflow that tells pre-norm, parallel and sandwich layers apart).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Module:
    """One ``nn.Module``: ``path`` (dotted, as ``named_modules``), ``name`` (last part), ``cls``
    (class name), ``params`` (own parameter name → shape), ``tied`` (own parameter name → path of
    the module that first holds the same Parameter), ``attrs`` (ints, floats, bools and class names
    the recognisers read), ``children`` (in the order they were first called, then uncalled ones),
    ``order`` (index of its first call in the whole forward; None when never called), ``src``
    (where its first call's input came from: ``"input"`` — its parent's input; a sibling's name —
    that sibling's output; ``"?"`` — anything else, such as a residual sum); ``again`` (the indices of its later
    calls: NanoChat's final norm is the module it called before the layers); ``tokens`` (the second axis of its first
    call's input, the positions a layer runs: CPM-Ant's layers run the P prompt tokens its forward prepends too)."""

    path: str
    name: str
    cls: str
    params: dict[str, tuple[int, ...]] = field(default_factory=dict)
    tied: dict[str, str] = field(default_factory=dict)
    attrs: dict[str, object] = field(default_factory=dict)
    children: list["Module"] = field(default_factory=list)
    order: int | None = None
    src: str = "?"
    again: list[int] = field(default_factory=list)
    tokens: int | None = None

    def child(self, *names: str) -> "Module | None":
        """The first child called one of ``names``, or None."""
        for c in self.children:
            if c.name in names:
                return c
        return None

    def find(self, *paths: str) -> "Module | None":
        """The module at the first of ``paths`` (dotted child names below this one, ``"dwconv.dwconv"``) that names
        one, or None (a layer's parts under the names of several copies of a model: Swin's and Donut-Swin's)."""
        for path in paths:
            node = self
            for part in path.split("."):
                node = node.child(part) if node is not None else None
            if node is not None:
                return node
        return None

    def walk(self):
        """This module and every descendant, depth first."""
        yield self
        for c in self.children:
            yield from c.walk()

    def param_count(self) -> int:
        """Parameters of this module and its descendants (tied ones counted by their first holder only)."""
        n = 0
        for m in self.walk():
            for name, shape in m.params.items():
                if name in m.tied:
                    continue
                k = 1
                for x in shape:
                    k *= x
                n += k
        return n

    def signature(self) -> tuple:
        """Classes and parameter shapes of the subtree: equal for layers built alike."""
        return (self.cls, tuple(sorted(self.params.items())), tuple(c.signature() for c in self.children))
