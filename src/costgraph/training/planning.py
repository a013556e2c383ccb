"""What ``costgraph plan`` computes, as a function of the Python API
(:meth:`costgraph.Model.plan` calls :func:`plan_layouts`), and its typed result
:class:`PlanResult`: the parallel layouts that fit a device, fastest first
(:func:`costgraph.training.plan.plan`), with the days to train when the
training tokens are given. :meth:`PlanResult.to_dict` is the JSON of
``costgraph plan --format json`` (schema ``costgraph schema plan``);
:meth:`PlanResult.to_text` its text; ``_repr_html_``/``_repr_latex_`` a table in Jupyter, ``to_pandas()`` a DataFrame
(the text and the table drawn by :mod:`costgraph.export.present`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from .. import arguments
from ..choices import (CP_COMM_TYPE, DEFAULT_EFFICIENCY, EP_DISPATCHER, GEMM_RATE, LINK_RATE, MEMORY_CONVENTION, OVERLAP,
                       OVERLAP_CONTENTION, ZERO3_GATHERED)
from ..layout_options import GIVEN, given_settings
from ..errors import CostgraphValueError
from ..hints import them
from ..result_fields import document_json, key
from ..results import Tabular, renderer
from ..runtime_memory import DeviceMemory
from ..options import not_searched
from ..parallel.layout import MAX_DEVICES
from .plan_variants import check_words, degree_words
from .result_parts import Calibrated


@dataclass
class PlanResult(Tabular):
    """The ranked layouts of :func:`plan_layouts`.

    ``layouts``: one dict per layout, fastest first (``tp pp dp cp ep zero recompute sp
    micro_batch micro_batches memory_bytes step_seconds mfu``, and ``train_days`` with tokens);
    ``considered``: layouts searched; ``refused``: reason → count; ``capacity_bytes``,
    ``efficiency`` (a float), ``hardware`` (the preset's key); ``settings``: what the text's
    ``check one with`` line repeats (``hardware_name``, ``peak_flops``, ``attention``,
    ``precision``, ``optimizer``, ``memory`` as given, ``dropout``, ``tokens``, ``command``: the
    ``costgraph train`` words that name the model); ``reserve_bytes``: memory kept free per device;
    ``divisible``: layouts every divisibility rule allows (0: no layout divides evenly);
    ``least``: with no layout shown, the one needing the least memory (a row, screened)."""

    model: str
    gpus: int
    hardware: str
    global_batch: int
    capacity_bytes: int
    efficiency: float | None   # None: the per-kernel time model (settings["time_model"])
    considered: int
    refused: dict
    layouts: list
    settings: dict = field(default_factory=dict)
    reserve_bytes: int = 0
    divisible: int = 0
    least: dict | None = None
    calibration: Calibrated | None = None   # --efficiency-profile (training.calibration_profile.calibrated)
    searched: dict = field(default_factory=dict)
    pruned: dict = field(default_factory=dict)
    #: what the options given change nothing of, or what they assume (:func:`_warnings`); ``[]``: none, as train's
    warnings: list = field(default_factory=list)
    device_memory: DeviceMemory | None = None   # where capacity_bytes comes from (runtime_memory.device_memory)
    #: ``--compare``: the given layout against the first row (:class:`costgraph.training.plan_compare.Comparison`)
    comparison: object = None

    @property
    def verdict(self) -> str:
        """``fits`` (layouts shown), ``none fits``, or ``no layout divides evenly``."""
        return "fits" if self.layouts else "none fits" if self.divisible else "no layout divides evenly"

    def check_command(self, row: dict | None = None) -> str | None:
        """The ``costgraph train`` command that gives ``row``'s figures (default: the first
        layout's); None with no layout."""
        row = row if row is not None else (self.layouts[0] if self.layouts else None)
        if row is None:
            return None
        st = self.settings
        words = [st.get("command") or f"costgraph train {self.model}", f"--gpus {self.gpus}", *degree_words(row)]
        words += _split_words(row)
        if st.get("pipeline_layout"):   # Megatron's layout text (plan --pipeline-layout): train takes p and v with it
            import shlex

            words.append(f"--pipeline-layout {shlex.quote(st['pipeline_layout'])}")
        options = row.get("options") or {}
        words += check_words(options)   # the row's variant (costgraph.training.plan_variants)
        words += [f"--set b={row['micro_batch']}", f"--micro-batches {row['micro_batches']}",
                  f"--hardware {self.hardware}", f"--attention {st['attention']}",
                  f"--precision {options.get('policy', st['precision'])}", f"--optimizer {st['optimizer']}"]
        if self.efficiency is not None:   # a flat efficiency; without one train runs the per-kernel model too
            words.append(f"--efficiency {st.get('efficiency_text') or self.efficiency}")
        words += [f"--overlap {st['overlap']}"] if st.get("overlap", OVERLAP.default) not in (None, OVERLAP.default) else []
        words += _given_words(st, row)   # the given settings away from their defaults (layout_options.GIVEN)
        words += [f"--memory {st['memory']}"] if st.get("memory") else []
        words += [f"--reserve {st['reserve']}"] if st.get("reserve") is not None else []
        words += [f"--memory-convention {st['memory_convention']}"] \
            if st.get("memory_convention") not in (None, MEMORY_CONVENTION.default) else []
        words += [f"--efficiency-profile {st['profile']}"] if st.get("profile") else []
        return " ".join(words)

    #: the JSON document (``costgraph plan --format json``, schema ``costgraph schema plan``): each key's
    #: source, unit and label, in the document's order (:func:`costgraph.result_fields.document_json`)
    DOCUMENT: ClassVar[tuple] = (
        key("model"), key("gpus", "devices"), key("hardware"), key("global_batch", "sequences"),
        key("capacity_bytes", "bytes", label="device memory"),
        key("capacity_from", label="which figure capacity_bytes is", omit_none=True), key("efficiency", "fraction"),
        key("time_model"), key("considered", "layouts"), key("refused", "layouts", label="refused, by reason"),
        key("reserve_bytes", "bytes", label="memory kept free"), key("link_rate", label="links timed at (--link-rate)"),
        key("ep_dispatcher", label="the EP dispatch's kernels (--ep-dispatcher)"),
        key("cp_comm_type", label="the CP communication every row was timed with (--cp-comm-type)"),
        key("gemm_rate", label="the per-kernel model's GEMM rate every row was timed at (--gemm-rate)"),
        key("overlap_contention", label="the compute's slowdown beside hidden collectives every row was timed with "
                                        "(--overlap-contention)"),
        key("zero3_gathered", label="what every ZeRO-3 row holds gathered beside the shards (--zero3-gathered)"),
        key("verdict"),
        key("least_memory", source="least", label="the layout needing the least memory"),
        key("check", source="check_command", label="check one with"), key("searched", write="lists"),
        key("not_searched"), key("pruned", "layouts"), key("layouts"), key("calibration"),
        key("warnings"),
        key("comparison", omit_none=True, write="comparison", label="--compare: the given layout against the first row"))

    @property
    def link_rate(self) -> str:
        """The link-rate convention every row's collectives were timed at (:data:`costgraph.choices.LINK_RATE`)."""
        return self.settings.get("link_rate", LINK_RATE.default)

    @property
    def ep_dispatcher(self) -> str:
        """The EP dispatcher every row's all-to-all was timed with (:data:`costgraph.choices.EP_DISPATCHER`)."""
        return self.settings.get("ep_dispatcher", EP_DISPATCHER.default)

    @property
    def cp_comm_type(self) -> str:
        """The CP communication every row was timed with (:data:`costgraph.choices.CP_COMM_TYPE`), as train's JSON
        ``plan.cp_comm_type``."""
        return self.settings.get("cp_comm_type") or CP_COMM_TYPE.default

    @property
    def gemm_rate(self) -> str:
        """The GEMM rate of the per-kernel time model every row was timed at (:data:`costgraph.choices.GEMM_RATE`),
        as train's JSON ``step.gemm_rate``."""
        return self.settings.get("gemm_rate") or GEMM_RATE.default

    @property
    def overlap_contention(self) -> str:
        """The overlap contention convention every row was timed with (:data:`costgraph.choices.OVERLAP_CONTENTION`),
        as train's JSON ``step.overlap_contention``."""
        return self.settings.get("overlap_contention") or OVERLAP_CONTENTION.default

    @property
    def zero3_gathered(self) -> str:
        """What every ZeRO-3 row holds gathered beside the shards (:data:`costgraph.choices.ZERO3_GATHERED`: ``auto``,
        ``largest`` or the framework's ``fsdp2``), passed to the ZeRO-3 rows only
        (:func:`costgraph.layout_options.given_where_applies`), as train's JSON states it of a layout."""
        return self.settings.get("zero3_gathered") or ZERO3_GATHERED.default

    @property
    def capacity_from(self) -> str | None:
        """Which figure :attr:`capacity_bytes` is: the preset's under its memory convention, with the data file's
        entry and its source (:func:`costgraph.runtime_memory.device_memory`), or ``--memory``; None where not
        known (a result built by hand)."""
        return None if self.device_memory is None else self.device_memory.source

    @property
    def time_model(self) -> str:
        """The step-time model: ``flat`` (an efficiency) or the per-kernel model's name."""
        return self.settings.get("time_model", "flat")

    def to_dict(self) -> dict:
        """The document ``costgraph plan --format json`` prints (JSON values only), generated from
        :attr:`DOCUMENT`."""
        return document_json(self, {"lists": lambda _, v: {k: list(x) for k, x in v.items()},
                                    "comparison": lambda _, v: v.to_json()})

    def not_searched(self) -> dict:
        """Option → why it is not searched (:func:`costgraph.options.not_searched`), less those searched here
        (the variants ``--allow-fp8``, ``--allow-offload``, ``--exhaustive`` turn on)."""
        from ..options import ACROSS_GROUPS, BY_FIELD

        groups = {BY_FIELD[k].extra.get("group") for k in self.searched
                  if k in BY_FIELD and BY_FIELD[k].kind == "variant"}
        return {k: why for k, why in not_searched().items() if k not in self.searched} | (
            {"variant combinations": ACROSS_GROUPS} if len(groups) > 1 else {})

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text."""
        import json

        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        """The text ``costgraph plan`` prints: a table of the layouts, the refusals, and the
        ``costgraph train`` line to check one (:func:`costgraph.export.plan_report.to_text`)."""
        return renderer().to_text(self)


def _split_words(row: dict) -> list[str]:
    """The check command's words for a row's pipeline layer split (Megatron's flags)."""
    words = []
    if row.get("first_stage_layers") is not None:
        words.append(f"--decoder-first-pipeline-num-layers {row['first_stage_layers']}")
    if row.get("last_stage_layers") is not None:
        words.append(f"--decoder-last-pipeline-num-layers {row['last_stage_layers']}")
    words += ["--account-for-embedding-in-pipeline-split"] if row.get("account_embedding") else []
    words += ["--account-for-loss-in-pipeline-split"] if row.get("account_loss") else []
    return words


#: the layout settings plan passes to every row as given (never searched): into plan() and its settings
def _given_words(st: dict, row: dict) -> list[str]:
    """``train``'s flags of the given settings (:data:`costgraph.layout_options.GIVEN`) that are not their defaults
    and apply to ``row`` (:func:`costgraph.layout_options.given_where_applies`: ``--zero3-gathered`` at ZeRO 3), in
    their declaration order, as the check command writes them."""
    from ..layout_options import LayoutOptions, given_where_applies
    from ..option_fields import specs

    fields, held = specs(LayoutOptions), given_settings({k: st.get(k) for k in GIVEN})
    held = given_where_applies({**held, "zero": row["zero"], "attention": st["attention"]})
    return [f"{fields[k][1].flag} {held[k]}" for k in GIVEN if held[k] != fields[k][0].default]


def plan_layouts(model, values, options=None, **settings) -> PlanResult:
    """The layouts of ``model`` (a :class:`costgraph.Model`) that fit, fastest first
    (:func:`costgraph.training.plan.plan`), as ``costgraph plan`` checks and shows them.

    ``values``: every dimension's value (symbol → int; ``b`` is replaced by each candidate
    micro-batch); ``options``: a :class:`~costgraph.train_options.PlanOptions`, ``settings`` its fields
    replaced by keyword (:func:`costgraph.option_fields.resolve`; ``gpus``, ``hardware`` and
    ``global_batch`` required). The options: ``hardware``: a preset name or
    :class:`~costgraph.hardware.Hardware`; ``tokens``: training tokens (adds ``train_days`` to
    each layout); ``efficiency``: fraction of the peak (default 1/2); ``memory``: device bytes or
    a size (``"80GB"``; default the preset's); numbers as ints, floats or decimal text;
    ``reserve``: memory kept free per device, a fraction or a size (default
    :data:`costgraph.choices.DEFAULT_RESERVE`, :func:`costgraph.training.fit.reserve_bytes`);
    ``command``: the ``costgraph train`` words naming the model for the ``check`` command
    (default: the model's name and every value as ``--set``); ``efficiency_profile``: a calibration
    profile (a path or a :class:`~costgraph.training.calibration.Profile`) fitted on ``hardware``: its
    factors multiply every layout's step parts, its memory reserve is the default ``reserve``;
    ``overlap`` (:data:`costgraph.choices.OVERLAP`) and the given settings (:data:`costgraph.layout_options.GIVEN`,
    ``cross_entropy`` ... ``gemm_rate``; in the JSON too): in the check command if not their defaults,
    ``pipeline_layout``, ``allow_fp8``, ``allow_offload``, ``exhaustive``: as :func:`costgraph.training.plan.plan`
    takes them (the check command carries the layout text and a loss other than the default); ``compare``: :func:`_compared`.

    Raises
    ------
    CostgraphValueError
        No values, a count that is not positive, more than 10⁶ devices, an efficiency outside (0, 1], a dimension without a value, an unknown preset."""
    from .plan import plan

    from ..option_fields import check, resolve
    from ..train_options import PlanOptions

    o = resolve(PlanOptions, options, settings, "plan")[0]
    if values is None:
        raise CostgraphValueError("plan needs the model's sizes", hint="give --config NAME or --set h=... l=... "
                                                                        "(in Python: values=model.values(\"NAME\"))")
    values = arguments.model_values(model, values)
    check(o)   # each option's check, declared on its field (costgraph.train_options)
    gpus, hardware, global_batch, tokens, efficiency, memory = (o.gpus, o.hardware, o.global_batch, o.tokens,
                                                                o.efficiency, o.memory)
    precision, optimizer, attention, top, reserve, command = o.precision, o.optimizer, o.attention, o.top, o.reserve, o.command
    overlap = OVERLAP.default if o.overlap is None else o.overlap
    efficiency_profile, pipeline_layout = o.efficiency_profile, o.pipeline_layout
    if gpus > MAX_DEVICES:
        raise CostgraphValueError(f"--gpus {gpus:,}: the planner searches up to 1,000,000 devices", hint="give fewer")
    hw, capacity = _device(hardware, memory, precision, o.memory_convention)
    eff, kernels = _rate(hw, precision, efficiency)
    free = sorted(d.name for d in model.graph.dims.values()
                  if d.derived is None and d.symbol not in values and d.name != "b")
    if free:
        raise CostgraphValueError(f"no value for {', '.join(free)}", hint=f"give {them(free)} with --set or --config")
    profile, factors, calibration = _calibration(efficiency_profile, hw, eff, reserve, kernels)
    held, reserve_of = _reserve(reserve, profile, hw, capacity, memory is not None, o.memory_convention)
    if reserve_of is not None:   # train's default: the capacity CUDA reports, less the named runtime parts
        capacity = reserve_of.capacity
    result = plan(model, values, gpus=gpus, hardware=hw, global_batch=global_batch, capacity=capacity,
                  efficiency=eff, attention=attention, policy=precision, optimizer=optimizer, top=top, reserve=held,
                  reserve_of=reserve_of, factors=factors, overlap=overlap, pipeline_layout=pipeline_layout,
                  allow_fp8=o.allow_fp8, allow_offload=o.allow_offload, exhaustive=o.exhaustive,
                  **{k: getattr(o, k) for k in GIVEN})
    tokens = arguments.rational(tokens, "--tokens")
    seq = int(model.graph.dim_expr("s").xreplace(values)) if "s" in model.graph.dims else 1
    rows = [c.as_dict() for c in result.layouts]
    for row in rows if tokens is not None else ():
        row["train_days"] = float(tokens / (global_batch * seq)) * row["step_seconds"] / 86400
    command = _default_command(model, values) if command is None else command
    settings = {"hardware_name": hw.name, "peak_flops": hw.peak_flops_bf16, "attention": attention,
                "precision": precision, "optimizer": optimizer, "memory": memory, "dropout": model.settings.dropout,
                "tokens": tokens, "command": command, "reserve": reserve, "overlap": overlap,
                **{k: getattr(o, k) for k in GIVEN}, "reserve_runtime": reserve_of is not None, "memory_convention": o.memory_convention,
                "pipeline_layout": pipeline_layout, "efficiency_text": None if kernels is not None else str(DEFAULT_EFFICIENCY if efficiency is None else efficiency),
                "time_model": "flat" if kernels is None else "kernels",
                "kernel_table": None if kernels is None else kernels.table.preset,
                "assumed": None if kernels is not None or efficiency is not None else
                f"no kernel table for {hw.key} (training/kernels.toml): the flat efficiency is assumed",
                "profile": None if profile is None else profile.source}
    least = None if result.least is None else result.least.as_dict()
    return _compared(model, values, PlanResult(model.name, gpus, hw.key, global_batch, capacity, None if eff is None else float(eff),
                     result.considered, result.refused, rows, settings, held, result.divisible, least, calibration,
                     result.searched, result.pruned, _warnings(model, o, hw),
                     _memory_from(hw, capacity if memory is not None else None, o.memory_convention)), o)


def _warnings(model, o, hw=None) -> list[str]:
    """What plan's options ``o`` change nothing of, or assume, as train says it: an EP option on a model without
    routed experts (:func:`costgraph.training.validity.expert_option_warnings`); ``--ep-dispatcher deepep`` on a
    preset ``hw`` without DeepEP's measured figures, NCCL's used for them
    (:func:`costgraph.hardware.dispatch_warnings`, the words of train's EP dispatch line); a model without a token
    head, the loss every row assumes (:func:`costgraph.training.cross_entropy.loss_warnings`); a preset without a
    ``contention.toml`` entry under ``--overlap-contention`` sm-share or measured, none counted
    (:func:`costgraph.training.contention.contention_warnings`, as train warns it); ``[]``: nothing."""
    from ..hardware import dispatch_warnings
    from ..parallel.layout import Layout
    from .cross_entropy import loss_warnings
    from .validity import expert_counts, expert_option_warnings

    out = expert_option_warnings(model.graph, Layout(ep_dispatcher=o.ep_dispatcher))
    if hw is not None and expert_counts(model.graph):
        out += dispatch_warnings(hw, o.ep_dispatcher, o.link_rate)
    from .contention import contention_warnings

    # a preset without a contention.toml entry (one device: no collective, nothing hidden)
    contention = contention_warnings(hw, o.overlap_contention or OVERLAP_CONTENTION.default) if o.gpus > 1 else []
    return out + loss_warnings(model.graph, o.cross_entropy) + contention


def _compared(model, values, result: PlanResult, o) -> PlanResult:
    """``result``, with ``o.compare`` (a :class:`~costgraph.parallel.layout.Layout`, or a dict of its keywords with
    ``b`` the micro-batch) set against its first row as its ``comparison``
    (:func:`costgraph.training.plan_compare.compare_layout`: its rank, the step's parts of both, their differences
    and the dominant cause)."""
    if o.compare is None:
        return result
    from .plan_compare import compare_layout

    result.comparison = compare_layout(model, values, result, o.compare, o)
    return result


class _RuntimeReserve:
    """Train's default reserve (``--reserve runtime``) per layout: :func:`costgraph.runtime_memory.training_reserve`
    of the row's parallel groups (NCCL's buffers for each degree above 1) on the preset, against the capacity
    CUDA reports (``capacity``). Called with a candidate row, it gives the bytes that row keeps free, as
    ``costgraph train`` computes them for the row's check command."""

    def __init__(self, hw, capacity: int, given: bool, convention: str | None = None):
        from ..runtime_memory import training_reserve

        self.hw, self.given, self.asked, self.convention = hw, given, capacity, convention
        base = training_reserve(hw, {}, capacity, given, convention)   # no group above 1: the least of any row
        self.capacity, self.least = base.capacity, base.bytes

    def __call__(self, c) -> int:
        from ..runtime_memory import parallel_groups, training_reserve

        groups = parallel_groups(c.tp, c.pp, c.cp, c.dp, c.ep)   # as train's (costgraph.training.api._groups)
        return training_reserve(self.hw, groups, self.asked, self.given, self.convention).bytes


def _reserve(reserve, profile, hw, capacity: int, given: bool, convention: str | None = None):
    """``(held, reserve_of)``: the bytes every row keeps free (the least of them under the runtime
    reserve: the screen's sound bound) and, for train's default ``runtime`` reserve, the per-row
    :class:`_RuntimeReserve` (None for a fraction, a size or a calibrated reserve)."""
    from ..choices import RUNTIME_RESERVE
    from .fit import reserve_bytes

    if reserve is None and profile is not None and profile.reserve is not None:
        return reserve_bytes(f"{profile.reserve.bytes}B" if profile.reserve.bytes else 0, capacity), None
    if reserve is None or reserve == RUNTIME_RESERVE:
        of = _RuntimeReserve(hw, capacity, given, convention)
        return of.least, of
    return reserve_bytes(reserve, capacity), None


def _device(hardware, memory, precision, convention=None):
    """``(hw, capacity)``: the preset and the device memory in bytes, as ``costgraph train`` reads it
    (:func:`costgraph.training.api._device`): ``memory`` floored, as --kv-memory (it wins: the user's own
    figure); else the preset's under the memory ``convention`` (:func:`costgraph.runtime_memory.device_memory`:
    ``cuda``, the default, what CUDA reports; ``nominal``, the printed figure). Raises CostgraphValueError
    for a precision policy whose FP8 recipe the preset's GPU cannot run, as train refuses it
    (:func:`costgraph.training.fp8.check_supported`), an unknown convention, or ``nominal`` with ``memory``."""
    from ..hardware import preset
    from .api import _device as train_device
    from .fp8 import check_supported

    hw = preset(hardware)
    check_supported(precision, hw)
    return hw, train_device(memory, hw, convention)[0]


def _memory_from(hw, given: int | None, convention) -> DeviceMemory:
    """Where the device memory of the plan comes from (:func:`costgraph.runtime_memory.device_memory`: what CUDA
    reports, or the printed figure where no ``[visible.NAME]`` entry gives it, said so; ``given``: the bytes of
    ``--memory``, convention ``given``)."""
    from ..runtime_memory import preset_capacity

    return DeviceMemory(given, "given", "--memory") if given is not None else preset_capacity(hw, False, convention)


def _rate(hw, precision, efficiency):
    """``(eff, kernels)``: the flat efficiency (a fraction in (0, 1], or None) and the per-kernel
    rate of the preset's kernel table (None unless no flat efficiency is given and the preset has
    one; neither: the flat default)."""
    eff = None if efficiency is None else arguments.rational(efficiency, "--efficiency")
    arguments.share(eff, "--efficiency", efficiency)
    from .plan import step_rate_of

    kernels = step_rate_of(hw, precision, eff)   # the per-kernel model when no flat efficiency is given
    if eff is None and kernels is None:
        eff = arguments.rational(DEFAULT_EFFICIENCY, "--efficiency")
    return eff, kernels


def _default_command(model, values) -> str:
    """The ``costgraph train`` words naming ``model`` with ``values`` as ``--set`` (the check command's head)."""
    return f"costgraph train {model.name} --set " + " ".join(
        f"{k}={int(v)}" for k, v in values.items() if str(k) != "b") + \
        ("" if model.settings.dropout else " --no-dropout") + f" --profile {model.settings.profile}"


def _calibration(source, hw, eff, reserve, kernels=None):
    """``(profile, factors, calibrated)`` of ``efficiency_profile`` (None: none), checked against
    the preset ``hw`` and the planner's rate (``kernels``, the per-kernel rate, else the flat
    ``efficiency`` ``eff``)."""
    if source is None:
        return None, None, None
    from .calibration_profile import calibrated, check
    from .calibration_file import load_profile
    from .steptime import Rate

    profile = load_profile(source)
    check(profile, hw.key, kernels if kernels is not None else Rate("efficiency", eff))
    return profile, profile.multipliers(), calibrated(profile, reserve=reserve is None)
