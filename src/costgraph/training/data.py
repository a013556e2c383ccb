"""Precision policies and optimizers, read from the data files beside this module.

``policies.toml`` gives, per named policy, the bytes per parameter of the
weights, the gradients, an fp32 gradient copy, an fp32 master copy, and the
bytes of one optimizer-state element. ``optimizers.toml`` gives, per named
optimizer, how many states it keeps and their special forms (block-wise
quantized, factored, Muon's split). ``fp8.toml`` gives the FP8 recipes of
Transformer Engine an FP8 policy names (``fp8 = "delayed"``; their buffers:
:mod:`costgraph.training.fp8`). Each number carries its source in a comment
beside it in the file.

The files are read and validated by :mod:`costgraph.datafiles` against the
kinds declared here (:data:`POLICY`, :data:`OPTIMIZER`): every number must be a
non-negative TOML integer (it becomes a SymPy ``Integer``; floats are refused
so that formulas stay exact), every key known, every name referred to defined,
every entry's ``source`` given. Nothing read from a file is evaluated. A
``$COSTGRAPH_DATA`` folder may add policies and optimizers of one's own (files
of the same names; a bundled name is refused).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy

from .. import datafiles
from ..datafiles import Field, Kind, Schema
from ..errors import CostgraphValueError

POLICY_NUMBERS = ("weights", "gradients", "grad_copy", "master", "state")
OPTIMIZER_NUMBERS = ("states", "state_bytes", "block_size", "block_stat_bytes",
                     "min_quantized_numel", "small_state_bytes", "matrix_states")


@dataclass(frozen=True)
class Policy:
    """A training precision policy: bytes per parameter element of each model state.

    ``weights``, ``gradients``: the parameters and gradients as the model reads
    and writes them; ``grad_copy``: an fp32 copy of the gradients kept by the
    optimizer step; ``master``: an fp32 master copy of the parameters;
    ``state``: bytes of one optimizer-state element (Adam's ``m`` or ``v``).
    """

    name: str
    description: str
    source: str
    weights: sympy.Integer
    gradients: sympy.Integer
    grad_copy: sympy.Integer
    master: sympy.Integer
    state: sympy.Integer
    fp8: str | None = None   # an FP8 recipe of fp8.toml (costgraph.training.fp8): the layers' linears in FP8
    #: the FP8 linears' weights are kept in FP8 (Megatron-LM ``--fp8-param-gather``, TE's
    #: ``quantized_model_init``): no 16-bit copy beside them; ZeRO gathers them in FP8
    fp8_params: bool = False
    #: bits an element of the MoE activation's inputs (the SwiGLU's gate and up projections' outputs) where the
    #: ``moe_act`` recompute module frees its output, with an fp32 scale per 1×128 tile (None: kept at the
    #: activation precision); DeepSeek-V3 report §3.3.3 (2) (:func:`costgraph.training.fp8.low_precision_saved`)
    moe_act_input_bits: int | None = None
    #: bits an element of the output projection's input where it reads the attention's output, kept once for
    #: the attention's backward and the projection's, with an fp32 scale per 1×128 tile (None: TE's FP8 copy
    #: beside what the attention keeps); DeepSeek-V3 report §3.3.3 (1), E5M6 = 12 bits
    attention_output_bits: int | None = None


@dataclass(frozen=True)
class Optimizer:
    """What an optimizer keeps per parameter (see ``optimizers.toml``).

    ``states`` element-wise states of the parameter's shape, each of
    ``state_bytes`` (``None``: the policy's); block-wise quantization adds
    ``block_stat_bytes`` per ``block_size`` elements and state, and tensors
    under ``min_quantized_numel`` elements keep ``small_state_bytes`` states;
    ``factored`` adds Adafactor's second moment; ``matrix_states`` and
    ``rest`` describe Muon's split (which weights are matrices is declared on
    the operators: the ``matrix`` role of :mod:`costgraph.ops.registry`).
    """

    name: str
    description: str
    source: str
    states: sympy.Integer
    state_bytes: sympy.Integer | None = None
    block_size: sympy.Integer | None = None
    block_stat_bytes: sympy.Integer | None = None
    min_quantized_numel: sympy.Integer | None = None
    small_state_bytes: sympy.Integer | None = None
    factored: bool = False
    matrix_states: sympy.Integer | None = None
    rest: str | None = None

    @property
    def elementwise(self) -> bool:
        """Whether the state of a tensor depends on its element count only
        (not on its shape nor on the operator that owns it)."""
        return not self.factored and self.matrix_states is None


_TEXT_FIELDS = (Field("description", "text"), Field("source", "text", doc="the source of the entry's numbers"))

#: the widest ``moe_act_input_bits`` / ``attention_output_bits``: fp32 storage (the report's formats are 8 bits for
#: FP8 and 12 for DeepSeek-V3's E5M6, arXiv 2412.19437 v2 §3.3.3)
MAX_STORAGE_BITS = 32
_WIDEST = "fp32, the widest format an activation is stored in; 8 for FP8, 12 for DeepSeek-V3's E5M6"
#: A precision policy: bytes per parameter element of each model state.
POLICY = Kind("precision policy", (*_TEXT_FIELDS, *(Field(k, unit="B") for k in POLICY_NUMBERS),
                                   Field("fp8", "text", required=False, doc="an FP8 recipe of fp8.toml"),
                                   Field("fp8_params", "flag", required=False,
                                         doc="the FP8 linears' weights kept in FP8 (--fp8-param-gather)"),
                                   Field("moe_act_input_bits", unit="bits", required=False, positive=True,
                                         maximum=MAX_STORAGE_BITS, above=_WIDEST,
                                         doc="the MoE activation's inputs saved at these bits + fp32 per 1x128 "
                                             "where moe_act recompute frees its output"),
                                   Field("attention_output_bits", unit="bits", required=False, positive=True,
                                         maximum=MAX_STORAGE_BITS, above=_WIDEST,
                                         doc="the output projection's input (the attention output) saved once at "
                                             "these bits + fp32 per 1x128")))
#: An optimizer: its states and their special forms (see ``optimizers.toml``).
OPTIMIZER = Kind("optimizer", (
    *_TEXT_FIELDS,
    Field("states", unit="states"), Field("state_bytes", unit="B", required=False),
    Field("block_size", unit="elements", required=False, positive=True),
    Field("block_stat_bytes", unit="B", required=False),
    Field("min_quantized_numel", unit="elements", required=False), Field("small_state_bytes", unit="B", required=False),
    Field("factored", "flag", required=False), Field("matrix_states", unit="states", required=False),
    Field("rest", "ref", required=False),
), together=(("block_size", "block_stat_bytes"), ("min_quantized_numel", "small_state_bytes"),
             ("matrix_states", "rest")))
POLICIES = Schema("policies.toml", "costgraph.training", entries=POLICY, user=True)
OPTIMIZERS = Schema("optimizers.toml", "costgraph.training", entries=OPTIMIZER, user=True)




def _policy(name: str, e: datafiles.Entry) -> Policy:
    fp8 = e.get("fp8")
    if fp8 is not None:   # the recipe must exist (fp8.toml, costgraph.training.fp8)
        if fp8 not in recipes():
            raise e.error(f"fp8 = {fp8!r} is not an FP8 recipe", "fp8", hint="one of: " + ", ".join(recipes()))
    fp8_params = bool(e.get("fp8_params") or False)
    if fp8_params and fp8 is None:
        raise e.error("fp8_params = true needs an FP8 recipe", "fp8_params", hint='add fp8 = "current" (or another '
                      "recipe of fp8.toml), or remove fp8_params")
    low = {k: int(e[k]) for k in ("moe_act_input_bits", "attention_output_bits") if e.get(k) is not None}
    if low and fp8 is None:
        raise e.error(f"{next(iter(low))} needs an FP8 recipe (the inputs are stored as the FP8 linears save theirs)",
                      next(iter(low)), hint='add fp8 = "blockwise" (or another recipe of fp8.toml), or remove it')
    return Policy(name, e["description"], e["source"], **{k: sympy.Integer(e[k]) for k in POLICY_NUMBERS}, fp8=fp8,
                  fp8_params=fp8_params, **low)


@cache
def _policies(data: datafiles.DataSet) -> dict[str, Policy]:
    return {name: _policy(name, e) for name, e in data.entries.items()}


def policies() -> dict[str, Policy]:
    """The named precision policies of ``policies.toml`` (and of
    ``$COSTGRAPH_DATA/policies.toml``, added), in file order."""
    return _policies(datafiles.load(POLICIES))


def _optimizer(name: str, e: datafiles.Entry, entries) -> Optimizer:
    rest = e.get("rest")
    if rest is not None and ("matrix_states" in entries[rest] or entries[rest].get("factored")):
        raise e.error(f"rest = {rest!r} must be element-wise", "rest",
                      hint="the weights Muon leaves are optimized element-wise (adamw)")
    nums = {k: sympy.Integer(e[k]) for k in OPTIMIZER_NUMBERS if k in e}
    return Optimizer(name, e["description"], e["source"], factored=e.get("factored", False),
                     rest=rest, **nums)


@cache
def _optimizers(data: datafiles.DataSet) -> dict[str, Optimizer]:
    return {name: _optimizer(name, e, data.entries) for name, e in data.entries.items()}


def optimizers() -> dict[str, Optimizer]:
    """The named optimizers of ``optimizers.toml`` (and of
    ``$COSTGRAPH_DATA/optimizers.toml``, added), in file order."""
    return _optimizers(datafiles.load(OPTIMIZERS))


def _lookup(kind: str, table: dict, name):
    if not isinstance(name, str):
        raise CostgraphValueError(f"the {kind} must be a name, not {type(name).__name__}",
                                  hint="choose one of: " + ", ".join(table))
    try:
        return table[name]
    except KeyError:
        raise CostgraphValueError(f"unknown {kind} {name!r}", hint="choose one of: " + ", ".join(table)) from None


def policy(name: str | Policy) -> Policy:
    """The precision policy called ``name`` (a :class:`Policy` is returned as it is).

    Raises
    ------
    CostgraphValueError
        For an unknown name, listing the known ones.
    """
    return name if isinstance(name, Policy) else _lookup("precision policy", policies(), name)


def optimizer(name: str | Optimizer) -> Optimizer:
    """The optimizer called ``name`` (an :class:`Optimizer` is returned as it is).

    Raises
    ------
    CostgraphValueError
        For an unknown name, listing the known ones.
    """
    return name if isinstance(name, Optimizer) else _lookup("optimizer", optimizers(), name)


# ---------------------------------------------------------------- FP8 recipes (fp8.toml)

#: the numbers of a recipe (``fp8.toml``), each a TOML integer with its source
RECIPE_NUMBERS = ("data_bytes", "scale_bytes", "amax_history", "meta_bytes", "forward_quantizers",
                  "backward_quantizers", "block", "weight_block_dims", "scale_pad_inner", "scale_pad_outer")
SCALINGS = ("tensor", "block", "mx")
#: a recipe's FP8 dot-product attention (costgraph.training.fp8_options): none, or O saved in FP8 or BF16
DPA = ("none", "fp8-output", "bf16-output")
COLUMNWISE = ("transpose", "always")
#: how long a recipe keeps an FP8 linear's quantized weight (costgraph.training.fp8): ``step`` (TE's weight
#: workspace, cached across the micro-batches of a step), ``saved`` (torchao: saved for the backward with the
#: layer's activations, one per micro-batch in flight, none kept under full recomputation), ``recomputed``
#: (torchao's force_recompute_fp8_weight_in_bwd: cast again in the backward, none kept)
WEIGHT_CACHE = ("step", "saved", "recomputed")
#: what a recipe's sequence-parallel all-gathers of an FP8 linear's input (and of a row-parallel FP8 linear's
#: output gradient) move (costgraph.parallel.comm_tensor): ``activation`` (the activations' precision) or ``fp8``
#: (quantized first: Transformer Engine's gather_along_first_dim / userbuffers with a quantizer) or ``fp8-input``
#: (the forward input's gather only: torchao's PrepareFloat8ModuleInput under torchtitan's float8 TP)
TP_ALL_GATHER = ("activation", "fp8", "fp8-input")

RECIPE = Kind("FP8 recipe", (
    Field("description", "text"), Field("source", "text", doc="the source of the entry's numbers"),
    Field("scaling", "text", doc="tensor, block or mx"), Field("columnwise", "text", doc="transpose or always"),
    *(Field(k, unit="B" if k.endswith("bytes") else "") for k in RECIPE_NUMBERS),
    Field("fp8_dpa", "text", required=False, doc="FP8 attention: none, fp8-output or bf16-output (O's precision)"),
    Field("wgrad_override", "flag", required=False, doc="runs --no-fp8-wgrad (weight gradients in BF16)"),
    Field("weight_cache", "text", required=False, doc="step (TE: kept the whole step), saved (torchao: with the activations) or recomputed"),
    Field("tp_all_gather", "text", required=False, doc="activation (default), fp8 or fp8-input: what the "
                                                       "sequence-parallel all-gathers of an FP8 linear's input and output "
                                                       "gradient move"),
    Field("min_compute_capability", unit="major x 10 + minor", required=False, positive=True,
          doc="the compute capability the recipe needs (Transformer Engine's check_recipe_support)"),
    Field("below_compute_capability", unit="major x 10 + minor", required=False, positive=True,
          doc="the first compute capability the recipe no longer runs on")))
RECIPES = Schema("fp8.toml", "costgraph.training", entries=RECIPE)


@dataclass(frozen=True)
class Recipe:
    """An FP8 recipe of ``fp8.toml`` (field meanings in the file's header)."""

    name: str
    description: str
    source: str
    scaling: str
    columnwise: str
    data_bytes: sympy.Integer
    scale_bytes: sympy.Integer
    amax_history: sympy.Integer
    meta_bytes: sympy.Integer
    forward_quantizers: sympy.Integer
    backward_quantizers: sympy.Integer
    block: sympy.Integer
    weight_block_dims: sympy.Integer
    scale_pad_inner: sympy.Integer
    scale_pad_outer: sympy.Integer
    fp8_dpa: str = "none"           # FP8 dot-product attention (costgraph.training.fp8_options.DPA)
    wgrad_override: bool = False    # takes fp8_wgrad = False (Megatron: the delayed recipe only)
    weight_cache: str = "step"      # how long the quantized weight lives (WEIGHT_CACHE)
    tp_all_gather: str = "activation"   # the SP all-gathers of an FP8 linear (TP_ALL_GATHER)
    min_compute_capability: int | None = None     # the GPUs it runs on: [min, below) (fp8.check_supported)
    below_compute_capability: int | None = None


def _recipe(name: str, e) -> Recipe:
    for key, allowed in (("scaling", SCALINGS), ("columnwise", COLUMNWISE)):
        if e[key] not in allowed:
            raise e.error(f"{key} must be one of {', '.join(allowed)}", key)
    if e["scaling"] != "tensor" and (e["block"] == 0 or e["scale_pad_inner"] == 0 or e["scale_pad_outer"] == 0):
        raise e.error("block scaling needs block, scale_pad_inner and scale_pad_outer > 0", "block")
    cache = e.get("weight_cache") or "step"
    if cache not in WEIGHT_CACHE:
        raise e.error("weight_cache must be one of " + ", ".join(WEIGHT_CACHE), "weight_cache")
    gather = e.get("tp_all_gather") or "activation"
    if gather not in TP_ALL_GATHER:
        raise e.error("tp_all_gather must be one of " + ", ".join(TP_ALL_GATHER), "tp_all_gather")
    dpa = e.get("fp8_dpa") or "none"
    if dpa not in DPA:
        raise e.error("fp8_dpa must be one of " + ", ".join(DPA), "fp8_dpa")
    return Recipe(name, e["description"], e["source"], e["scaling"], e["columnwise"],
                  **{k: sympy.Integer(e[k]) for k in RECIPE_NUMBERS}, fp8_dpa=dpa,
                  wgrad_override=bool(e.get("wgrad_override") or False), weight_cache=cache, tp_all_gather=gather,
                  min_compute_capability=e.get("min_compute_capability"),
                  below_compute_capability=e.get("below_compute_capability"))


@cache
def _recipes(data: datafiles.DataSet) -> dict[str, Recipe]:
    return {name: _recipe(name, e) for name, e in data.entries.items()}


def recipes() -> dict[str, Recipe]:
    """The FP8 recipes of ``fp8.toml`` (:mod:`costgraph.training.fp8`), by name, in file order."""
    return _recipes(datafiles.load(RECIPES))


def recipe(name: str) -> Recipe:
    """The recipe called ``name``. Raises CostgraphValueError for an unknown one."""
    table = recipes()
    if name not in table:
        raise CostgraphValueError(f"unknown FP8 recipe {name!r}", hint="one of: " + ", ".join(table))
    return table[name]


