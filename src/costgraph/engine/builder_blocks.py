"""Block calls in the builder's walk: every call of a block is built anew
(inlined) under its own path, its parameters bound by position or keyword
in the caller's scope, then its tensor parameters' shapes matched, binding
the names in them (``block f(x[B, S, H])`` binds ``H``).
"""

from __future__ import annotations

from ..language import ast
from .builder_scope import Return, Scope, describe, show
from .context import same
from ..errors import CostgraphSemanticError, Location
from .graph import BlockInstance, Tensor
from ..language.loader import BlockDef

# Deepest chain of block calls (a calls b calls c ...); the walk recurses.
MAX_BLOCK_DEPTH = 50


class Blocks:
    """The builder's block calls (a mixin of :class:`costgraph.engine.builder.Builder`);
    ``block_stack`` holds the definitions of the blocks being built."""

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
        share = getattr(self, "share_next", None)
        self.share_next = None
        if share is not None:   # block(..., reuse = NAME): weights read from NAME's (builder_calls)
            if self.cg.blocks[share[0]].kind != block.name:
                raise CostgraphSemanticError(f"'{share[0]}' is a {self.cg.blocks[share[0]].kind}, not a "
                                             f"{block.name}", share[1], hint="share a block of the same kind")
            saved_share, self.sharing = getattr(self, "sharing", None), (share[0], path, share[1])
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
        except Return as r:
            return r.value
        finally:
            if share is not None:
                self.sharing = saved_share
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
        pattern = "[" + ", ".join(show(x) for x in p.shape) + "]"
        if not isinstance(v, Tensor):
            raise CostgraphSemanticError(f"argument '{p.name}' of {block.name} must be a tensor {pattern}, "
                                         f"got {describe(v)}", loc)
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

    def _block_table(self):
        """The blocks a call inside the block being built can name (its file's)."""
        return self._current_block.table
