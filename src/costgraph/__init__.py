"""costgraph: symbolic cost models of Transformer architectures.

An architecture written in the costgraph language becomes an operator graph
whose nodes carry SymPy expressions for parameters, FLOPs (forward; backward
split into input and weight gradients) and the tensors kept for backward;
sums over the graph give closed forms per node, block, layer and model.

>>> import costgraph
>>> costgraph.load("gpt").costs("model").evaluate(config="gpt2")["params"]
124439808
"""

import os as _os
import sys as _sys

#: entries of SymPy's cache of built expressions (one ``functools.lru_cache`` per constructor, sized from the
#: ``SYMPY_CACHE_SIZE`` environment variable when SymPy is first imported; SymPy's default is 1000). A plan, or
#: ``costgraph web``'s training table and step times, derive train's closed forms for many layouts that share
#: most of their subexpressions: with 1000 entries they are evicted before they are met again. Measured on this
#: machine, one process: ``plan deepseek_v3`` of tests/training/test_plan_equals_train.py 7.7 s of CPU at 1000,
#: 5.3 s at 5000, 5.5 s at 20000 (about 119 MB resident either way); ``costgraph web models/qwen3_next_chunked.cg``
#: 47.9 s and 115 MB at 1000, 28.2 s and 147 MB at 100,000, the same page byte for byte. Set when ``costgraph``
#: is imported before SymPy (the command line, the API, the tests' conftest) and the variable is unset: a user's
#: own value wins.
SYMPY_CACHE_SIZE = 100_000
if "sympy" not in _sys.modules:
    _os.environ.setdefault("SYMPY_CACHE_SIZE", str(SYMPY_CACHE_SIZE))

from .errors import CostgraphError, CostgraphSemanticError, CostgraphSyntaxError, CostgraphValueError

from .version import __version__
from . import results as _results


def _renderers():
    """The renderers of the typed results (:mod:`costgraph.export.present`), imported on the first
    rendering: the analyses reach them through :mod:`costgraph.results` and import nothing from
    ``export/`` (the package's face, above both, joins them)."""
    from .export import present

    return present


_results.install(_renderers)

# The API's names are imported on first use (PEP 562), so that importing the
# package, or the command line for --help, list and ops, does not import SymPy.
_LAZY = {"load": "sources", "loads": "model", "Model": "model", "Costs": "model",
         "fit": "verdict", "FitResult": "verdict", "calibrate": "training.calibration",
         "from_hf_config": "language.hf_config", "load_hf_config": "language.hf_config", "HFModel": "language.hf_config",
         "TrainOptions": "train_options", "PlanOptions": "train_options", "InferOptions": "infer_options",
         "FitOptions": "fit_options", "Layout": "parallel.layout"}

TYPE_CHECKING = False   # not typing's: importing typing costs a few ms at every start
if TYPE_CHECKING:
    from .language.hf_config import HFModel, from_hf_config, load_hf_config
    from .model import Costs, Model, loads
    from .sources import load
    from .fit_options import FitOptions
    from .infer_options import InferOptions
    from .parallel.layout import Layout
    from .train_options import PlanOptions, TrainOptions
    from .training.calibration import calibrate
    from .verdict import FitResult, fit


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'costgraph' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = ["load", "loads", "fit", "FitResult", "calibrate", "Model", "Costs", "from_hf_config", "load_hf_config", "HFModel", "TrainOptions", "PlanOptions", "InferOptions", "FitOptions", "Layout", "CostgraphError", "CostgraphSyntaxError",
           "CostgraphSemanticError", "CostgraphValueError", "__version__"]
