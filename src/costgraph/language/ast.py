"""Located syntax tree of a model file (what the parser hands the builder).

Every node carries ``loc`` (a :class:`~costgraph.errors.Location`) so that the
builder's errors point at the user's text. Expressions are kept unevaluated:
whether ``a * b`` multiplies two tensors or two dimensions is decided by the
builder from the values the names have.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import Location


# --- expressions -----------------------------------------------------------

@dataclass(frozen=True)
class Var:
    name: str
    loc: Location


@dataclass(frozen=True)
class Int:
    value: int
    loc: Location


@dataclass(frozen=True)
class String:
    value: str
    loc: Location


@dataclass(frozen=True)
class BinOp:
    op: str  # one of + - * / %
    left: "Expr"
    right: "Expr"
    loc: Location


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple["Expr", ...]
    kwargs: tuple[tuple[str, "Expr", Location], ...]
    loc: Location


@dataclass(frozen=True)
class Compare:
    """``left OP right`` with OP one of ``== != < <= > >=``: a condition on a
    repeat's index (``i % 6 == 5``, ``i < k``)."""

    op: str
    left: "Expr"
    right: "Expr"
    loc: Location


@dataclass(frozen=True)
class InList:
    """``value in [a, b, ...]`` (``negated``: ``value not in [...]``): a condition on a
    repeat's index (``j in [2, 5, 8, 10]``)."""

    value: "Expr"
    items: tuple
    negated: bool
    loc: Location


@dataclass(frozen=True)
class Logic:
    """``a and b``, ``a or b`` (``op`` is ``and`` or ``or``) and ``not a``
    (``op`` is ``not``, ``right`` is None)."""

    op: str
    left: "Expr"
    right: "Expr | None"
    loc: Location


Expr = Var | Int | String | BinOp | Call | Compare | InList | Logic


# --- statements -------------------------------------------------------------

@dataclass(frozen=True)
class Dim:
    """``dim NAME [= expr] ["meaning"] [default expr]``."""

    name: str
    value: Expr | None
    meaning: str | None
    default: Expr | None
    loc: Location


@dataclass(frozen=True)
class Option:
    """``option NAME = expr ["meaning"]``: a switch that changes the graph."""

    name: str
    value: Expr
    meaning: str | None
    loc: Location


@dataclass(frozen=True)
class Input:
    """``input NAME[shape] [role]``: a model input tensor."""

    name: str
    shape: tuple[Expr, ...]
    role: str | None
    loc: Location


@dataclass(frozen=True)
class ParamDecl:
    """``param NAME[shape]``: a bare parameter tensor (attention sinks, a
    scale vector, Mamba's A and D), owned by a node of kind ``param``;
    ``mark`` is the word after ``:`` (``frozen``: not trained; ``buffer``: not a
    parameter), or ``None``; ``dtype`` the word in parentheses after it (``buffer(fp32)``)."""

    name: str
    shape: tuple[Expr, ...]
    loc: Location
    mark: str | None = None
    dtype: str | None = None


@dataclass(frozen=True)
class Assign:
    targets: tuple[str, ...]
    value: Expr
    loc: Location


@dataclass(frozen=True)
class Repeat:
    """``repeat COUNT as NAME[INDEX] [active K] { ... }``: a group kept rolled, with a
    symbolic count. ``active`` (default: all) is how many of the COUNT copies
    each token passes through: the experts of a mixture of experts. ``index``
    (optional) names the copy's number 0 .. COUNT-1, tested by conditions
    (``if i % 6 == 5``) that the builder turns into counts of each kind."""

    count: Expr
    name: str
    active: Expr | None
    body: tuple["Stmt", ...]
    loc: Location
    index: str | None = None
    index_loc: Location | None = None


@dataclass(frozen=True)
class If:
    """``if COND { ... } [else { ... }]`` on a compile-time switch."""

    cond: Expr
    then: tuple["Stmt", ...]
    orelse: tuple["Stmt", ...]
    loc: Location


@dataclass(frozen=True)
class Return:
    value: Expr | tuple[Expr, ...]   # a tuple: `return a, b` (a model's several outputs)
    loc: Location


Stmt = Dim | Option | Input | ParamDecl | Assign | Repeat | If | Return


# --- top level --------------------------------------------------------------

@dataclass(frozen=True)
class Param:
    """A block parameter; ``shape`` (a pattern such as ``[B, S, H]``) marks a tensor."""

    name: str
    shape: tuple[Expr, ...] | None
    default: Expr | None
    loc: Location


@dataclass(frozen=True)
class Block:
    name: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    loc: Location


@dataclass(frozen=True)
class Model:
    """``model NAME [extends BASE] { ... }``."""

    name: str
    body: tuple[Stmt, ...]
    loc: Location
    base: str | None = None


@dataclass(frozen=True)
class Config:
    """``config NAME { dim = value, ... }``: a named concrete configuration."""

    name: str
    settings: tuple[tuple[str, Expr, Location], ...]
    loc: Location


@dataclass(frozen=True)
class Import:
    path: str
    loc: Location


@dataclass
class File:
    path: str
    imports: list[Import] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    models: list[Model] = field(default_factory=list)
    configs: list[Config] = field(default_factory=list)
