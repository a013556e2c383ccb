"""A parallel layout and its training settings: :class:`Layout`.

The degrees of parallelism (``t`` tensor, ``p`` pipeline, ``c`` context,
``e`` expert, ``etp`` expert tensor, ``d`` data, ``hsdp``), the pipeline
schedule, and the settings the training analyses read (ZeRO stage,
recomputation, attention kernel, precision policy, optimizer, LoRA). Names
and defaults come from :mod:`costgraph.choices`; :meth:`Layout.filled`
checks them and fills the derived ones. Who holds which part of each tensor
under a layout is :func:`costgraph.parallel.placement.placement`.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from .. import choices
from ..arguments import named_choice
from ..errors import CostgraphValueError
from ..layout_options import LayoutOptions
from ..option_fields import is_count, keywords_checked, specs
from ..engine.recompute import check_recompute
from ..engine.symbols import dim
from .schedules import check_schedule

# The data-parallel degree when none is given (the same symbol as
# costgraph.training.states.DP). Not ``d``: Llama-style models already use
# ``d`` for the head dimension. N_d is the ZeRO paper's name.
DP = dim(choices.DP_SYMBOL)


#: the most devices a layout may have (as the planner's search)
MAX_DEVICES = 10**6

@keywords_checked()
@dataclass
class Layout(LayoutOptions):
    """A parallel layout and training settings (defaults filled in).

    ``t`` TP, ``p`` PP, ``c`` CP, ``e`` EP, ``etp`` expert TP (1 or ``t``),
    ``d`` DP (from ``gpus``, or the symbol ``N_d``), ``sp`` sequence
    parallelism, ``zero`` ZeRO stage, ``m`` micro-batches per step (default
    ``p``), ``schedule`` and ``v`` (virtual stages, interleaved schedule),
    ``recompute``, ``attention``, ``policy``, ``optimizer``, ``precision``
    (activation bytes), ``hsdp`` (HSDP group size), ``loss`` (count what the
    cross-entropy holds at the loss's peak), ``cross_entropy`` (the cross-entropy implementation: the bytes it holds at the loss's
    peak and the bytes its kernels move, :mod:`costgraph.training.cross_entropy`), ``gpus``; ``lora_rank``, ``lora_targets``, ``lora_dropout``
    (LoRA adapters on the named linears, the base frozen:
    :mod:`costgraph.training.lora`) and ``quantization`` (QLoRA: the frozen
    base in ``nf4``, ``nf4-double`` or ``int8``); ``recompute_modules``,
    ``recompute_num_layers``, ``recompute_method``, ``recompute_frequency``
    (the policy in detail: :mod:`costgraph.engine.recompute`). Pipeline details
    (:mod:`costgraph.parallel.layer_split`, :mod:`costgraph.parallel.schedules`):
    ``vp_group`` (interleaved micro-batch group g, default ``p``),
    ``first_stage_layers``/``last_stage_layers`` (Megatron's uneven split),
    ``account_embedding``/``account_loss`` (count them as layers) and
    ``schedule_accounting`` (``megatron-schedule`` or ``korthikanti``); FP8 options
    (:mod:`costgraph.training.fp8_options`): ``fp8_attention`` (TE's FP8 dot-product attention) and
    ``fp8_wgrad`` (FP8 weight-gradient GEMMs); ``recompute_count`` (how the hardware FLOPs count a
    re-run: ``rerun`` or ``korthikanti-eq8``); ``pipeline_layout``
    (Megatron's ``--pipeline-model-parallel-layout`` text, e.g. ``Et*4|(t*4|)*14tmL``: each
    stage's layers, embedding, MTP and loss; it sets ``p`` when ``p`` is 1, ``v`` = stages / ``p``,
    and the interleaved schedule when ``v > 1``; :mod:`costgraph.parallel.pipeline_layout`); ``tp_replicated``: names of head-count
    dimensions (``kv``) with fewer heads than ``t``, which TP replicates as Megatron-LM
    does (each rank holds one head; filled from the values by
    :func:`costgraph.parallel.tensor.kv_replication`)."""

    # the fields are LayoutOptions's (costgraph.layout_options): declared once with their flag, help, default
    # and the planner's search domain; an unknown keyword is refused with a did-you-mean hint

    def resolved(self, name: str) -> object:
        """The value of setting ``name`` the analyses use: its own, or for ``auto`` (the default of a
        setting that applies only with others: ``attention_kernel``, ``zero3_gathered``) what it stands
        for where it applies, None where it does not (:meth:`costgraph.choices.Choice.resolve`)."""
        choice = specs(type(self))[name][1].choices
        value = getattr(self, name)
        return choice.resolve(value, self) if isinstance(choice, choices.Choice) else value

    def filled(self) -> "Layout":
        """Check the settings and fill the derived ones (``d``, ``m``, ``etp``): a new layout.

        The same settings (the same fields, of the same types) give the same layout: it is filled
        once and copied after (:data:`_FILLED`; the calculator page's step times fill one layout
        ~16,000 times).

        Raises
        ------
        CostgraphValueError
            An unknown name, a degree that is not a positive whole number, or
            ``gpus`` not a multiple of ``t·p·c``.
        """
        try:
            values = tuple(self.__dict__.values())
            key = (type(self), tuple(self.__dict__), values, tuple(map(type, values)))
            hash(key)
        except TypeError:   # a field holding a list or a dict: filled every time
            return self._filled()
        done = _FILLED.get(key)
        if done is None:
            done = self._filled()   # errors are not kept: raised again each time
            if len(_FILLED) >= _FILLED_SIZE:
                del _FILLED[next(iter(_FILLED))]   # the oldest
            _FILLED[key] = done
        return _copy(done)

    def _filled(self) -> "Layout":
        """:meth:`filled` without its cache."""
        out = type(self)(**self.__dict__)   # a subclass's own fields kept (and checked)
        for name in _COUNTS:   # a count given as text or a whole float: read as the command line reads it
            v = getattr(out, name)
            if isinstance(v, (str, float)) and not isinstance(v, bool):
                from ..arguments import token_count

                setattr(out, name, token_count(v, _FLAGS.get(name, name)))
        if out.precision is None:   # the activations follow the policy (the one rule: choices.activation_precision)
            out.precision = choices.activation_precision(out.policy)
        for name in ("t", "p", "c", "e", "v"):
            _degree(getattr(out, name), name)
        if out.pipeline_layout is not None:   # it may set p, v and the schedule: before d and m
            _apply_pipeline_layout(out)
        for name in ("sp", "loss", "lora_dropout", "fp8_attention", "fp8_wgrad"):
            if not isinstance(getattr(out, name), bool):
                raise CostgraphValueError(f"{name} must be true or false, got {getattr(out, name)!r}",
                                          hint=f"{name}=True or {name}=False (a bool)")
        if out.m is not None:
            _degree(out.m, "m", "m (micro-batches per step)")
        if out.hsdp is not None:
            _degree(out.hsdp, "hsdp")
        if out.lora_rank is not None:
            _degree(out.lora_rank, "lora_rank")
        if isinstance(out.zero, bool) or not isinstance(out.zero, int):
            raise CostgraphValueError(f"zero must be a stage 0-3, got {out.zero!r}", hint="0, 1, 2 or 3 (an int)")
        if out.zero not in choices.ZERO_STAGE.values:
            raise CostgraphValueError(f"ZeRO stage {out.zero!r} does not exist", hint="0, 1, 2 or 3")
        _check_choices(out)
        if out.hsdp is not None and out.zero == 0:
            raise CostgraphValueError("HSDP shards ZeRO's states within groups: it needs ZeRO 1, 2 or 3",
                                      hint="add --zero 3 (FSDP2's HSDP shards all three), or leave out --hsdp")
        if out.schedule != "interleaved" and out.v != 1:
            raise CostgraphValueError("virtual stages (v) need the interleaved schedule", hint="--schedule interleaved")
        if out.sp and out.t == 1:
            raise CostgraphValueError("sequence parallelism splits along s the regions tensor parallelism replicates: "
                                      "it needs t > 1", hint="add --tp T")
        if not isinstance(out.tp_replicated, tuple) or not all(isinstance(n, str) for n in out.tp_replicated):
            raise CostgraphValueError(f"tp_replicated names dimensions (a tuple of names), got {out.tp_replicated!r}",
                                      hint="e.g. tp_replicated=('kv',); left out, it is filled from the values")
        if out.gpus is not None:
            _degree(out.gpus, "gpus")
            if out.gpus > MAX_DEVICES:
                raise CostgraphValueError(f"gpus is over {MAX_DEVICES:,}: at most {MAX_DEVICES:,} devices",
                                          hint="the largest clusters trained on have about 10^5")
            per = out.t * out.p * out.c
            if isinstance(per, int) and out.gpus % per:
                raise CostgraphValueError(f"{out.gpus} GPUs do not divide into t·p·c = {per}",
                                          hint="gpus = t × p × c × d for a whole data-parallel degree d")
            out.d = out.gpus // per if isinstance(per, int) else sympy.Integer(out.gpus) / per
        if out.d is None:
            out.d = DP
        if out.m is None:   # one micro-batch per stage; DualPipe's least, 2p (parallel.schedules.check_schedule)
            out.m = 2 * out.p if out.schedule == "dualpipe" else out.p
        if out.etp is None:
            out.etp = 1
        _expert_placement(out)
        if out.quantization is not None and out.lora_rank is None:
            raise CostgraphValueError("a quantized base is frozen: quantization needs LoRA adapters",
                                      hint="add --lora R (QLoRA)")
        if out.etp not in (1, out.t):
            raise CostgraphValueError("expert tensor parallelism is 1 or t", hint="--etp 1 (default) or --etp T")
        if isinstance(out.e, int) and isinstance(out.d, int) and isinstance(out.t, int) and isinstance(out.c, int) \
                and (out.d * out.c * out.t) % (out.e * out.etp):
            raise CostgraphValueError(f"expert parallelism e·etp = {out.e * out.etp} must divide d·c·t = "
                                      f"{out.d * out.c * out.t}", hint="experts are spread over data-parallel ranks")
        check_recompute(out)   # the recompute fields, as Megatron checks them
        _check_pipeline(out)
        _check_offload(out)
        return out


#: filled layouts (:meth:`Layout.filled`) by their class and fields (name, type, value): bounded, the
#: oldest dropped first; a value, never a graph, so nothing of a model is held here
_FILLED: dict = {}
_FILLED_SIZE = 4096


def _copy(layout: "Layout") -> "Layout":
    """A shallow copy of ``layout`` (its fields' values are immutable where it is cached)."""
    out = object.__new__(type(layout))
    out.__dict__.update(layout.__dict__)
    return out


def _check_choices(out: "Layout") -> None:
    """Every field declared with a :class:`~costgraph.choices.Choice` (its ``option(..., choices=...)``
    on :class:`~costgraph.layout_options.LayoutOptions`, or a subclass's) holds one of its values:
    ``unknown FIELD 'VALUE'``, the values as the hint. A bool is refused where the values are names or
    stages (``True == 1``); the message is the one every command gives (:func:`costgraph.arguments.named_choice`:
    ``unknown link_rate 'fast' (link bandwidth convention)``). The ZeRO stage has its own message (:meth:`Layout.filled`, checked before).
    A value given to a setting that applies only with others (``Choice.applies``; its default ``auto``)
    is refused where they are not (``--attention-kernel fa2`` under ``--attention eager``), naming both."""
    fields = specs(type(out))
    for name, (_, spec) in fields.items():
        choice = spec.choices
        if name == "zero" or not isinstance(choice, choices.Choice):
            continue
        named_choice(getattr(out, name), choice, name)   # the one refusal (costgraph.arguments.named_choice)
    for name, (_, spec) in fields.items():   # every value known to be its choice's: which apply
        choice = spec.choices
        if isinstance(choice, choices.Choice) and choice.applies and getattr(out, name) != "auto" \
                and not choice.applies_to(out):
            _refuse_inapplicable(out, fields, name, choice)


def _refuse_inapplicable(out: "Layout", fields: dict, name: str, choice) -> None:
    """Refuse setting ``name``, given where ``choice.applies`` does not hold (:func:`_check_choices`)."""
    flag = fields[name][1].flag or name
    field, values = next((f, vs) for f, vs in choice.applies if getattr(out, f) not in vs)
    other = fields[field][1].flag or field
    wanted = " or ".join(f"{other} {v}" for v in values)
    raise CostgraphValueError(f"{flag} {getattr(out, name)} applies only with {wanted}; this layout has "
                              f"{other} {getattr(out, field)}",
                              hint=f"add {wanted}, or leave out {flag} (auto: {choice.meaning('auto')})")


#: the most model chunks per device (a chunk holds at least one layer; no published model has 1024 layers)
MAX_VIRTUAL_STAGES = 1024


def _check_pipeline(out: "Layout") -> None:
    """The pipeline split and schedule fields (Megatron's rules where it has them)."""
    if isinstance(out.p, int) and out.p > MAX_VIRTUAL_STAGES:   # each stage analysed: 68,306 ran for minutes
        raise CostgraphValueError(f"p (--pp) is {out.p:,}: at most {MAX_VIRTUAL_STAGES:,} pipeline stages (each "
                                  "holds at least one layer; no published model has 1,024 layers)",
                                  hint="p divides the layers into stages: at most the layer count")
    if isinstance(out.v, int) and out.v > MAX_VIRTUAL_STAGES:
        raise CostgraphValueError(f"v (--virtual-stages) is {out.v}: at most {MAX_VIRTUAL_STAGES} model chunks per "
                                  "device (each holds at least one layer)", hint="v divides the layers per stage")
    for name in ("account_embedding", "account_loss"):
        if not isinstance(getattr(out, name), bool):
            raise CostgraphValueError(f"{name} must be true or false, got {getattr(out, name)!r}",
                                      hint=f"{name}=True or {name}=False (a bool)")
    for name in ("first_stage_layers", "last_stage_layers"):
        n = getattr(out, name)
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise CostgraphValueError(f"{name} ({_FLAGS[name]}) must be a whole number ≥ 0, got {n!r}",
                                      hint=f"the layers of that stage, e.g. {_FLAGS[name]} 2")
    uneven = out.first_stage_layers is not None or out.last_stage_layers is not None
    if uneven and (out.account_embedding or out.account_loss):
        raise CostgraphValueError("the first/last stages' own layer counts cannot be combined with counting the "
                                  "embedding or loss as a layer (Megatron-LM get_num_layers_to_build)",
                                  hint="give --decoder-first/last-pipeline-num-layers, or the --account-for-* options")
    if (uneven or out.account_embedding or out.account_loss) and out.p == 1:
        raise CostgraphValueError("a pipeline layer split needs pipeline stages", hint="add --pp P (P > 1)")
    if out.vp_group is not None:
        _degree(out.vp_group, "vp_group")
        if out.schedule != "interleaved":
            raise CostgraphValueError("the micro-batch group per virtual stage needs the interleaved schedule",
                                      hint="--schedule interleaved")
    check_schedule(out.p, out.m, out.schedule, out.v, out.vp_group)
def _apply_pipeline_layout(out: "Layout") -> None:
    """Parse ``pipeline_layout`` and make ``p``, ``v`` and the schedule agree with it, as
    Megatron-LM's arguments.py does (``virtual_pipeline_model_parallel_size = stages // pp``):
    ``p`` 1 takes one stage per rank (or stages / ``v`` with ``v`` given), the default 1F1B
    becomes interleaved when ``v > 1``. Refuses, naming both, a ``p`` or ``v`` the stages
    do not match, a schedule other than 1F1B/interleaved with ``v > 1``, and Megatron's
    first/last and account-for options beside it (TransformerConfig: "cannot be set with
    other pipeline layout arguments")."""
    from .pipeline_layout import FLAG, parse_pipeline_layout

    layout = parse_pipeline_layout(out.pipeline_layout)
    n = len(layout.stages)
    if not isinstance(out.p, int):
        raise CostgraphValueError(f"{FLAG} places layers on numbered ranks: it needs a numeric --pp",
                                  hint=f"--pp a divisor of its {n} stages")
    if out.first_stage_layers is not None or out.last_stage_layers is not None or out.account_embedding \
            or out.account_loss:
        raise CostgraphValueError(f"{FLAG} gives every stage's layers: it cannot be combined with "
                                  "--decoder-first/last-pipeline-num-layers or --account-for-*-in-pipeline-split "
                                  "(Megatron-LM TransformerConfig)", hint=f"drop those, or drop {FLAG}")
    given_v = out.v if out.v != 1 else None
    if out.p == 1 and n > 1:
        out.p = n // given_v if given_v and n % given_v == 0 else n
        per = out.t * out.p * out.c
        if isinstance(out.gpus, int) and isinstance(per, int) and out.gpus % per:
            raise CostgraphValueError(f"{FLAG} lists {n} stages: pp {out.p} (one stage per rank), and {out.gpus} "
                                      f"GPUs do not divide into t·p·c = {per}",
                                      hint="--pp P for P ranks holding stages / P model chunks each")
    bound = layout.with_pp(out.p, given_v)
    out.v = bound.vp
    if out.v > 1 and out.schedule == choices.SCHEDULE.default:
        out.schedule = "interleaved"
    if out.v > 1 and out.schedule != "interleaved":
        raise CostgraphValueError(f"{FLAG} lists {n} stages on --pp {out.p}: {out.v} model chunks per rank, which "
                                  f"need the interleaved schedule, not --schedule {out.schedule}",
                                  hint=f"--schedule interleaved, or a layout of {out.p} stages")


def _expert_placement(out: "Layout") -> None:
    """Check and normalize ``rank_order``, ``domain_ranks``, ``ep_overlap`` and ``route_nodes``."""
    from .ranks import check_order

    out.rank_order = check_order(out.rank_order)
    if out.domain_ranks is not None:
        _degree(out.domain_ranks, "domain_ranks")
    if out.route_nodes is not None:
        _degree(out.route_nodes, "route_nodes")
    if out.ep_overlap not in choices.EP_OVERLAP.values:
        raise CostgraphValueError(f"unknown ep_overlap {out.ep_overlap!r}", hint=choices.EP_OVERLAP.hint())
    if out.overlap not in choices.OVERLAP.values:
        raise CostgraphValueError(f"unknown overlap {out.overlap!r}", hint=choices.OVERLAP.hint())
    from .ep_time import check_overlap

    check_overlap(out)


#: the command-line flag of each layout field that has one (errors name both: the API's field and the CLI's flag),
#: from the declarations (costgraph.layout_options)
_FLAGS = {name: s.flag for name, (_, s) in specs(LayoutOptions).items() if s.flag is not None}

#: the layout's count fields (Layout(t="2", gpus="1_024") read as --tp 2 --gpus 1024: arguments.token_count), the
#: declarations' counts (option_fields.is_count: as their flags read them)
_COUNTS = tuple(name for name, (_, s) in specs(LayoutOptions).items() if is_count(s))


def _degree(v, name, label=None):
    """Refuse ``v`` unless a positive whole number (or a positive symbol); ``label``: how the message names
    field ``name`` (default its name)."""
    if isinstance(v, bool) or not (isinstance(v, int) and v > 0 or isinstance(v, sympy.Expr) and v.is_positive):
        flag = f" ({_FLAGS[name]})" if name in _FLAGS else ""
        example = f"{_FLAGS[name]} 8" if name == "lora_rank" else f"{_FLAGS.get(name, name)} 2"
        raise CostgraphValueError(f"{label or name}{flag} must be a positive whole number, got {v!r}",
                                  hint=f"a whole number above 0, e.g. {example}")


def _check_offload(out: Layout) -> None:
    """Check the offload settings of ``out`` and make ``offload_activations`` an exact fraction
    (True 1; a decimal text as the CLI reads it, ``"0.5"``, 1/2; False, the default, stays False). DeepSpeed
    refuses parameter offload below ZeRO 3 (``offload_param``: "Valid only with stage 3"); ZeRO-Offload partitions
    the gradients it moves (ZeRO 2 or 3)."""
    for name, flag in (("offload_optimizer", "--offload-optimizer"), ("offload_params", "--offload-params")):
        if getattr(out, name) not in choices.OFFLOAD_DEVICE.values:
            raise CostgraphValueError(f"unknown {name} ({flag}) {getattr(out, name)!r}",
                                      hint=choices.OFFLOAD_DEVICE.hint())
    if out.offload_params != "none" and out.zero != 3:
        raise CostgraphValueError("parameter offload (--offload-params) needs ZeRO 3 (DeepSpeed's offload_param)",
                                  hint="add --zero 3")
    if out.offload_optimizer != "none" and out.zero < 2:
        raise CostgraphValueError("optimizer offload (--offload-optimizer) moves the partitioned gradients and "
                                  "optimizer states: it needs ZeRO 2 or 3", hint="add --zero 2 (ZeRO-Offload)")
    f = out.offload_activations
    if f is False:   # the default stays as it is
        return
    if isinstance(f, bool):
        f = sympy.Integer(int(f))
    elif isinstance(f, str):   # a decimal as the CLI reads it ("0.5": the planner's variant value, JSON-friendly)
        from ..arguments import parse_rational

        f = parse_rational(f, "offload_activations (--offload-activations)")
    elif isinstance(f, int) or isinstance(f, sympy.Rational):
        f = sympy.Rational(f)
    else:
        raise CostgraphValueError(f"offload_activations (--offload-activations) must be true, false or a "
                                  f"fraction in [0, 1], got {f!r}", hint="e.g. 0.5: half the layers' activations")
    if not 0 <= f <= 1:
        raise CostgraphValueError(f"offload_activations (--offload-activations) {f} is not a fraction in [0, 1]",
                                  hint="the share of the layers' activations offloaded: 0 (none) to 1 (all), e.g. 0.5")
    out.offload_activations = f
