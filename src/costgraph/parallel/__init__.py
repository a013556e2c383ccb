"""Parallel layouts as analyses over the operator graph.

:mod:`costgraph.parallel.layout` holds :class:`~costgraph.parallel.layout.Layout`
(the degrees and training settings); :mod:`costgraph.parallel.placement`
computes, once per graph and layout, who holds which part of each tensor
(TP/SP/CP splits per axis, routed-expert groups, pipeline stages, DP and
expert-DP groups and the links they cross), which memory, communication,
step time, the planner, the validity checks and inference read.
:mod:`costgraph.parallel.tensor` derives, from the graph alone, which weights
and which tensors tensor parallelism (Megatron-LM, Shoeybi et al. 2019)
splits, and which sequence parallelism (Korthikanti et al. 2022 §4.2.2) adds;
:mod:`costgraph.parallel.pipeline` the stages;
:mod:`costgraph.parallel.communication` the collectives of each kind.
"""
