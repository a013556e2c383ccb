"""Bytes autograd saves for backward during one forward of a Hugging Face model on the meta
device (:func:`saved_bytes`), with the helpers that explain a difference storage by storage
(:func:`layer_bytes`, :func:`summarize_storages`).

Split from :mod:`costgraph.torch_measure` (which builds the model, its inputs, the dropout and
meta-forward contexts used here); ``costgraph verify`` (:mod:`costgraph.verify`) and the
PyTorch agreement tier (``tests/torch_probe.py``) use it.
"""
from __future__ import annotations

import contextlib
import time
from collections import defaultdict

from .torch_measure import (_loss, _torch, flop_counter, flop_result, make_inputs, meta_forward,
                            native_dropout)


def storage_key(t) -> int:
    """Identity of the storage behind tensor ``t``, valid on meta where ``data_ptr()`` is 0.

    ``untyped_storage()._cdata`` is the address of the C++ StorageImpl: views of one
    tensor share it, distinct tensors do not. An address can be reused once a
    storage is freed, so keep the tensors alive while comparing keys (the probes do).
    """
    return t.untyped_storage()._cdata


def _storage_nbytes(t) -> int:
    return int(t.untyped_storage().nbytes())


class _ModuleStack:
    """The innermost module currently running its forward, by qualified name."""

    def __init__(self, model):
        self.stack: list[str] = []
        self.handles = []
        for name, mod in model.named_modules():
            self.handles.append(mod.register_forward_pre_hook(self._enter(name or "<root>")))
            self.handles.append(mod.register_forward_hook(self._leave(), always_call=True))

    def _enter(self, name):
        def hook(mod, args):
            self.stack.append(name)

        return hook

    def _leave(self):
        def hook(mod, args, out):
            if self.stack:
                self.stack.pop()

        return hook

    @property
    def current(self) -> str:
        return self.stack[-1] if self.stack else ""

    def remove(self):
        for h in self.handles:
            h.remove()


def _walk_graph(roots):
    """Every autograd node reachable from ``roots`` (grad_fns), each once."""
    seen, order, todo = set(), [], [r for r in roots if r is not None]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        for nxt, _ in getattr(node, "next_functions", ()):
            if nxt is not None and id(nxt) not in seen:
                todo.append(nxt)
    return order


def saved_bytes(model, b: int, s: int, *, labels: bool = False, cuda_dropout: bool = True) -> dict:
    """Bytes of the tensors autograd saves for backward during one forward of ``[b, s]`` tokens.

    Tensors are caught with ``torch.autograd.graph.saved_tensors_hooks``; each
    *storage* counts once at its full size (``untyped_storage().nbytes()``), however
    many views of it or ops keep it. Storages of parameters and buffers are not
    activations and are left out of ``bytes`` (reported under ``excluded``).
    ``cuda_dropout=True`` (the default) makes training-time dropout keep a 1-byte
    bool mask, as on a GPU, instead of the CPU/meta fallback's mask in the
    activation dtype (see :func:`native_dropout`). :func:`flops_and_saved_bytes`
    returns the same dict together with :func:`costgraph.torch_measure.flops`'s, from one
    forward and backward.

    Returns:
        bytes: total of the kept storages (activations, plus the token ids the
            model saves for its embedding backward, as costgraph counts them).
        bytes_by_kind: ``{"activation": n, "input": n}``; ``input`` is the storages
            of the tensors passed in (token ids, labels).
        storages: one dict per storage, in the order first saved: ``shape`` and
            ``dtype`` of the first tensor saved from it, ``bytes``, ``kind``,
            ``saved_by`` (names of the autograd nodes that keep it, e.g.
            ``MmBackward0``), ``produced_by`` (the grad_fn of the saved tensor, or
            None for a tensor that needs no grad), ``module`` (innermost module
            running when it was first saved) and ``saves`` (how many times it was
            packed).
        excluded: the same for parameter and buffer storages.
        by_module: ``{module: bytes}`` over ``storages``.
        seconds.
    """
    torch = _torch()

    t0 = time.perf_counter()
    inputs = make_inputs(model, b, s, labels=labels)
    with torch.enable_grad(), meta_forward():
        with _saving(torch, model, inputs, cuda_dropout) as saved:
            out = model(**inputs)
        loss = _loss(out, labels)
    result = saved.result(loss, t0)
    del out, loss
    saved.packed.clear()
    return result


def flops_and_saved_bytes(model, b: int, s: int, *, labels: bool = False, cuda_dropout: bool = True,
                          count_grouped_mm: bool = True) -> tuple[dict, dict]:
    """``(flops(model, b, s), saved_bytes(model, b, s))`` from ONE forward and backward of ``[b, s]`` tokens.

    The forward runs under both measurements at once: ``FlopCounterMode`` (a dispatch mode, below
    autograd: it counts the ops and returns their outputs unchanged) inside the
    ``saved_tensors_hooks`` and module hooks of :func:`saved_bytes`; the saved storages are
    named from the graph before the backward, which runs under its own ``FlopCounterMode`` as in
    :func:`costgraph.torch_measure.flops`. Each dict is what that function returns (keys, units,
    conventions: see there; both ``seconds`` are the whole pass's). Training-time dropout runs as
    ``native_dropout`` when ``cuda_dropout`` (a mask, no matrix product: the FLOPs are the same
    either way). Half the model runs of calling both: the PyTorch agreement tier measures every
    point this way.
    """
    torch = _torch()
    t0 = time.perf_counter()
    inputs = make_inputs(model, b, s, labels=labels)
    fwd, bwd = flop_counter(count_grouped_mm), flop_counter(count_grouped_mm)
    with torch.enable_grad(), meta_forward():
        with _saving(torch, model, inputs, cuda_dropout) as saved:
            with fwd:
                out = model(**inputs)
        loss = _loss(out, labels)
        saved_result = saved.result(loss, t0)
        with bwd:
            loss.backward()
    model.zero_grad(set_to_none=True)
    del out, loss
    saved.packed.clear()
    seconds = time.perf_counter() - t0
    return flop_result(fwd, bwd, seconds), dict(saved_result, seconds=seconds)


@contextlib.contextmanager
def _saving(torch, model, inputs: dict, cuda_dropout: bool):
    """The hooks of :func:`saved_bytes` around a forward: yields the :class:`_SavedStorages` filled by it."""
    # a storage's kind, parameter before buffer before input; any other is an activation
    kinds = {storage_key(v): "input" for v in inputs.values() if isinstance(v, torch.Tensor)}
    kinds.update({storage_key(x): "buffer" for x in model.buffers()})
    kinds.update({storage_key(p): "parameter" for p in model.parameters()})
    mods = _ModuleStack(model)
    saved = _SavedStorages(kinds, mods)
    try:
        dropout = native_dropout() if cuda_dropout else contextlib.nullcontext()
        with dropout, torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
            yield saved
    finally:
        mods.remove()


class _SavedStorages:
    """The ``saved_tensors_hooks`` of :func:`saved_bytes`: one entry per storage
    saved for backward (its first tensor's shape and dtype, size, kind, module),
    and the names of the autograd nodes that keep it."""

    def __init__(self, kinds: dict, mods: _ModuleStack):
        self.kinds = kinds          # storage key → parameter, buffer or input
        self.mods = mods
        self.packed: list = []      # strong refs: storages stay alive, so their keys stay unique
        self.entries: dict[int, dict] = {}
        self.current_node: list[str] = []

    def pack(self, t):
        key = storage_key(t)
        e = self.entries.get(key)
        if e is None:
            gf = t.grad_fn
            e = self.entries[key] = {
                "shape": tuple(t.shape),
                "dtype": str(t.dtype).replace("torch.", ""),
                "bytes": _storage_nbytes(t),
                "kind": self.kinds.get(key, "activation"),
                "saved_by": [],
                "produced_by": type(gf).__name__ if gf is not None else None,
                "module": self.mods.current,
                "saves": 0,
            }
        e["saves"] += 1
        self.packed.append((key, t))
        return len(self.packed) - 1

    def unpack(self, i):
        key, t = self.packed[i]
        if self.current_node:
            names = self.entries[key]["saved_by"]
            if self.current_node[-1] not in names:
                names.append(self.current_node[-1])
        return t

    def result(self, loss, t0: float) -> dict:
        """:func:`saved_bytes`'s dict, once the forward that ends in ``loss`` has run (before its backward)."""
        self.name_savers(loss)
        kept = [e for e in self.entries.values() if e["kind"] in ("activation", "input")]
        excluded = [e for e in self.entries.values() if e["kind"] in ("parameter", "buffer")]
        by_kind: dict[str, int] = defaultdict(int)
        by_module: dict[str, int] = defaultdict(int)
        for e in kept:
            by_kind[e["kind"]] += e["bytes"]
            by_module[e["module"]] += e["bytes"]
        return {
            "bytes": sum(e["bytes"] for e in kept),
            "bytes_by_kind": dict(by_kind),
            "storages": kept,
            "excluded": excluded,
            "by_module": dict(by_module),
            "seconds": time.perf_counter() - t0,
        }

    def name_savers(self, loss) -> None:
        """Name the nodes that keep each storage: reading a node's saved tensors runs unpack."""
        for node in _walk_graph([loss.grad_fn]):
            self.current_node.append(node.name())
            try:
                for attr in _saved_attributes(node):
                    try:
                        getattr(node, attr)
                    except Exception:  # a saved scalar or an already freed buffer
                        pass
                if hasattr(node, "saved_tensors"):  # custom autograd.Function
                    try:
                        node.saved_tensors
                    except Exception:
                        pass
            finally:
                self.current_node.pop()


#: per autograd node class, its ``_saved_*`` attributes (``dir`` of the class, read once: a graph has
#: thousands of nodes of a few dozen classes)
_SAVED_ATTRIBUTES: dict[type, tuple[str, ...]] = {}


def _saved_attributes(node) -> list[str]:
    """The ``_saved_*`` attributes of an autograd node: its class's (C++ nodes: MulBackward0's ``_saved_self``,
    ...), and any its instance holds (a custom ``autograd.Function``'s ctx)."""
    cls = type(node)
    names = _SAVED_ATTRIBUTES.get(cls)
    if names is None:
        names = _SAVED_ATTRIBUTES[cls] = tuple(a for a in dir(cls) if a.startswith("_saved_"))
    own = getattr(node, "__dict__", None)
    return [*names, *(a for a in own if a.startswith("_saved_") and a not in names)] if own else list(names)


def layer_bytes(saved: dict, layer_prefix: str) -> int:
    """Bytes of the saved storages first kept inside modules under ``layer_prefix`` (e.g. ``"transformer.h.0"``)."""
    return sum(
        e["bytes"]
        for e in saved["storages"]
        if e["module"] == layer_prefix or e["module"].startswith(layer_prefix + ".")
    )


def summarize_storages(saved: dict) -> list[tuple]:
    """``(shape, dtype, bytes, saved_by, module)`` per kept storage, for printing a breakdown."""
    return [
        (e["shape"], e["dtype"], e["bytes"], ",".join(e["saved_by"]) or e["produced_by"], e["module"])
        for e in saved["storages"]
    ]
