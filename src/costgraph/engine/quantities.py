"""The names of the quantities every scope of a model has, in the order
costgraph prints them (light: no SymPy; the CLI's argument choices use it).
Meanings and conventions: README, "What it computes"."""

QUANTITIES = ("params", "params_active", "flops_forward", "flops_backward", "flops_backward_input",
              "flops_backward_weight", "activation_bytes", "kv_cache_bytes", "kv_cache_bytes_per_token")
