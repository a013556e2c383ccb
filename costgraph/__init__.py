"""costgraph: symbolic cost models of Transformer architectures.

An architecture written in the costgraph language becomes an operator graph
whose nodes carry SymPy expressions for parameters, FLOPs (forward; backward
split into input and weight gradients) and the tensors kept for backward;
sums over the graph give closed forms per node, block, layer and model.

>>> import costgraph
>>> costgraph.load("gpt").costs("model").evaluate(config="gpt2")["params"]
124439808
"""

from .errors import CostgraphError, CostgraphSemanticError, CostgraphSyntaxError, CostgraphValueError
from .model import Costs, Model, load, loads
from .hf_config import HFModel, from_hf_config, load_hf_config

__version__ = "0.1.0"

__all__ = ["load", "loads", "Model", "Costs", "from_hf_config", "load_hf_config", "HFModel", "CostgraphError", "CostgraphSyntaxError",
           "CostgraphSemanticError", "CostgraphValueError", "__version__"]
