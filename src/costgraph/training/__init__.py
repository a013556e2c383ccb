"""Training memory: model states per device (weights, gradients, optimizer
states, master copies) under named precision policies and optimizers, sharded
by ZeRO 0–3, FSDP and HSDP.

>>> import costgraph
>>> from costgraph.training import bare_model_states
>>> bare_model_states(7_500_000_000, policy="mixed", optimizer="adam", zero=0)["total"]
120000000000
"""

from .bare import PSI, bare_model_states, deepspeed_gb, deepspeed_zero_estimate
from .data import Optimizer, Policy, optimizer, optimizers, policies, policy
from .states import DP, KEYS, largest_module_params, model_states, output_heads, tensor_state_bytes

__all__ = ["model_states", "bare_model_states", "deepspeed_zero_estimate", "deepspeed_gb",
           "largest_module_params", "output_heads", "tensor_state_bytes", "policies", "optimizers",
           "policy", "optimizer", "Policy", "Optimizer", "DP", "PSI", "KEYS"]
