"""Calls in the builder's walk: a name is a block (:mod:`costgraph.engine.builder_blocks`),
a dimension function, or an operator of :data:`costgraph.ops.REGISTRY`.

An operator call's arguments are matched to the operator's parameters and
evaluated as each parameter's kind asks; its rule declares the node's costs
through an :class:`~costgraph.engine.context.OpContext`, and the call becomes one
graph node.

Two keywords any call takes (an operator's or a block's) say how training treats what the
call builds: ``frozen = true`` — its weights are not trained (PyTorch's
``requires_grad = False``: no weight gradients, no gradient or optimizer state), gradients
still flow through it to its inputs; ``no_grad = true`` — it runs as under
``torch.no_grad()``: no backward FLOPs at all, nothing kept for backward, its weights frozen.

A third says whose weights it builds inside a block called with ``reuse = NAME``: ``own = true`` —
this call's own (counted with it), not ``NAME``'s (Zamba2's per-call LoRA adapters inside its shared
transformer block: transformers 5.24 modeling_zamba2.py ``linear_q_adapter_list[layer]``). Elsewhere
it changes nothing.
"""

from __future__ import annotations

import sympy

from ..language import ast
from .builder_expressions import DIM_FUNCS
from .builder_scope import CONSTANTS, Evaluated, Scope, check_size, describe, did_you_mean
from .context import OpContext
from ..errors import CostgraphSemanticError, Location
from .grad_only import weight_grad_only
from .graph import Cost, Tensor
from ..ops import REGISTRY
from ..ops.registry import REQUIRED


#: call keywords of every operator and block: how training treats what the call builds
GRAD_KEYWORDS = ("frozen", "no_grad")
#: every call keyword set while the call is built (the builder's attribute of that name): those and ``own``
CALL_FLAGS = (*GRAD_KEYWORDS, "own")


class Calls:
    """The builder's operator calls (a mixin of :class:`costgraph.engine.builder.Builder`)."""

    def call(self, e: ast.Call, scope: Scope):
        """A call of a block, a dimension function or an operator; ``frozen =`` and
        ``no_grad =`` (see the module docstring) hold while it is built."""
        reuse = [(v, loc) for kw, v, loc in e.kwargs if kw == "reuse"]
        if reuse and not self._declares(e.name, "reuse"):
            return self._shared_call(e, scope, *reuse[0])
        grad = {kw: (v, loc) for kw, v, loc in e.kwargs
                if kw in CALL_FLAGS and (kw != "own" or not self._declares(e.name, kw))}
        if not grad:
            return self._call(e, scope)
        e = ast.Call(e.name, e.args, tuple(k for k in e.kwargs if k[0] not in grad), e.loc)
        saved = self.frozen, self.no_grad, self.own
        for kw, (v, loc) in grad.items():
            on = self._eval_kind(v, "bool", scope, f"{kw}=", loc)
            setattr(self, kw, getattr(self, kw) or on)
        try:
            return self._call(e, scope)
        finally:
            self.frozen, self.no_grad, self.own = saved

    def _shared_call(self, e: ast.Call, scope: Scope, v, loc: Location):
        """``block(..., reuse = NAME)``: the same module called again (Zamba2's shared transformer
        block): its operators are built anew (FLOPs and activations per call), every weight read from
        the block instance ``NAME`` built earlier (counted once, there)."""
        table = self.program.blocks if not self.block_stack else self._block_table()
        if e.name not in table:
            raise CostgraphSemanticError("reuse = NAME is taken by a block call", loc,
                                         hint="an operator's weight is shared with tied = NAME")
        if not isinstance(v, ast.Var):
            raise CostgraphSemanticError("reuse = takes the name of a block instance built earlier", loc)
        source = next((p for depth in range(len(self.path), -1, -1)
                       if (p := "/".join([*self.path[:depth], v.name])) in self.cg.blocks), None)
        if source is None:
            raise CostgraphSemanticError(f"no block instance named '{v.name}' built before this call", loc,
                                         hint="call the block once with name = NAME, then reuse = NAME")
        e = ast.Call(e.name, e.args, tuple(k for k in e.kwargs if k[0] != "reuse"), e.loc)
        self.share_next = (source, loc)
        try:
            return self.call(e, scope)
        finally:
            self.share_next = None

    def _declares(self, name: str, param: str) -> bool:
        """Whether block ``name`` has a parameter ``param`` of its own (then ``param =`` is its argument)."""
        table = self.program.blocks if not self.block_stack else self._block_table()
        return name in table and any(p.name == param for p in table[name].node.params)

    def _call(self, e: ast.Call, scope: Scope):
        table = self.program.blocks if not self.block_stack else self._block_table()
        if e.name in table:
            return self.call_block(table[e.name], e, scope)
        if e.name in DIM_FUNCS and not e.kwargs:
            values = [self.evaluate(a, scope) for a in e.args]
            if all(isinstance(v, sympy.Expr) for v in values):
                return self.dim_function(e, values)
            if e.name not in REGISTRY:
                bad = next(v for v in values if not isinstance(v, sympy.Expr))
                raise CostgraphSemanticError(f"{e.name}() takes dimension expressions, got {describe(bad)}",
                                             e.loc, hint=DIM_FUNCS[e.name][2])
            # an operator of that name (on tensors): its arguments are evaluated once
            e = ast.Call(e.name, tuple(a if isinstance(a, ast.Var) else Evaluated(v, a.loc)
                                       for a, v in zip(e.args, values)), e.kwargs, e.loc)
        if e.name in REGISTRY:
            spec = REGISTRY[e.name]
            args, name, given = self._bind(e, scope, [(p.name, p.kind, p.default) for p in spec.params], e.name)
            return self.apply_op(e.name, args, name, e.loc, given)
        raise CostgraphSemanticError(
            f"unknown operator or block '{e.name}'", e.loc,
            hint=did_you_mean(e.name, set(REGISTRY) | set(table), "operators: " + ", ".join(sorted(REGISTRY))))

    def _match_args(self, e: ast.Call, names: list[str], what: str):
        """Pair a call's positional and keyword arguments with parameter
        ``names``: ({name: (expr, loc)}, the node name given as ``name=``)."""
        if len(e.args) > len(names):
            raise CostgraphSemanticError(
                f"{what} takes {len(names)} argument(s) ({', '.join(names)}), {len(e.args)} given",
                e.args[len(names)].loc, hint=f"{what.removeprefix('block ')}({', '.join(names)})")
        given = {name: (arg, arg.loc) for name, arg in zip(names, e.args)}
        node_name = None
        for kw, value, loc in e.kwargs:
            if kw == "name":
                if not isinstance(value, ast.Var):
                    raise CostgraphSemanticError("name= takes a bare name, e.g. name=attn", loc)
                node_name = value.name
                continue
            if kw not in names:
                raise CostgraphSemanticError(
                    f"{what} has no argument '{kw}'", loc,
                    hint=did_you_mean(kw, set(names), "its arguments: " + ", ".join(names)))
            if kw in given:
                raise CostgraphSemanticError(f"argument '{kw}' of {what.removeprefix('block ')} is given twice", loc)
            given[kw] = (value, loc)
        return given, node_name

    def _bind(self, e: ast.Call, scope: Scope, params, what: str):
        """Match a call's arguments to an operator's ``params`` [(name, kind, default)]
        and evaluate each as its kind asks: (arguments, node name, names written)."""
        names = [p[0] for p in params]
        given, node_name = self._match_args(e, names, what)
        args = {}
        for pname, kind, default in params:
            if pname not in given:
                if default is REQUIRED:
                    raise CostgraphSemanticError(f"{what} needs the argument '{pname}'", e.loc,
                                                 hint=f"{what}({', '.join(names)})")
                args[pname] = default
                continue
            expr, loc = given[pname]
            args[pname] = self._eval_kind(expr, kind, scope, f"argument '{pname}' of {what}", loc,
                                          optional=default is None)
        return args, node_name, frozenset(given)

    def _eval_kind(self, expr, kind: str, scope: Scope, what: str, loc: Location, optional: bool = False):
        if kind == "ident":
            if isinstance(expr, ast.Var) and expr.name in CONSTANTS and CONSTANTS[expr.name] is None:
                return None
            if not isinstance(expr, ast.Var):
                raise CostgraphSemanticError(f"{what} takes a bare name", loc)
            return expr.name
        v = self.evaluate(expr, scope)
        ok = {"tensor": isinstance(v, Tensor),
              "bool": isinstance(v, bool),
              "dim": isinstance(v, sympy.Expr) or (v is None and optional),
              "any": True}[kind]
        if not ok:
            want = {"tensor": "a tensor", "bool": "true or false", "dim": "a dimension expression"}[kind]
            raise CostgraphSemanticError(f"{what} must be {want}, got {describe(v)}", loc)
        if kind == "dim":
            check_size(v, what, loc)
        return v

    def apply_op(self, kind: str, args: dict, name: str | None, loc: Location, given: frozenset | None = None):
        """Run operator ``kind``'s rule on ``args`` (``given``: the argument names the call wrote,
        None: all of them) and add its node."""
        self.grow(loc)
        path = self.claim(name or kind, name is not None, loc)
        ctx = OpContext(self, kind, path, args, loc, given)
        try:
            result = REGISTRY[kind].rule(ctx)
        except (ValueError, TypeError, IndexError, KeyError, ArithmeticError) as err:
            shown = ", ".join(f"{k}={describe(v)}" for k, v in args.items() if v is not None)
            raise CostgraphSemanticError(f"{kind} cannot be applied to {shown}", loc,
                                         hint=f"see `costgraph ops` for what {kind} takes") from err
        inputs = [v for v in args.values() if isinstance(v, Tensor)]
        if ctx.is_identity:   # a view: gradient-free when what it views is
            if isinstance(result, Tensor) and inputs and all(t.id in self.grad_free for t in inputs):
                self.grad_free.add(result.id)
            return result
        cost = Cost(ctx.cost["forward"], ctx.cost["backward_input"], ctx.cost["backward_weight"],
                    tuple(ctx.weights), tuple(ctx.tied), tuple(ctx.saved))
        cost = self._grad_cost(kind, path, cost, tuple(t.id for t in inputs), ctx.outputs)
        attrs = {k: v for k, v in args.items() if not isinstance(v, Tensor)}
        self.cg.add_node(path, kind=kind, inputs=tuple(t.id for t in inputs),
                               outputs=tuple(t.id for t in ctx.outputs), attrs=attrs, loc=loc,
                               count=self.count, active=self.active, cost=cost, group=self._group())
        for t in ctx.outputs:
            self.cg.tensors[t.id] = t
        for t in inputs:
            self.cg.add_edge(t.producer, path, t.id, shape=t.shape, role=t.role)
        return result

    def _grad_cost(self, kind: str, path: str, cost: Cost, inputs: tuple[str, ...], outputs) -> Cost:
        """``cost`` as autograd runs the node: under ``no_grad``, or with no trainable weight and
        every tensor input gradient-free (``grad_free``), no backward and nothing kept, its outputs
        gradient-free; with gradient-free inputs, no input gradients; with no trainable weight
        (``frozen``), no weight gradients and nothing kept only for them
        (:func:`~costgraph.engine.grad_only.weight_grad_only`). Model inputs need gradients
        (the convention every figure uses), so only what the marks make gradient-free changes."""
        free_in = bool(inputs) and all(t in self.grad_free for t in inputs)
        trained = any(not self.cg.weights[w].frozen for w in (*cost.weights, *cost.tied))
        if self.no_grad or (free_in and not trained):
            self.grad_free.update(t.id for t in outputs)
            return Cost(cost.forward, weights=cost.weights, tied=cost.tied)
        if not trained and (cost.weights or cost.tied):   # frozen weights: no weight gradients
            drop = weight_grad_only(kind, path, inputs)
            cost = Cost(cost.forward, cost.backward_input, weights=cost.weights, tied=cost.tied,
                        saved=tuple(t for t in cost.saved if t not in drop))
        if free_in:    # trainable weights on gradient-free inputs: weight gradients only
            cost = Cost(cost.forward, backward_weight=cost.backward_weight, weights=cost.weights,
                        tied=cost.tied, saved=cost.saved)
        return cost

    def _group(self) -> str | None:
        for depth in range(len(self.path), 0, -1):
            p = "/".join(self.path[:depth])
            if p in self.cg.groups:
                return p
        return None
