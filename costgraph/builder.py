"""A :class:`~costgraph.loader.Program` → a :class:`~costgraph.graph.CostGraph`.

Walks the model's statements once. Names are resolved here: a call names a
block (user or library) or an operator of :data:`costgraph.ops.REGISTRY`.
Each operator call becomes one node whose cost record comes from its rule;
a ``repeat`` body is walked once with its count multiplied into every node
and tensor made inside it. SymPy objects are made from the syntax tree only
(never from text). Every mistake raises a located
:class:`~costgraph.errors.CostgraphSemanticError`.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Mapping

import sympy

from . import ast
from .errors import CostgraphSemanticError, Location
from .context import OpContext, check_expansion, same
from .graph import ONE, BlockInstance, Cost, CostGraph, DimInfo, Group, Tensor
from .loader import BlockDef, Program
from .parser import MAX_DIGITS
from .ops import REGISTRY
from .ops.registry import REQUIRED
from .precision import ROLES
from .symbols import STANDARD_MEANINGS, dim

CONSTANTS = {"true": True, "false": False, "none": None}


@dataclass(frozen=True)
class Settings:
    """Build-time settings: what changes the graph itself.

    ``dropout`` — training with dropout (default) or without: without, every
    ``dropout`` call is the identity and its mask is not kept.
    ``options`` — values for the model's ``option`` switches (``bias=False``).
    ``profile`` — what operators keep for backward (see :data:`PROFILES`).
    """

    dropout: bool = True
    options: Mapping[str, object] = field(default_factory=dict)
    profile: str = "korthikanti"


PROFILES = {
    "korthikanti": "the tensors of Korthikanti et al. 2022 §4.1: norm inputs, matmul operands, "
                   "softmax and activation outputs/inputs, 1-byte dropout masks, all in the compute dtype",
    "pytorch": "what PyTorch autograd keeps in Hugging Face's eager bf16 implementations "
               "(transformers 5.24, torch 2.13): LayerNorm mean/rstd and RMSNorm's fp32 copies, "
               "fp32 softmax where the model upcasts, the rotary cos/sin tables",
}


def _describe(v) -> str:
    if isinstance(v, Tensor):
        return f"a tensor {v.shape_str()}"
    if isinstance(v, bool):
        return f"the value {str(v).lower()}"
    if v is None:
        return "none"
    if isinstance(v, tuple):
        return f"{len(v)} tensors"
    if isinstance(v, str):
        return f'the string "{v}"'
    return f"the dimension {v}"


class _Return(Exception):
    def __init__(self, value, loc: Location | None = None):
        self.value = value
        self.loc = loc


# Deepest chain of block calls (a calls b calls c ...); the walk recurses.
MAX_BLOCK_DEPTH = 50

# Most operator nodes, inputs and block instances one model may build: 10,000.
# Every block call is built anew (inlined), so blocks that each call the one
# below twice double at every level; this stops such a file after about half a
# second instead of building 2^n nodes. The largest bundled model
# (deepseek_v3) builds 88 nodes and 7 block instances: layers are a repeat,
# built once whatever their count.
MAX_GRAPH_SIZE = 10_000



def _check_size(v, what: str, loc: Location | None):
    """A dimension expression that is a number must be a positive whole number."""
    if isinstance(v, sympy.Expr):
        if v.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
            raise CostgraphSemanticError(f"{what} divides by zero", loc)
        if (v.is_number and not (v.is_integer and v.is_positive)) or v.is_positive is False:
            raise CostgraphSemanticError(f"{what} must be a positive whole number, got {v}", loc,
                                         hint="a dimension counts something: 1, 2, 3, ... or an expression such as 4 * h")
    return v


def _not_constant(name: str, loc: Location):
    if name in CONSTANTS:
        raise CostgraphSemanticError(f"'{name}' is a constant (true, false, none) and cannot be redefined", loc,
                                     hint="choose another name")


def _check_magnitude(v, loc: Location | None):
    for n in v.atoms(sympy.Rational):
        if len(str(max(abs(n.p), n.q))) > MAX_DIGITS:
            raise CostgraphSemanticError(f"number too large: a dimension expression holds a number of more "
                                         f"than {MAX_DIGITS} digits", loc)
    return v


class Scope:
    """Variables visible at one place; a repeat body reads through to its parent."""

    def __init__(self, parent: "Scope | None" = None):
        self.vars: dict = {}
        self.parent = parent

    def get(self, name: str):
        s = self
        while s is not None:
            if name in s.vars:
                return s.vars[name]
            s = s.parent
        raise KeyError(name)

    def has(self, name: str) -> bool:
        try:
            self.get(name)
            return True
        except KeyError:
            return False

    def names(self) -> set[str]:
        out = set(self.vars)
        if self.parent:
            out |= self.parent.names()
        return out


class Builder:
    """Walks a program once and fills a :class:`CostGraph`."""

    def __init__(self, program: Program, settings: Settings):
        self.program = program
        self.settings = settings
        self.cg = CostGraph(program.model.name, program.model.loc.file)
        self.count = ONE
        self.active = ONE
        self.shared: dict[str, Tensor] = {}
        self.path: list[str] = []
        self.used: dict[tuple, set] = {}
        self._next_suffix: dict[tuple, int] = {}
        self.block_stack: list[str] = []
        self.size = 0   # operator nodes, inputs and block instances built so far

    def grow(self, loc: Location):
        """Count one more node or block instance; refuse past :data:`MAX_GRAPH_SIZE`."""
        self.size += 1
        if self.size > MAX_GRAPH_SIZE:
            raise CostgraphSemanticError(
                f"the model is too large: building it makes more than {MAX_GRAPH_SIZE:,} operator nodes "
                "and block instances (this call crosses the limit)", loc,
                hint="every block call is built anew, so blocks that call the block below twice double at "
                     "each level; write layers as `repeat COUNT as NAME { ... }`, built once and counted COUNT times")

    # --- naming ------------------------------------------------------------
    def claim(self, name: str, explicit: bool, loc: Location) -> str:
        used = self.used.setdefault(tuple(self.path), set())
        if name in used:
            if explicit:
                where = "/".join(self.path) or "the model"
                raise CostgraphSemanticError(f"the name '{name}' is used twice in {where}", loc,
                                             hint="give each call its own name=")
            # names are never released, so the search resumes where it last
            # stopped (linear, not quadratic, in the number of calls)
            key = (tuple(self.path), name)
            i = self._next_suffix.get(key, 1)
            while f"{name}_{i}" in used:
                i += 1
            self._next_suffix[key] = i
            name = f"{name}_{i}"
        used.add(name)
        return "/".join([*self.path, name])

    def find_weight(self, name: str, loc: Location) -> str:
        for depth in range(len(self.path), -1, -1):
            wid = "/".join([*self.path[:depth], name, "weight"])
            if wid in self.cg.weights:
                return wid
        for depth in range(len(self.path), -1, -1):
            node = self.cg.nodes.get("/".join([*self.path[:depth], name]))
            if node is None:
                continue
            tied = [w for w in node["cost"].tied if w.endswith("/weight")]
            if tied:   # tying to a tie: name the weight's owner
                owner = tied[0].rsplit("/", 1)[0]
                raise CostgraphSemanticError(
                    f"'{name}' has no weight of its own: it is tied to the weight of '{owner}'", loc,
                    hint=f"tie to the owner: tied = {self._name_of(owner)}")
            article = "an" if node["kind"][:1] in "aeiou" else "a"
            raise CostgraphSemanticError(f"'{name}' ({article} {node['kind']}) has no weight to tie to", loc,
                                         hint="tie to a node built earlier that has a weight, e.g. tied=wte")
        owners = sorted({w.rsplit("/", 1)[0] for w in self.cg.weights})
        close = difflib.get_close_matches(name, owners, n=1)
        raise CostgraphSemanticError(
            f"nothing named '{name}' with a weight to tie to", loc,
            hint=f"did you mean '{close[0]}'?" if close else "tie to a node built earlier, e.g. tied=wte")

    def _name_of(self, path: str) -> str:
        """How ``tied=`` names the node at ``path`` from here: its last part when
        that finds it, else its whole path."""
        last = path.rsplit("/", 1)[-1]
        for depth in range(len(self.path), -1, -1):
            if "/".join([*self.path[:depth], last, "weight"]) in self.cg.weights:
                return last if "/".join([*self.path[:depth], last]) == path else path
        return path

    # --- model -------------------------------------------------------------
    def build(self) -> CostGraph:
        model = self.program.model
        scope = Scope()
        for opt, value in self.settings.options.items():
            if not any(isinstance(s, ast.Option) and s.name == opt for s in model.body):
                options = [s.name for s in model.body if isinstance(s, ast.Option)]
                raise CostgraphSemanticError(
                    f"model '{model.name}' has no option '{opt}'", model.loc,
                    hint=("its options: " + ", ".join(options)) if options else "it has no options")
        try:
            self.run(model.body, scope, where="model")
        except _Return as r:
            outs = r.value if isinstance(r.value, tuple) else (r.value,)
            for o in outs:
                if not isinstance(o, Tensor):
                    raise CostgraphSemanticError(f"a model returns tensors, not {_describe(o)}", r.loc or model.loc,
                                                 hint="return the model's output tensor, e.g. return logits")
            self.cg.outputs = tuple(o.id for o in outs)
            self._configs()
            return self.cg
        raise CostgraphSemanticError(f"model '{model.name}' returns nothing", model.loc,
                                     hint="end the model with `return logits` (its output tensor)")

    def _configs(self):
        # a configuration may set a dimension that only some option values
        # declare (Mistral's window w, absent with sliding_window = false)
        declared = _declared_dims(self.program.model.body)
        for cfg in self.program.file.configs:
            values = {}
            for name, expr, loc in cfg.settings:
                if name in values:
                    raise CostgraphSemanticError(f"configuration '{cfg.name}' sets '{name}' twice", loc)
                if name in declared and name not in self.cg.dims:
                    values[name] = None    # not a dimension under these options: ignored
                    continue
                if name not in self.cg.dims and name not in self.cg.options:
                    raise CostgraphSemanticError(
                        f"configuration '{cfg.name}' sets '{name}', which is not a dimension of '{self.cg.name}'",
                        loc, hint=self._did_you_mean(name, set(self.cg.dims) | set(self.cg.options)))
                if name in self.cg.dims and self.cg.dims[name].derived is not None:
                    raise CostgraphSemanticError(f"'{name}' is derived; a configuration cannot set it", loc)
                v = self.evaluate(expr, Scope())
                if not (isinstance(v, sympy.Integer) and v > 0) and not isinstance(v, bool):
                    raise CostgraphSemanticError(f"'{name}' must be a positive whole number, got {_describe(v)}", loc)
                values[name] = v if isinstance(v, bool) else int(v)
            if cfg.name in self.cg.configs:
                raise CostgraphSemanticError(f"configuration '{cfg.name}' is defined twice", cfg.loc)
            self.cg.configs[cfg.name] = {k: v for k, v in values.items() if v is not None}

    # --- statements --------------------------------------------------------
    def run(self, body, scope: Scope, where: str):
        for stmt in body:
            self.stmt(stmt, scope, where)

    def stmt(self, st, scope: Scope, where: str):
        if isinstance(st, ast.Assign):
            for target in st.targets:
                _not_constant(target, st.loc)
            value = self.evaluate(st.value, scope)
            if len(st.targets) == 1:
                scope.vars[st.targets[0]] = value
                return
            if not isinstance(value, tuple) or len(value) != len(st.targets):
                raise CostgraphSemanticError(
                    f"{len(st.targets)} names on the left, but the right gives {_describe(value)}", st.loc)
            for name, v in zip(st.targets, value):
                scope.vars[name] = v
        elif isinstance(st, ast.Return):
            if where == "repeat":
                raise CostgraphSemanticError("return cannot be inside a repeat", st.loc,
                                             hint="assign the carried tensor in the body, return after the repeat")
            raise _Return(self.evaluate(st.value, scope), st.loc)
        elif isinstance(st, ast.Repeat):
            self.repeat(st, scope)
        elif isinstance(st, ast.If):
            cond = self.evaluate(st.cond, scope)
            if not isinstance(cond, bool):
                raise CostgraphSemanticError(f"an if needs true or false, got {_describe(cond)}", st.loc,
                                             hint="test an option or a true/false block argument")
            self.run(st.then if cond else st.orelse, scope, where)
        elif isinstance(st, ast.Dim):
            self.dim_stmt(st, scope, where)
        elif isinstance(st, ast.Option):
            if where != "model":
                raise CostgraphSemanticError("options belong to the model, not to a block or repeat", st.loc)
            _not_constant(st.name, st.loc)
            if st.name in self.cg.options:
                raise CostgraphSemanticError(f"option '{st.name}' is defined twice", st.loc)
            default = self.evaluate(st.value, scope)
            if not isinstance(default, bool):
                raise CostgraphSemanticError(f"option '{st.name}' must be true or false, got {_describe(default)}",
                                             st.loc, hint="an option is a switch; a size is a dim: dim k = 4 * h")
            value = self.settings.options.get(st.name, default)
            if not isinstance(value, bool):
                raise CostgraphSemanticError(f"option '{st.name}' must be set to true or false, got {value!r}", st.loc)
            scope.vars[st.name] = value
            self.cg.options[st.name] = value
        elif isinstance(st, ast.Input):
            if where != "model":
                raise CostgraphSemanticError("inputs belong to the model", st.loc,
                                             hint="a block takes tensors as parameters: block f(x[B, S, H])")
            _not_constant(st.name, st.loc)
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
            scope.vars[st.name] = t

    def dim_stmt(self, st: ast.Dim, scope: Scope, where: str):
        _not_constant(st.name, st.loc)
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
        path = self.claim(st.name, True, st.loc)
        assigned = _assigned_names(st.body)
        carried = sorted(n for n in assigned if scope.has(n) and isinstance(scope.get(n), Tensor))
        outer_count, outer_active = self.count, self.active
        self.count = check_expansion(outer_count * count, "the number of copies (this count times those of the "
                                     "repeats around it)", st.loc)
        self.active = check_expansion(outer_active * active, "the number of active copies (this active count "
                                      "times those of the repeats around it)", st.loc)
        body = Scope(scope)
        for name in carried:
            t = scope.get(name)
            cid = f"{path}/{name}@in"
            body.vars[name] = Tensor(cid, t.shape, t.role, cid, self.count, t.producer, self.active)
            self.cg.tensors[cid] = body.vars[name]
        self.cg.groups[path] = Group(path, count, self.count, st.loc, tuple(carried), active, self.active)
        self.path.append(st.name)
        self.run(st.body, body, where="repeat")
        self.path.pop()
        self.count, self.active = outer_count, outer_active
        for name in carried:
            before, after = scope.get(name), body.vars[name]
            if not isinstance(after, Tensor) or len(after.shape) != len(before.shape) or not all(
                    same(p, q) for p, q in zip(before.shape, after.shape)):
                raise CostgraphSemanticError(
                    f"the repeat body changes '{name}' from {_describe(before)} to {_describe(after)}; "
                    "each iteration must hand the next one the same shape", st.loc)
            oid = f"{path}/{name}@out"
            out = Tensor(oid, after.shape, after.role, oid, outer_count, after.producer, outer_active)
            self.cg.tensors[oid] = out
            self._set_outer(scope, name, out)

    @staticmethod
    def _set_outer(scope: Scope, name: str, value):
        s = scope
        while s is not None and name not in s.vars:
            s = s.parent
        (s or scope).vars[name] = value

    # --- expressions -------------------------------------------------------
    def evaluate(self, e, scope: Scope):
        if isinstance(e, ast.Int):
            return sympy.Integer(e.value)
        if isinstance(e, ast.String):
            return e.value
        if isinstance(e, ast.Var):
            if scope.has(e.name):
                return scope.get(e.name)
            if e.name in CONSTANTS:
                return CONSTANTS[e.name]
            raise CostgraphSemanticError(
                f"'{e.name}' is not defined", e.loc,
                hint=self._did_you_mean(e.name, scope.names(),
                                        f"declare a dimension with `dim {e.name}` in the model, or assign "
                                        f"'{e.name}' before this line (names made inside a repeat or block "
                                        "stay there)"))
        if isinstance(e, ast.BinOp):
            return self.binop(e, scope)
        if isinstance(e, ast.Call):
            return self.call(e, scope)
        raise AssertionError(e)

    def eval_dim(self, e, scope: Scope, what: str):
        v = self.evaluate(e, scope)
        if isinstance(v, (bool, Tensor, tuple, str)) or v is None:
            raise CostgraphSemanticError(f"{what} must be a dimension expression, got {_describe(v)}",
                                         getattr(e, "loc", None))
        return _check_size(v, what, getattr(e, "loc", None))

    def binop(self, e: ast.BinOp, scope: Scope):
        # a chain `a + b - c + ...` is walked in a loop, left to right: it may be
        # long (the parser counts it as one level of nesting)
        chain = []
        while isinstance(e, ast.BinOp):
            chain.append(e)
            e = e.left
        value = self.evaluate(e, scope)
        for link in reversed(chain):
            value = self._binop(link, value, self.evaluate(link.right, scope))
        return value

    def _binop(self, e: ast.BinOp, left, right):
        if isinstance(left, Tensor) and isinstance(right, Tensor):
            kind = {"+": "add", "-": "sub", "*": "mul"}.get(e.op)
            if kind is None:
                raise CostgraphSemanticError("tensors cannot be divided with '/'", e.loc)
            return self.apply_op(kind, {"x": left, "y": right}, None, e.loc)
        if isinstance(left, sympy.Expr) and isinstance(right, sympy.Expr):
            if e.op == "/" and right.is_zero:
                raise CostgraphSemanticError("division by zero", e.right.loc)
            result = {"+": left + right, "-": left - right, "*": left * right, "/": left / right}[e.op]
            check_expansion(result, "this dimension expression", e.loc)
            return _check_magnitude(result, e.loc)
        hint = "multiply a tensor by a constant with scale(x)" if Tensor in (type(left), type(right)) else None
        raise CostgraphSemanticError(
            f"cannot apply '{e.op}' to {_describe(left)} and {_describe(right)}", e.loc, hint=hint)

    def call(self, e: ast.Call, scope: Scope):
        table = self.program.blocks if not self.block_stack else self._block_table()
        if e.name in table:
            return self.call_block(table[e.name], e, scope)
        if e.name in REGISTRY:
            spec = REGISTRY[e.name]
            args, name = self._bind(e, scope, [(p.name, p.kind, p.default) for p in spec.params], e.name)
            return self.apply_op(e.name, args, name, e.loc)
        raise CostgraphSemanticError(
            f"unknown operator or block '{e.name}'", e.loc,
            hint=self._did_you_mean(e.name, set(REGISTRY) | set(table), "operators: " + ", ".join(sorted(REGISTRY))))

    def _block_table(self):
        return self._current_block.table

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
                    hint=self._did_you_mean(kw, set(names), "its arguments: " + ", ".join(names)))
            if kw in given:
                raise CostgraphSemanticError(f"argument '{kw}' of {what.removeprefix('block ')} is given twice", loc)
            given[kw] = (value, loc)
        return given, node_name

    def _bind(self, e: ast.Call, scope: Scope, params, what: str):
        """Match a call's arguments to an operator's ``params`` [(name, kind, default)]
        and evaluate each as its kind asks."""
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
        return args, node_name

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
            raise CostgraphSemanticError(f"{what} must be {want}, got {_describe(v)}", loc)
        if kind == "dim":
            _check_size(v, what, loc)
        return v

    def apply_op(self, kind: str, args: dict, name: str | None, loc: Location):
        self.grow(loc)
        path = self.claim(name or kind, name is not None, loc)
        ctx = OpContext(self, kind, path, args, loc)
        try:
            result = REGISTRY[kind].rule(ctx)
        except (ValueError, TypeError, IndexError, KeyError, ArithmeticError) as err:
            shown = ", ".join(f"{k}={_describe(v)}" for k, v in args.items() if v is not None)
            raise CostgraphSemanticError(f"{kind} cannot be applied to {shown}", loc,
                                         hint=f"see `costgraph ops` for what {kind} takes") from err
        if ctx.is_identity:
            return result
        inputs = [v for v in args.values() if isinstance(v, Tensor)]
        cost = Cost(ctx.cost["forward"], ctx.cost["backward_input"], ctx.cost["backward_weight"],
                    tuple(ctx.weights), tuple(ctx.tied), tuple(ctx.saved))
        attrs = {k: v for k, v in args.items() if not isinstance(v, Tensor)}
        self.cg.add_node(path, kind=kind, inputs=tuple(t.id for t in inputs),
                               outputs=tuple(t.id for t in ctx.outputs), attrs=attrs, loc=loc,
                               count=self.count, active=self.active, cost=cost, group=self._group())
        for t in ctx.outputs:
            self.cg.tensors[t.id] = t
        for t in inputs:
            self.cg.add_edge(t.producer, path, t.id, shape=t.shape, role=t.role)
        return result

    def _group(self) -> str | None:
        for depth in range(len(self.path), 0, -1):
            p = "/".join(self.path[:depth])
            if p in self.cg.groups:
                return p
        return None

    def call_block(self, bdef: BlockDef, e: ast.Call, scope: Scope):
        block = bdef.node
        if block.name in [b.node.name for b in self._stack_defs]:
            chain = " → ".join([*(b.node.name for b in self._stack_defs), block.name])
            raise CostgraphSemanticError(f"blocks call each other in a cycle: {chain}", e.loc,
                                         hint="a block cannot call itself; use repeat for depth")
        if len(self._stack_defs) >= MAX_BLOCK_DEPTH:
            raise CostgraphSemanticError(f"blocks call each other more than {MAX_BLOCK_DEPTH} deep", e.loc)
        inner = Scope()
        # bind positionally/by keyword first (evaluated in the caller's scope) ...
        given_args, node_name = self._bind_block(e, scope, block)
        self.grow(e.loc)
        path = self.claim(node_name or block.name, node_name is not None, e.loc)
        self.cg.blocks[path] = BlockInstance(path, block.name, self.count, e.loc, self.active)
        # ... then match shapes and evaluate defaults in the block's own scope.
        for p in block.params:
            if p.name in given_args:
                v = given_args[p.name]
            elif p.default is not None:
                v = self.evaluate(p.default, inner)
            else:
                raise CostgraphSemanticError(f"block {block.name} needs the argument '{p.name}'", e.loc,
                                             hint=f"{block.name}({', '.join(q.name for q in block.params)})")
            if p.shape is not None:
                self._match_shape(p, v, inner, block, e.loc)
            inner.vars[p.name] = v
        self._stack_defs.append(bdef)
        self.path.append(path.rsplit("/", 1)[-1])
        try:
            self.run(block.body, inner, where="block")
        except _Return as r:
            return r.value
        finally:
            self.path.pop()
            self._stack_defs.pop()
        raise CostgraphSemanticError(f"block '{block.name}' returns nothing", block.loc,
                                     hint="end the block with `return y`")

    @property
    def _stack_defs(self) -> list[BlockDef]:
        return self.block_stack  # type: ignore[return-value]

    @property
    def _current_block(self) -> BlockDef:
        return self.block_stack[-1]  # type: ignore[return-value]

    def _bind_block(self, e: ast.Call, scope: Scope, block: ast.Block):
        """A block call's arguments, evaluated in the caller's scope."""
        given, node_name = self._match_args(e, [p.name for p in block.params], f"block {block.name}")
        return {name: self.evaluate(expr, scope) for name, (expr, _) in given.items()}, node_name

    def _match_shape(self, p: ast.Param, v, inner: Scope, block: ast.Block, loc: Location):
        pattern = "[" + ", ".join(_show(x) for x in p.shape) + "]"
        if not isinstance(v, Tensor):
            raise CostgraphSemanticError(f"argument '{p.name}' of {block.name} must be a tensor {pattern}, "
                                         f"got {_describe(v)}", loc)
        if len(p.shape) != len(v.shape):
            raise CostgraphSemanticError(
                f"argument '{p.name}' of {block.name} must have {len(p.shape)} dimensions {pattern}, "
                f"got {v.shape_str()}", loc)
        for pat, actual in zip(p.shape, v.shape):
            if isinstance(pat, ast.Var) and pat.name not in inner.vars:
                inner.vars[pat.name] = actual
                continue
            expected = self.eval_dim(pat, inner, f"the shape of '{p.name}'")
            if not same(expected, actual):
                raise CostgraphSemanticError(
                    f"argument '{p.name}' of {block.name} must be {pattern}, got {v.shape_str()} "
                    f"({expected} ≠ {actual})", loc)

    @staticmethod
    def _did_you_mean(name: str, candidates, otherwise: str | None = None) -> str | None:
        close = difflib.get_close_matches(name, sorted(candidates), n=1)
        return f"did you mean '{close[0]}'?" if close else otherwise


def _show(e) -> str:
    if isinstance(e, ast.Var):
        return e.name
    if isinstance(e, ast.Int):
        return str(e.value)
    if isinstance(e, ast.BinOp):   # a chain in a loop, as Builder.binop walks it
        tail = []
        while isinstance(e, ast.BinOp):
            tail.append(f"{e.op}{_show(e.right)}")
            e = e.left
        return _show(e) + "".join(reversed(tail))
    return "…"


def _statements(body, into_repeats: bool):
    """Every statement of ``body``, through both branches of each ``if`` and,
    with ``into_repeats``, into repeat bodies."""
    for st in body:
        yield st
        if isinstance(st, ast.If):
            yield from _statements(st.then, into_repeats)
            yield from _statements(st.orelse, into_repeats)
        elif into_repeats and isinstance(st, ast.Repeat):
            yield from _statements(st.body, into_repeats)


def _declared_dims(body) -> set[str]:
    """Names of every ``dim`` at model level, in either branch of every ``if``."""
    return {st.name for st in _statements(body, into_repeats=False) if isinstance(st, ast.Dim)}


def _assigned_names(body) -> set[str]:
    """Names assigned anywhere in a repeat body (the values it carries)."""
    return {t for st in _statements(body, into_repeats=True) if isinstance(st, ast.Assign) for t in st.targets}


def build(program: Program, settings: Settings = Settings()) -> CostGraph:
    """Build the operator graph of ``program`` under ``settings``.

    Raises
    ------
    CostgraphSemanticError
        For unknown names, wrong arguments, shape mismatches (with both
        shapes), block cycles, and other mistakes, located in the file; and
        past the limits: :data:`MAX_GRAPH_SIZE` nodes and block instances,
        :data:`MAX_BLOCK_DEPTH` nested block calls, dimension expressions of
        :data:`~costgraph.context.MAX_TERMS` terms and degree
        :data:`~costgraph.context.MAX_DEGREE` once multiplied out.
    """
    try:
        return Builder(program, settings).build()
    except RecursionError:   # the parser and the block-depth limit keep well below this; a backstop
        raise CostgraphSemanticError(
            "the model nests too deeply to build (blocks, repeats and expressions together)",
            program.model.loc, hint="flatten it: fewer nested blocks or intermediate names") from None
