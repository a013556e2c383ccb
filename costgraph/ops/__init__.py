"""Operator cost rules, grouped by family; importing this package registers them.

``matmul.py`` (linear, matmul, embedding), ``norm.py`` (layernorm, rmsnorm),
``elementwise.py`` (activations, softmax, dropout, add/mul, and the
per-element FLOP table of the ``all`` convention), ``shape.py`` (free
reshapes: split, split_heads, merge_heads, transpose).
"""

from . import elementwise, matmul, norm, shape  # noqa: F401  (registers the rules)
from .registry import REGISTRY, OpSpec, ParamSpec  # noqa: F401
