"""A model's dimension values (:meth:`costgraph.Model.values`) and the check that every size its graph
uses comes out a positive whole number for them (``h/a`` with h = 768, a = 7 is refused, located):
:class:`DimensionValues`, a base of :class:`costgraph.Model` (its ``graph``, ``settings``, ``name``,
``symbols``, ``_size_list`` and ``_checkers``)."""

from __future__ import annotations

from typing import Mapping

import sympy

from . import arguments
from .engine.sizes import named_difference
from .errors import CostgraphValueError, Location


class DimensionValues:
    """The dimension values of :class:`costgraph.Model` and the whole-size check (module docstring)."""

    def values(self, config: str | None = None, given: Mapping | None = None, /, **overrides) -> dict:
        """Dimension values (symbol → Integer): the dims' defaults, then ``config`` (unnamed: "hf" for a model
        from a config.json), then ``given`` (a mapping, name → value), then ``overrides`` (:func:`arguments.dims_given`).

        Raises
        ------
        CostgraphValueError
            Unknown configuration or dimension, a value that is not a positive
            whole number, or a shape that comes out fractional (``h/a`` with
            h = 768, a = 7).
        """
        config, overrides = arguments.dims_given(self.graph.dims, config, given, overrides)
        vals = self._int_values(config, overrides)
        return {self.graph.dims[k].symbol: sympy.Integer(v) for k, v in vals.items()}

    def _or_default(self, values):
        """``values`` as given, else (None) the values of the model's default configuration — the one
        ``load(..., config=NAME)`` named, or a config.json's ``"hf"`` — as the command line's ``--config``
        gives them to ``train``, ``infer``, ``plan`` and ``fit``; None without one."""
        if values is None and self.graph.default_config is not None:
            return self.values()
        return values

    def _int_values(self, config, overrides) -> dict[str, int]:
        """:meth:`values` as plain ints by name (the fast path of :meth:`Costs.evaluate`)."""
        config = self.graph.default_config if config is None else config
        vals: dict[str, int] = {d.name: d.default for d in self.graph.dims.values()
                                if d.default is not None and d.derived is None}
        if config is not None:
            if config not in self.graph.configs:
                raise CostgraphValueError(
                    f"model '{self.name}' has no configuration '{config}'",
                    hint="its configurations: " + (", ".join(self.graph.configs) or "none"))
            for k, v in self.graph.configs[config].items():
                if isinstance(v, bool) and k not in self.settings.options and self.graph.options.get(k) != v:
                    raise CostgraphValueError(
                        f"configuration '{config}' sets option {k} = {str(v).lower()}, but this model was built "
                        f"with {k} = {str(self.graph.options.get(k)).lower()}",
                        hint=f"load the model with the configuration: costgraph.load(..., config={config!r}) "
                             f"(the command line's --config does), or with options={{{k!r}: {v}}}")
            vals.update({k: v for k, v in self.graph.configs[config].items() if k in self.graph.dims})
        for k, v in overrides.items():
            info = self.graph.dims.get(k)
            if info is None:
                if k in self.graph.options:
                    raise CostgraphValueError(f"'{k}' is an option of model '{self.name}', not a dimension",
                                              hint=f"set it to true or false: {k}=false")
                raise CostgraphValueError(f"model '{self.name}' has no dimension '{k}'",
                                          hint="its dimensions: " + ", ".join(self.symbols))
            if info.derived is not None:
                raise CostgraphValueError(f"'{k}' is derived ({info.derived}); set the dimensions it depends on",
                                          hint=f"leave '{k}' out: it follows from {info.derived}")
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise CostgraphValueError(f"'{k}' must be a positive whole number, got {v!r}",
                                          hint=f"{k}=N with N a whole number above 0 (--set {k}=N on the command line)")
            vals[k] = v
        self._check_whole(vals)
        return vals

    def _sizes(self) -> list[tuple[sympy.Expr, str, Location | None, str]]:
        """Every size the graph uses, each distinct expression once (first use): ``(expr, what, location, path)``.
        Tensor dimensions, operators' dimension arguments, repeat/active counts, ``graph.limits`` (r ≤ h/a)."""
        if self._size_list is None:
            seen, out = set(), []
            def add(d, what, loc, path):
                if isinstance(d, sympy.Expr) and not d.is_Integer and d not in seen:
                    seen.add(d)
                    out.append((d, what, loc, path))
            for g in self.graph.groups.values():
                add(g.count, f"the repeat count of '{g.path}'", g.loc, g.path)
                add(g.active, f"the active count of '{g.path}'", g.loc, g.path)
            for path, d in self.graph.ops():
                for name, v in d["attrs"].items():
                    add(v, f"argument '{name}' of {d['kind']} '{path}'", d["loc"], path)
            for t in self.graph.tensors.values():
                producer = self.graph.nodes.get(t.producer)
                loc = producer["loc"] if producer else None
                for d in t.shape:
                    add(d, f"a dimension of tensor '{t.id}'", loc, t.producer)
            for limit in self.graph.limits:
                add(*limit)
            self._size_list = out
        return self._size_list

    def _size_checker(self, given: frozenset[str]):
        """A compiled check of the sizes whose symbols all have values in ``given``."""
        checker = self._checkers.get(given)
        if checker is None:
            names = sorted(given)
            syms = {self.graph.dims[n].symbol for n in names}
            sizes = [e for e, *_ in self._sizes() if e.free_symbols <= syms]
            pairs = [(g.count, g.active) for g in self.graph.groups.values()
                     if (g.count.free_symbols | g.active.free_symbols) <= syms]
            exprs = sizes + [n - k for n, k in pairs]
            from .numbers.evaluator import ExactEvaluator   # where a size is checked (a cold derive checks none)

            ev = ExactEvaluator(exprs, [self.graph.dims[n].symbol for n in names]) if exprs else None
            checker = self._checkers[given] = (names, ev, len(sizes))
        return checker

    def _check_whole(self, vals: dict[str, int]) -> None:
        """Every size the graph uses must come out a positive whole number for
        these values, and a group's active copies cannot outnumber its copies
        (top-k ≤ experts). Compiled once per set of given names; the located
        message comes from :meth:`_explain_sizes`."""
        names, ev, n_sizes = self._size_checker(frozenset(vals))
        if ev is None:
            return
        from .numbers.evaluator import NotWhole

        try:
            out = ev([vals[n] for n in names])
            ok = all(v > 0 for v in out[:n_sizes]) and all(v >= 0 for v in out[n_sizes:])
        except (NotWhole, ZeroDivisionError):
            ok = False
        if not ok:
            self._explain_sizes({self.graph.dims[k].symbol: sympy.Integer(v) for k, v in vals.items()})

    def _explain_sizes(self, subs) -> None:
        """The slow path of :meth:`_check_whole`: the first size not a positive whole number, located."""
        def check(d, what, loc, path):
            if not isinstance(d, sympy.Expr) or not d.free_symbols <= set(subs):
                return None
            v = d.xreplace(subs)
            if not (v.is_integer and v > 0):
                calls = [f"{b.loc} ({b.path})" for b in (self.graph.blocks.get(a) for a in _prefixes(path)) if b]
                named = named_difference(self.graph.dims, d, subs) if v.is_number and v <= 0 else ("", "")
                raise CostgraphValueError(f"{what} is {named[0] or d} = {v} for these values, not a positive whole "
                                          f"number", loc, hint="; ".join(filter(None, [named[1], f"at {path}"]))
                                          + (f", called from {'; '.join(calls)}" if calls else "")
                                          + "; choose values that divide evenly and keep counts positive")
            return v
        for g in self.graph.groups.values():
            n = check(g.count, f"the repeat count of '{g.path}'", g.loc, g.path)
            k = check(g.active, f"the active count of '{g.path}'", g.loc, g.path)
            if n is not None and k is not None and k > n:
                raise CostgraphValueError(
                    f"'{g.path}' has {n} copies but {k} active ({g.active} > {g.count})", g.loc,
                    hint="a token can pass through at most all of them")
        for d, what, loc, path in self._sizes():
            check(d, what, loc, path)


def _prefixes(path: str) -> list[str]:
    """``a/b/c`` → ``["a", "a/b"]``: the enclosing paths, outermost first."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]
