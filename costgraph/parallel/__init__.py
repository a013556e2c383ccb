"""Parallel layouts as analyses over the operator graph.

:mod:`costgraph.parallel.tensor` derives, from the graph alone, which weights
and which tensors tensor parallelism (Megatron-LM, Shoeybi et al. 2019)
splits, and which sequence parallelism (Korthikanti et al. 2022 §4.2.2) adds.
"""
