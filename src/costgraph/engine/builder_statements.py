"""Statements of the builder's walk: assignments, ``return``, ``if``, ``repeat``,
``dim``, ``option``, ``param`` and ``input``.

A ``repeat`` body is walked once with its count multiplied into every node
and tensor made inside it; an ``if`` on a repeat's index builds both
branches, each counted by how many copies take it (:mod:`costgraph.language.patterns`).
"""

from __future__ import annotations

import sympy

from ..language import ast
from .builder_scope import Return, Scope, assigned_names, describe, not_constant, show
from .context import check_expansion, same
from ..errors import CostgraphSemanticError, Location
from .graph import ONE, Cost, DimInfo, Group, Tensor, Weight
from ..language.patterns import Cond as _Cond, Index as _Index, Level as _Level, count_pattern as _count_pattern
from .precision import FLOAT_ROLES, ROLES
from .symbols import STANDARD_MEANINGS, dim

#: the dtypes a buffer may keep of its own (``param NAME[shape]: buffer(fp32)``)
BUFFER_DTYPES = ("fp32", "bf16", "fp16")


class Statements:
    """The builder's statements (a mixin of :class:`costgraph.engine.builder.Builder`).
    They read and set the walk's state: ``count``/``active`` (copies of the
    statement being built), ``levels`` (the repeats around it), ``path``,
    ``branch_depth``, and the graph ``cg``."""

    def run(self, body, scope: Scope, where: str):
        for stmt in body:
            self.stmt(stmt, scope, where)

    def stmt(self, st, scope: Scope, where: str):
        if isinstance(st, ast.Assign):
            for target in st.targets:
                not_constant(target, st.loc)
            value = self.evaluate(st.value, scope)
            if len(st.targets) == 1:
                scope.vars[st.targets[0]] = value
                return
            if not isinstance(value, tuple) or len(value) != len(st.targets):
                raise CostgraphSemanticError(
                    f"{len(st.targets)} names on the left, but the right gives {describe(value)}", st.loc)
            for name, v in zip(st.targets, value):
                scope.vars[name] = v
        elif isinstance(st, ast.Return):
            if where == "repeat":
                raise CostgraphSemanticError("return cannot be inside a repeat", st.loc,
                                             hint="assign the carried tensor in the body, return after the repeat")
            if isinstance(st.value, tuple):    # `return a, b`: several outputs
                raise Return(tuple(self.evaluate(v, scope) for v in st.value), st.loc)
            raise Return(self.evaluate(st.value, scope), st.loc)
        elif isinstance(st, ast.Repeat):
            self.repeat(st, scope)
        elif isinstance(st, ast.If):
            cond = self.condition(st.cond, scope)
            if isinstance(cond, _Cond):
                self.pattern_if(st, cond, scope, where)
                return
            if not isinstance(cond, bool):
                raise CostgraphSemanticError(f"an if needs true or false, got {describe(cond)}", st.loc,
                                             hint="test an option or a true/false block argument")
            self.run(st.then if cond else st.orelse, scope, where)
        elif isinstance(st, ast.Dim):
            self.dim_stmt(st, scope, where)
        elif isinstance(st, ast.Option):
            if where != "model":
                raise CostgraphSemanticError("options belong to the model, not to a block or repeat", st.loc)
            not_constant(st.name, st.loc)
            if st.name in self.cg.options:
                raise CostgraphSemanticError(f"option '{st.name}' is defined twice", st.loc)
            default = self.evaluate(st.value, scope)
            if not isinstance(default, bool):
                raise CostgraphSemanticError(f"option '{st.name}' must be true or false, got {describe(default)}",
                                             st.loc, hint="an option is a switch; a size is a dim: dim k = 4 * h")
            value = self.settings.options.get(st.name, default)
            if not isinstance(value, bool):
                raise CostgraphSemanticError(f"option '{st.name}' must be set to true or false, got {value!r}", st.loc)
            scope.vars[st.name] = value
            self.cg.options[st.name] = value
        elif isinstance(st, ast.ParamDecl):
            self.param_stmt(st, scope)
        elif isinstance(st, ast.Input):
            if where != "model":
                raise CostgraphSemanticError("inputs belong to the model", st.loc,
                                             hint="a block takes tensors as parameters: block f(x[B, S, H])")
            not_constant(st.name, st.loc)
            role = st.role or "act"
            if role not in ROLES:
                raise CostgraphSemanticError(f"unknown tensor role '{role}'", st.loc,
                                             hint="one of: " + ", ".join(ROLES))
            shape = tuple(self.eval_dim(e, scope, f"the shape of '{st.name}'") for e in st.shape)
            self.grow(st.loc)
            path = self.claim(st.name, True, st.loc)
            t = Tensor(path, shape, role, path, self.count, path, self.active)
            self.cg.tensors[path] = t
            self.cg.add_node(path, kind="input", inputs=(), outputs=(path,), attrs={},
                                   loc=st.loc, count=self.count, active=self.active, cost=Cost(), group=None)
            if role not in FLOAT_ROLES or not self.settings.input_grads:   # Settings.input_grads: the one rule
                self.grad_free.add(path)
            scope.vars[st.name] = t

    def param_stmt(self, st: ast.ParamDecl, scope: Scope):
        """``param NAME[shape]``: a node of kind ``param`` owning the weight
        ``NAME/weight`` (counted with the repeats around it), whose output is
        the parameter as a tensor; no FLOPs of its own. ``param NAME[shape]: frozen``
        (or inside a ``frozen``/``no_grad`` call): a weight that is not trained.
        ``param NAME[shape]: buffer``: a buffer (PyTorch's ``register_buffer``), not a parameter."""
        not_constant(st.name, st.loc)
        if st.mark not in (None, "frozen", "buffer"):
            raise CostgraphSemanticError(f"unknown parameter mark '{st.mark}'", st.loc,
                                         hint=f"param {st.name}[...]: frozen  (a parameter that is not trained), "
                                              f"or: buffer  (a buffer, not a parameter)")
        if st.dtype is not None and (st.mark != "buffer" or st.dtype not in BUFFER_DTYPES):
            raise CostgraphSemanticError(f"'{st.dtype}' after '{st.mark}': a dtype follows 'buffer' only, one of "
                                         f"{', '.join(BUFFER_DTYPES)}", st.loc,
                                         hint=f"param {st.name}[...]: buffer(fp32)  (a buffer kept in fp32)")
        shape = tuple(self.eval_dim(e, scope, f"the shape of '{st.name}'") for e in st.shape)
        self.grow(st.loc)
        path = self.claim(st.name, True, st.loc)
        wid, tid = f"{path}/weight", f"{path}:0"
        self.cg.weights[wid] = Weight(wid, shape, self.count, self.active,
                                      st.mark in ("frozen", "buffer") or self.frozen or self.no_grad,
                                      buffer=st.mark == "buffer", dtype=st.dtype)
        t = Tensor(tid, shape, st.dtype or "act", tid, self.count, path, self.active)
        self.cg.tensors[tid] = t
        if self.cg.weights[wid].frozen:
            self.grad_free.add(tid)
        self.cg.add_node(path, kind="param", inputs=(), outputs=(tid,), attrs={}, loc=st.loc,
                         count=self.count, active=self.active, cost=Cost(weights=(wid,)), group=self._group())
        scope.vars[st.name] = t

    def _recount(self, loc: Location):
        """``count`` and ``active`` from the enclosing repeats: each repeat's
        count, or, inside a branch of an if on its index, how many of its
        copies take that branch."""
        count = active = ONE
        for lv in self.levels:
            if lv.conds:
                c = a = _count_pattern(lv.count, lv.conds, loc)
            else:
                c, a = lv.count, lv.active
            count = check_expansion(count * c, "the number of copies (this count times those of the "
                                    "repeats around it)", loc)
            active = check_expansion(active * a, "the number of active copies (this active count "
                                     "times those of the repeats around it)", loc)
        self.count, self.active = count, active

    def pattern_if(self, st: ast.If, cond: _Cond, scope: Scope, where: str):
        """Both branches of an if on a repeat's index, each built once with the
        number of copies that take it; a name both branches assign is one
        value after the if (tensors of one shape: a new tensor per copy)."""
        level = self.levels[cond.level]
        names = assigned_names(st.then) | assigned_names(st.orelse)
        branches, returns = [], []
        for tree, body in ((cond.tree, st.then), (("not", cond.tree), st.orelse)):
            branch = Scope(scope)
            for n in names:   # so that a repeat in the branch carries them here, not past the if
                if scope.has(n):
                    branch.vars[n] = scope.get(n)
            level.conds.append(tree)
            self._recount(st.loc)
            self.branch_depth += 1
            ret = None
            try:
                self.run(body, branch, where)
            except Return as r:   # in a block: both branches must return
                ret = r
            finally:
                self.branch_depth -= 1
                level.conds.pop()
                self._recount(st.loc)
            branches.append(branch)
            returns.append(ret)
        if (returns[0] is None) != (returns[1] is None):
            raise CostgraphSemanticError("only one branch of this if returns", st.loc,
                                         hint="return in both branches, or assign in both and return after the if")
        if returns[0] is not None:
            a, b = returns[0].value, returns[1].value
            if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
                value = tuple(self._join(f"return{k}", p, q, st) for k, (p, q) in enumerate(zip(a, b)))
            else:
                value = self._join("return", a, b, st)
            raise Return(value, returns[0].loc)
        then, orelse = branches
        for n in sorted(names):
            if n not in then.vars or n not in orelse.vars:
                continue   # made in one branch only: it stays there
            scope.vars[n] = self._join(n, then.vars[n], orelse.vars[n], st)

    def _join(self, n: str, a, b, st: ast.If):
        """The value of ``n`` after an if on an index whose branches left ``a`` and ``b``."""
        what = "the returned value" if n.startswith("return") else f"'{n}'"
        if a is b:
            return a
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            if len(a.shape) != len(b.shape) or not all(same(p, q) for p, q in zip(a.shape, b.shape)):
                raise CostgraphSemanticError(
                    f"{what} is {describe(a)} after the if and {describe(b)} after the else; "
                    "both branches must leave it the same shape", st.loc,
                    hint="every kind of layer hands the next one the same shape")
            mid = "/".join([*self.path, f"{n}@if{st.loc.line}:{st.loc.column}"])
            t = Tensor(mid, a.shape, a.role, mid, self.count, a.producer, self.active)
            self.cg.tensors[mid] = t
            return t
        if (isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr) and same(a, b)) or (
                not isinstance(a, (Tensor, sympy.Expr)) and a == b):
            return a
        raise CostgraphSemanticError(
            f"{what} is {describe(a)} after the if and {describe(b)} after the else", st.loc,
            hint="a dimension or switch cannot depend on a layer's index; give it another name in one branch")

    def dim_stmt(self, st: ast.Dim, scope: Scope, where: str):
        not_constant(st.name, st.loc)
        if st.name in scope.vars:
            raise CostgraphSemanticError(f"'{st.name}' is already defined", st.loc)
        if st.value is not None:
            value = self.eval_dim(st.value, scope, f"dimension '{st.name}'")
            scope.vars[st.name] = value
            if where == "model":
                self.cg.dims[st.name] = DimInfo(st.name, dim(st.name), st.meaning or "", None, value)
            return
        if where != "model":
            raise CostgraphSemanticError(
                f"a free dimension '{st.name}' can only be declared in the model", st.loc,
                hint="pass it to the block as a parameter, or bind it from a shape: block f(x[B, S, H])")
        default = None
        if st.default is not None:
            d = self.evaluate(st.default, scope)
            if not (isinstance(d, sympy.Integer) and d > 0):
                raise CostgraphSemanticError(f"the default of '{st.name}' must be a positive whole number", st.loc)
            default = int(d)
        meaning = st.meaning or STANDARD_MEANINGS.get(st.name, "")
        scope.vars[st.name] = dim(st.name)
        self.cg.dims[st.name] = DimInfo(st.name, dim(st.name), meaning, default)

    def repeat(self, st: ast.Repeat, scope: Scope):
        count = self.eval_dim(st.count, scope, "a repeat count")
        active = count if st.active is None else self.eval_dim(st.active, scope, "an active count")
        if sympy.expand(active - count).is_positive:   # decided when both are numbers, or provably
            raise CostgraphSemanticError(
                f"the active count {active} is more than the count {count}: each token passes through "
                f"at most all {count} copies", st.active.loc, hint=f"repeat {count} as {st.name} active K with K ≤ {count}")
        if st.index is not None:
            if st.active is not None:
                raise CostgraphSemanticError("a repeat with an index cannot have an active count", st.index_loc,
                                             hint="number the layers, not the experts: repeat l as layers[i] { ... }")
            not_constant(st.index, st.index_loc)
            if scope.has(st.index):
                raise CostgraphSemanticError(f"'{st.index}' is already defined; the index needs a name of its own",
                                             st.index_loc, hint=f"e.g. repeat {show(st.count)} as {st.name}[j]")
        path = self.claim(st.name, True, st.loc)
        assigned = assigned_names(st.body)
        carried = sorted(n for n in assigned if scope.has(n) and isinstance(scope.get(n), Tensor))
        outer_count, outer_active = self.count, self.active
        self.levels.append(_Level(count, active))
        try:
            self._recount(st.loc)
        except CostgraphSemanticError:
            self.levels.pop()
            raise
        body = Scope(scope)
        if st.index is not None:
            body.vars[st.index] = _Index(st.index, path, len(self.levels) - 1, count)
        for name in carried:
            t = scope.get(name)
            cid = f"{path}/{name}@in"
            body.vars[name] = Tensor(cid, t.shape, t.role, cid, self.count, t.producer, self.active)
            self.cg.tensors[cid] = body.vars[name]
        self.cg.groups[path] = Group(path, count, self.count, st.loc, tuple(carried), active, self.active)
        self.path.append(st.name)
        try:
            self.run(st.body, body, where="repeat")
        finally:
            self.levels.pop()
        self.path.pop()
        self.count, self.active = outer_count, outer_active
        for name in carried:
            before, after = scope.get(name), body.vars[name]
            if not isinstance(after, Tensor) or len(after.shape) != len(before.shape) or not all(
                    same(p, q) for p, q in zip(before.shape, after.shape)):
                raise CostgraphSemanticError(
                    f"the repeat body changes '{name}' from {describe(before)} to {describe(after)}; "
                    "each iteration must hand the next one the same shape", st.loc)
            oid = f"{path}/{name}@out"
            out = Tensor(oid, after.shape, after.role, oid, outer_count, after.producer, outer_active)
            self.cg.tensors[oid] = out
            if after.id in self.grad_free:   # gradient-free even from a carried input that needs one
                self.grad_free.add(oid)
            self._set_outer(scope, name, out)

    @staticmethod
    def _set_outer(scope: Scope, name: str, value):
        s = scope
        while s is not None and name not in s.vars:
            s = s.parent
        (s or scope).vars[name] = value
