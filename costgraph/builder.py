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
from .graph import ONE, BlockInstance, Cost, CostGraph, DimInfo, Group, Tensor, Weight
from .loader import BlockDef, Program
from .parser import MAX_DIGITS
from .ops import REGISTRY
from .ops.registry import REQUIRED
from .patterns import (MAX_MODULUS, PATTERN_HINT as _PATTERN_HINT, Cell as _Cell, Cond as _Cond, Index as _Index,
                       Level as _Level, count_pattern as _count_pattern)
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
    if isinstance(v, _Index):
        return f"the index '{v.name}' of repeat '{v.group}'"
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


def _logic(op: str, a, b, loc: Location):
    """``a and b`` / ``a or b`` of true/false values and conditions on one index."""
    if isinstance(a, bool) and isinstance(b, bool):
        return (a and b) if op == "and" else (a or b)
    for v in (a, b):
        if not isinstance(v, (bool, _Cond)):
            raise CostgraphSemanticError(f"'{op}' joins conditions (true or false), got {_describe(v)}", loc,
                                         hint=_PATTERN_HINT)
    if isinstance(a, bool) or isinstance(b, bool):
        flag, cond = (a, b) if isinstance(a, bool) else (b, a)
        if op == "and":
            return cond if flag else False
        return True if flag else cond
    if a.level != b.level:
        raise CostgraphSemanticError("a condition can test the index of one repeat only", loc,
                                     hint="nest two ifs, one per index")
    return _Cond(a.level, (op, a.tree, b.tree))


def _describe_cond(v) -> str:
    return "a condition on a repeat's index" if isinstance(v, _Cond) else _describe(v)


@dataclass(frozen=True)
class _Evaluated:
    """An argument already evaluated (a call named like a dimension function
    whose arguments turned out to be tensors)."""

    value: object
    loc: Location


# Functions of dimension expressions: SymPy function, arity (2: two or more), usage.
_DIM_FUNCS = {
    "min": (sympy.Min, 2, "min(a, b): the smaller of two sizes, e.g. min(s, w)"),
    "max": (sympy.Max, 2, "max(a, b): the larger of two sizes"),
    "floor": (sympy.floor, 1, "floor(x / y): x / y rounded down"),
    "ceil": (sympy.ceiling, 1, "ceil(x / y): x / y rounded up"),
}


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
        self.levels: list[_Level] = []   # the repeats around the statement being built
        self.branch_depth = 0   # inside a branch of an if on a repeat's index

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
                                             hint="give each call its own name=" if not self.branch_depth else
                                             "each branch of an if on a repeat's index builds nodes of its own: "
                                             f"name them apart ({name}_local, {name}_global)")
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
            cond = self.condition(st.cond, scope)
            if isinstance(cond, _Cond):
                self.pattern_if(st, cond, scope, where)
                return
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
        elif isinstance(st, ast.ParamDecl):
            self.param_stmt(st, scope)
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

    def param_stmt(self, st: ast.ParamDecl, scope: Scope):
        """``param NAME[shape]``: a node of kind ``param`` owning the weight
        ``NAME/weight`` (counted with the repeats around it), whose output is
        the parameter as a tensor; no FLOPs of its own."""
        _not_constant(st.name, st.loc)
        shape = tuple(self.eval_dim(e, scope, f"the shape of '{st.name}'") for e in st.shape)
        self.grow(st.loc)
        path = self.claim(st.name, True, st.loc)
        wid, tid = f"{path}/weight", f"{path}:0"
        self.cg.weights[wid] = Weight(wid, shape, self.count, self.active)
        t = Tensor(tid, shape, "act", tid, self.count, path, self.active)
        self.cg.tensors[tid] = t
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

    def condition(self, e, scope: Scope):
        """An if's condition: true/false, or a :class:`_Cond` on a repeat's index."""
        if isinstance(e, ast.Logic):
            a = self.condition(e.left, scope)
            if e.op == "not":
                if isinstance(a, bool):
                    return not a
                if isinstance(a, _Cond):
                    return _Cond(a.level, ("not", a.tree))
                raise CostgraphSemanticError(f"'not' needs true or false, got {_describe(a)}", e.loc,
                                             hint="not tests an option or a condition: if not bias { ... }")
            return _logic(e.op, a, self.condition(e.right, scope), e.loc)
        if isinstance(e, ast.Compare):
            return self.compare(e, scope)
        return self.evaluate(e, scope)

    def _index_side(self, e, scope: Scope):
        """One side of a comparison: ``("index", idx, modulus or None)`` for
        ``i`` or ``i % M``, else ``("value", v)``."""
        if isinstance(e, ast.Var) and isinstance(v := self.evaluate(e, scope), _Index):
            return ("index", v, None)
        if isinstance(e, ast.BinOp) and e.op == "%" and isinstance(e.left, ast.Var):
            idx = self.evaluate(e.left, scope)
            if isinstance(idx, _Index):
                m = self.evaluate(e.right, scope)
                if not (isinstance(m, sympy.Integer) and m > 0):
                    raise CostgraphSemanticError(
                        f"the index '{idx.name}' is taken modulo a whole number, got {_describe(m)}", e.right.loc,
                        hint="a layer pattern repeats every M layers for a fixed M: i % 6 == 5")
                if m > MAX_MODULUS:
                    raise CostgraphSemanticError(f"modulus {m} is too large (at most {MAX_MODULUS})", e.right.loc)
                return ("index", idx, int(m))
        return ("value", self.evaluate(e, scope))

    _FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}

    def compare(self, e: ast.Compare, scope: Scope):
        left, right = self._index_side(e.left, scope), self._index_side(e.right, scope)
        op = e.op
        if left[0] == "value" and right[0] == "value":
            a, b = left[1], right[1]
            if isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr) and a.is_number and b.is_number:
                return bool({"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])
            raise CostgraphSemanticError(
                f"a comparison tests a repeat's index, not {_describe(a)} and {_describe(b)}", e.loc,
                hint="dimensions are symbols, so the graph cannot depend on their values; number the copies "
                     "with repeat COUNT as NAME[i] and test i (i % 2 == 0, i < k); an option is tested "
                     "directly: if bias { ... }")
        if left[0] == "index" and right[0] == "index":
            raise CostgraphSemanticError("a comparison tests an index against a number or dimension", e.loc,
                                         hint=_PATTERN_HINT)
        if right[0] == "index":
            left, right, op = right, left, self._FLIP[op]
        _, idx, m = left
        v = right[1]
        if not isinstance(v, sympy.Expr) or isinstance(v, bool):
            raise CostgraphSemanticError(f"the index '{idx.name}' is compared with {_describe(v)}", e.loc,
                                         hint=_PATTERN_HINT)
        if m is None:
            if op in ("==", "!="):
                if v.is_integer is not True:
                    raise CostgraphSemanticError(
                        f"the index '{idx.name}' is compared for equality with {v}, not provably a whole number",
                        e.loc, hint="compare with a whole number or a dimension: i == 0, i == k")
                cell = _Cell(lo=v, hi=v + 1)
                return _Cond(idx.level, cell if op == "==" else ("not", cell))
            cell = {"<": lambda: _Cell(hi=sympy.ceiling(v)), "<=": lambda: _Cell(hi=sympy.floor(v) + 1),
                    ">": lambda: _Cell(lo=sympy.floor(v) + 1), ">=": lambda: _Cell(lo=sympy.ceiling(v))}[op]()
            return _Cond(idx.level, cell)
        if not v.is_Integer:
            raise CostgraphSemanticError(
                f"the remainder '{idx.name} % {m}' is compared with {v}: compare it with a whole number", e.loc,
                hint=_PATTERN_HINT)
        r = int(v)
        test = {"==": r.__eq__, "!=": r.__ne__, "<": r.__gt__, "<=": r.__ge__, ">": r.__lt__, ">=": r.__le__}[op]
        return _Cond(idx.level, _Cell(m=m, residues=frozenset(x for x in range(m) if test(x))))

    def pattern_if(self, st: ast.If, cond: _Cond, scope: Scope, where: str):
        """Both branches of an if on a repeat's index, each built once with the
        number of copies that take it; a name both branches assign is one
        value after the if (tensors of one shape: a new tensor per copy)."""
        level = self.levels[cond.level]
        names = _assigned_names(st.then) | _assigned_names(st.orelse)
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
            except _Return as r:   # in a block: both branches must return
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
            raise _Return(value, returns[0].loc)
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
                    f"{what} is {_describe(a)} after the if and {_describe(b)} after the else; "
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
            f"{what} is {_describe(a)} after the if and {_describe(b)} after the else", st.loc,
            hint="a dimension or switch cannot depend on a layer's index; give it another name in one branch")

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
        if st.index is not None:
            if st.active is not None:
                raise CostgraphSemanticError("a repeat with an index cannot have an active count", st.index_loc,
                                             hint="number the layers, not the experts: repeat l as layers[i] { ... }")
            _not_constant(st.index, st.index_loc)
            if scope.has(st.index):
                raise CostgraphSemanticError(f"'{st.index}' is already defined; the index needs a name of its own",
                                             st.index_loc, hint=f"e.g. repeat {_show(st.count)} as {st.name}[j]")
        path = self.claim(st.name, True, st.loc)
        assigned = _assigned_names(st.body)
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
        if isinstance(e, (ast.Compare, ast.Logic)):
            v = self.condition(e, scope)
            if isinstance(v, _Cond):
                raise CostgraphSemanticError("a condition on a repeat's index can only be tested by an if", e.loc,
                                             hint="write it in the if: if i % 2 == 0 { ... }")
            return v
        if isinstance(e, _Evaluated):
            return e.value
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
        for v in (left, right):
            if isinstance(v, _Index):
                raise CostgraphSemanticError(
                    f"the index '{v.name}' can only be tested in an if, not used in arithmetic", e.loc,
                    hint=_PATTERN_HINT)
        if isinstance(left, Tensor) and isinstance(right, Tensor):
            kind = {"+": "add", "-": "sub", "*": "mul"}.get(e.op)
            if kind is None:
                raise CostgraphSemanticError(f"tensors cannot be divided with '{e.op}'", e.loc)
            return self.apply_op(kind, {"x": left, "y": right}, None, e.loc)
        if isinstance(left, sympy.Expr) and isinstance(right, sympy.Expr):
            if e.op in "/%" and right.is_zero:
                raise CostgraphSemanticError("division by zero", e.right.loc)
            if e.op == "%":
                result = sympy.Mod(left, right)
            else:
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
        if e.name in _DIM_FUNCS and not e.kwargs:
            values = [self.evaluate(a, scope) for a in e.args]
            if all(isinstance(v, sympy.Expr) for v in values):
                return self.dim_function(e, values)
            if e.name not in REGISTRY:
                bad = next(v for v in values if not isinstance(v, sympy.Expr))
                raise CostgraphSemanticError(f"{e.name}() takes dimension expressions, got {_describe(bad)}",
                                             e.loc, hint=_DIM_FUNCS[e.name][2])
            # an operator of that name (on tensors): its arguments are evaluated once
            e = ast.Call(e.name, tuple(a if isinstance(a, ast.Var) else _Evaluated(v, a.loc)
                                       for a, v in zip(e.args, values)), e.kwargs, e.loc)
        if e.name in REGISTRY:
            spec = REGISTRY[e.name]
            args, name = self._bind(e, scope, [(p.name, p.kind, p.default) for p in spec.params], e.name)
            return self.apply_op(e.name, args, name, e.loc)
        raise CostgraphSemanticError(
            f"unknown operator or block '{e.name}'", e.loc,
            hint=self._did_you_mean(e.name, set(REGISTRY) | set(table), "operators: " + ", ".join(sorted(REGISTRY))))

    def dim_function(self, e: ast.Call, values: list):
        """``min(a, b)``, ``max(a, b)``, ``floor(x)``, ``ceil(x)`` of dimension expressions."""
        f, arity, usage = _DIM_FUNCS[e.name]
        if (len(values) < 2) if arity == 2 else (len(values) != 1):
            raise CostgraphSemanticError(f"{e.name}() takes {'two or more arguments' if arity == 2 else 'one argument'},"
                                         f" {len(values)} given", e.loc, hint=usage)
        result = f(*values)
        check_expansion(result, "this dimension expression", e.loc)
        return _check_magnitude(result, e.loc)

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
        branch_depth, self.branch_depth = self.branch_depth, 0   # a block may return inside a branch
        try:
            self.run(block.body, inner, where="block")
        except _Return as r:
            return r.value
        finally:
            self.branch_depth = branch_depth
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
