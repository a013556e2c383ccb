"""Operator cost rules, grouped by family.

``matmul.py`` (linear, matmul, embedding), ``norm.py`` (layernorm, rmsnorm),
``elementwise.py`` (activations, softmax, dropout, add/mul, and the
per-element FLOP table of the ``all`` convention, ``cast``), ``index.py``
(max, topk, gather, scatter, select), ``shape.py`` (free reshapes: split,
split_heads, merge_heads, transpose), ``ssm.py`` (depthwise conv1d, Mamba's
selective_scan), ``vision.py`` (conv2d, conv3d, dense_conv1d,
flatten_patches, concat_seq, group_norm, upsample, adaLN modulate and gate).

Each ``@op(...)`` also declares the operator's traits: ``layout`` (how it is
split under tensor parallelism, one of :data:`registry.LAYOUTS`, applied by
:mod:`costgraph.parallel.tensor`) and ``roles`` (:data:`registry.ROLES`: Muon
matrices and LoRA targets, MoE routers).

Importing this package is light: the rule modules (which import SymPy) are
imported on the first lookup in :data:`REGISTRY`; :func:`catalogue` lists the
operators without them (see :mod:`costgraph.ops.registry`).
"""

from .registry import REGISTRY, OpSpec, ParamSpec, catalogue  # noqa: F401
