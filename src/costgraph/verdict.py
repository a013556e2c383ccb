"""``costgraph.fit``: does a model fit on the devices — training or serving — and, when it does
not, the next steps with numbers (``costgraph fit``; issue 20 item 3).

Nothing is estimated here: the verdict and each step are what the existing analyses answer.

* **train**: :meth:`costgraph.Model.train` on the layout (its fit verdict: the peak of the
  most-loaded device against the device memory less the reserve); the next steps are that
  verdict's ``changes`` (:func:`costgraph.training.fit.fit_changes`: a heavier recomputation, the
  next ZeRO stage, a smaller micro-batch, twice the TP or PP degree, twice the devices).
* **serve**: :meth:`costgraph.Model.infer` (weights + paged KV cache of ``batch`` sequences of
  ``prompt + generate`` tokens against the device memory less the reserve,
  :mod:`costgraph.inference.capacity`); the next steps are the same call again with one change:
  an FP8 KV cache, FP8 weights, twice the TP degree (up to ``gpus``), the largest batch that fits.

>>> import costgraph
>>> r = costgraph.fit(costgraph.load("gpt"), mode="serve", hardware="h100-sxm", gpus=1,
...                   values=costgraph.load("gpt").values("gpt2"), prompt=512, generate=512)
>>> r.fits, r.status
(True, 0)
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .errors import CostgraphValueError
from .result_fields import Part, Q, Table, json_fields, plain, quantity
from .results import Tabular

#: the modes of :func:`fit`
MODES = ("train", "serve")
#: the largest TP degree a serving step tries past --gpus (a scale-up domain: 64 ranks of an NVL72)
_SERVE_MAX_TP = 64
#: KV cache and weight dtypes a serving step tries when the setting is a 16-bit one
_SIXTEEN = ("bf16", "fp16")


@dataclass(frozen=True)
class Step(Part):
    """One change and what it gives: ``change`` (words), ``options`` (the ``costgraph fit`` flags
    that make it), ``before_bytes`` and ``after_bytes`` (per device, exact), ``fits``;
    ``host_bytes``: with CPU offload, the host memory of one node after the change (else None).
    A typed part (:class:`costgraph.result_fields.Part`): each field carries its unit."""

    change: str = quantity(label="the change")
    options: str = quantity(label="the costgraph fit flags that make it")
    before_bytes: int = quantity("bytes", label="per device before the change")
    after_bytes: int = quantity("bytes", label="per device after the change")
    fits: bool = quantity(label="it fits")
    host_bytes: int | None = quantity("bytes", label="host memory of one node after the change (CPU offload)",
                                      default=None)


@dataclass
class FitResult(Tabular):
    """The verdict of :func:`fit`.

    ``mode`` (``train``/``serve``), ``model``, ``hardware`` (a preset name or None), ``gpus``;
    ``fits``; ``need_bytes``: the peak per device (training: the most-loaded device; serving:
    weights + KV cache per device); ``capacity_bytes`` (the device) and ``usable_bytes`` (less the
    reserve); ``steps``: :class:`Step` s, those that fit first, then by bytes; ``settings``: what the
    verdict was computed for; ``warnings``. ``status``: the exit status (0 fits, 1 does not).
    Training with CPU offload: ``host_need_bytes`` (the host memory of one node,
    :mod:`costgraph.training.offload`) and ``host_capacity_bytes`` (a node's host memory:
    ``host_memory``, else the preset's; None when neither is known, and then not judged)."""

    mode: str = quantity(label="training or serving")
    model: str = quantity(label="the model")
    hardware: str | None = quantity(label="the preset (None: --memory alone)")
    gpus: int = quantity(label="devices")
    fits: bool = quantity(label="it fits")
    need_bytes: int = quantity("bytes", label="needed per device")
    capacity_bytes: int = quantity("bytes", label="device memory")
    usable_bytes: int = quantity("bytes", label="usable (less the reserve)")
    steps: list[Step] = quantity(label="the next steps (Step each)", default_factory=list)
    settings: dict = quantity(label="what the verdict was computed for", default_factory=dict)
    warnings: list[str] = quantity(label="warnings", default_factory=list)
    host_need_bytes: int | None = quantity("bytes", label="host memory per node (CPU offload)", default=None)
    host_capacity_bytes: int | None = quantity("bytes", label="host memory of a node", default=None)

    @property
    def status(self) -> int:
        """0 when it fits, 1 when it does not (``costgraph fit``'s exit status)."""
        return 0 if self.fits else 1

    def to_dict(self) -> dict:
        """The document ``costgraph fit --format json`` prints (bytes as exact ints): the fields by their JSON
        names (:func:`costgraph.result_fields.json_fields`; the steps as dicts), then ``status``."""
        return {**json_fields(self, lambda v, q: plain(v)), "status": self.status}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def _table(self) -> Table:
        """Jupyter (:class:`~costgraph.results.Tabular`): the verdict, the bytes, the next steps."""
        rows = [("fits", self.fits), ("needed per device", Q(self.need_bytes, "bytes")),
                ("device memory", Q(self.capacity_bytes, "bytes")), ("usable (less the reserve)",
                                                                     Q(self.usable_bytes, "bytes"))]
        if self.host_need_bytes is not None:
            rows.append(("host memory per node", Q(self.host_need_bytes, "bytes")))
        if self.host_capacity_bytes is not None:
            rows.append(("host memory of a node", Q(self.host_capacity_bytes, "bytes")))
        rows += [(f"try {s.options}", Q(s.after_bytes, "bytes" + (", fits" if s.fits else ""))) for s in self.steps]
        rows += [("warning", w) for w in self.warnings]
        return Table(f"{self.model}: {'training' if self.mode == 'train' else 'serving'} on {self.gpus} × "
                     f"{self.hardware or 'device'}", ("quantity", "value"), rows)

    def to_text(self) -> str:
        """The verdict, the bytes against the device, and the next steps (``try --kv fp8: 61.20 GiB → 45.10 GiB, fits``)."""
        where = f"{self.gpus} × {self.hardware}" if self.hardware else f"{self.gpus} device(s)"
        out = [f"{self.model}, {'training' if self.mode == 'train' else 'serving'} on {where}: "
               + ("fits" if self.fits else "does NOT fit"),
               f"  {'peak per device' if self.mode == 'train' else 'weights + KV cache per device'}: "
               f"{gib(self.need_bytes)} of {gib(self.usable_bytes)} usable "
               f"({gib(self.capacity_bytes)} less the reserve)"]
        if self.host_need_bytes is not None:
            out.append(f"  host memory per node (CPU offload): {gib(self.host_need_bytes)} of "
                       + (f"{gib(self.host_capacity_bytes)} ("
                          + ("fits" if self.host_need_bytes <= self.host_capacity_bytes else "does NOT fit") + ")"
                          if self.host_capacity_bytes is not None else "an unknown host memory (not judged: "
                                                                        "give --host-memory)"))
        out += [f"  {k}: {v}" for k, v in self.settings.items() if v is not None]
        if self.steps:
            out.append("next steps (one change at a time):")
            out += [f"  try {s.options}: {gib(s.before_bytes)} → {gib(s.after_bytes)}"
                    + (f", host {gib(s.host_bytes)} per node" if s.host_bytes is not None else "")
                    + (", fits" if s.fits else ", does not fit") for s in self.steps]
        if not self.fits and not any(s.fits for s in self.steps):
            out.append(("nothing in this list fits" if self.steps else "no change tried lowers the memory enough")
                       + ": a smaller model, a shorter sequence, or more memory per device")
        out += [f"warning: {w}" for w in self.warnings]
        return "\n".join(out)


def gib(n: int) -> str:
    """Bytes as GiB with two decimals (``65,771,913,216`` → ``61.25 GiB``); a size too large or
    too small for two decimals in 4 significant digits of the exact value (``9.313e+30 GiB``:
    :func:`costgraph.numbers.units.fixed`)."""
    from fractions import Fraction

    from .numbers.units import fixed

    return f"{fixed(Fraction(n, 2**30), 2)} GiB"


def _ordered(steps: list[Step]) -> list[Step]:
    return sorted(steps, key=lambda s: (not s.fits, s.after_bytes))


def fit(model, values=None, options=None, layout=None, **overrides) -> FitResult:
    """Does ``model`` fit on ``gpus`` devices of ``hardware`` (a preset name; or ``memory``, bytes
    or ``"80GB"``) for training (``mode="train"``) or serving (``"serve"``)? See the module docstring.

    ``values``: every dimension's value (default: the model's configuration, ``load(..., config=NAME)``'s or
    a config.json's ``"hf"``, as the command line's ``--config``).
    ``options``: a :class:`costgraph.fit_options.FitOptions` (``mode``, ``hardware``, ``gpus``,
    ``memory``, ``reserve``, ``efficiency_profile``, ``host_memory``; serving: ``prompt``, ``generate``,
    ``batch``, ``tp``, ``weights``, ``kv``, ``quantized``, ``keep``; both: ``memory_convention``, which figure
    of the preset is the device memory, :func:`costgraph.runtime_memory.device_memory`), or its fields as keywords in
    ``overrides`` (which replace the object's). ``reserve``: the memory kept free, a fraction or a size
    (default :data:`costgraph.choices.DEFAULT_RESERVE`). Training: ``layout`` a
    :class:`~costgraph.parallel.layout.Layout` (its ``gpus`` set from ``gpus``), or its fields as
    keywords in ``overrides`` (``zero=1, recompute="selective", t=2``). Serving: ``prompt`` and
    ``generate`` tokens per sequence, ``batch`` sequences, ``tp`` (at most ``gpus``), ``weights``/``kv``
    dtypes, ``quantized``/``keep`` as :meth:`costgraph.Model.infer`. ``efficiency_profile`` (training): a
    calibration profile (a path or :func:`costgraph.calibrate`'s result) whose memory reserve is the
    verdict's when ``reserve`` is not given. ``host_memory`` (training with CPU offload): the host
    memory of one node, bytes or a size (``"2TB"``; default the preset's ``host_memory_bytes``, DGX
    H100: 2 TB); the verdict fits only when the host memory per node fits too.
    ``memory`` and ``host_memory`` text is floored to whole bytes (``"23.58GiB"``), as ``--kv-memory``.

    Returns a :class:`FitResult`.

    Raises
    ------
    CostgraphValueError
        An unknown mode or keyword (a did-you-mean hint), no device memory (no preset and no ``memory``),
        a value missing, or as :meth:`Model.train` / :meth:`Model.infer` for the same inputs."""
    from . import arguments
    from .fit_options import FitOptions
    from .layout_options import LayoutOptions
    from .option_fields import resolve

    o, layout_settings = resolve(FitOptions, options, overrides, "fit", also=LayoutOptions.__dataclass_fields__)
    if hasattr(model, "_or_default"):   # load(..., config=NAME) or a config.json: its sizes, as --config
        values = model._or_default(values)
    if o.mode not in MODES:
        raise CostgraphValueError(f"fit mode {arguments.shown(o.mode)} is neither 'train' nor 'serve'",
                                  hint="mode='train' (costgraph fit --train) or mode='serve' (--serve)")
    gpus = arguments.whole(o.gpus, "--gpus")
    if o.hardware is None and o.memory is None:
        raise CostgraphValueError("fit needs the device memory", hint="give --hardware (costgraph hardware lists "
                                                                      "the presets) or --memory 80GB")
    if o.mode == "train":
        if o.prompt is not None or o.generate is not None:
            raise CostgraphValueError("--prompt and --generate are serving settings", hint="add --serve")
        return _train(model, o.hardware, gpus, values, o.memory, o.reserve, layout, layout_settings,
                      o.efficiency_profile, o.host_memory, o.memory_convention)
    if o.host_memory is not None:
        raise CostgraphValueError("--host-memory judges CPU offload in training", hint="drop it with --serve")
    if o.efficiency_profile is not None:
        raise CostgraphValueError("--efficiency-profile calibrates training runs", hint="drop it with --serve")
    if layout is not None or layout_settings:
        raise CostgraphValueError("a training layout is not a serving setting",
                                  hint="serving takes --tp, --batch, --weights, --kv; drop --serve to train")
    return _serve(model, o.hardware, gpus, values, o.memory, o.reserve, dict(
        prompt=o.prompt, generate=o.generate, batch=o.batch, tp=o.tp, weights=o.weights, kv=o.kv,
        quantized=o.quantized, keep=o.keep), o.memory_convention)


def _train(model, hardware, gpus, values, memory, reserve, layout, settings, profile=None,
           host_memory=None, convention=None) -> FitResult:
    import dataclasses

    from .training.api import layout_argument

    # an unknown setting, both, or no Layout: a located message (layout_argument), never a TypeError
    layout = dataclasses.replace(layout_argument(layout, {k: v for k, v in settings.items() if k != "gpus"}), gpus=gpus)
    r = model.train(layout, values=values, hardware=hardware, memory=memory, reserve=reserve,
                    efficiency_profile=profile, memory_convention=convention)   # the device memory as train reads it
    if r.fits is None:
        raise CostgraphValueError("fit needs every dimension's value (the sizes the memory is taken at)",
                                  hint="a config.json or Hub id gives them; a model file: --config NAME or --set "
                                       "(in Python: values=model.values(\"NAME\"))")
    f = r.fits
    usable = f["capacity_bytes"] - f["reserve_bytes"]
    need = usable - f["headroom_bytes"]
    def stepped(changes):   # train's changes and fit's further steps: one type (result_parts.FitChange)
        return [Step(c.change, c.options, need, c.peak_bytes, c.fits, c.host_bytes) for c in changes or ()]

    steps = stepped(f.changes)
    from .training.fit_further import host_verdict

    host = host_verdict(model, r, hardware, host_memory, need, usable, any(s.fits for s in steps))
    steps += stepped(host.further)
    L = r.layout
    shown = {"layout": f"tp {L.t} × pp {L.p} × cp {L.c} × dp {L.d}; ZeRO {L.zero}; recompute {L.recompute}",
             "precision": f"policy {L.policy}, optimizer {L.optimizer}" + _fp8_words(L),
             "sizes": ", ".join(f"{k.name} = {r.values[k.symbol]}" for k in (model.graph.dims.get("b"), model.graph.dims.get("s"))
                                if k is not None and k.symbol in r.values) or None}
    shown["host memory from"] = host.source   # with CPU offload: --host-memory, or the preset's node and its source
    calibrated = f.get("reserve_from", "").startswith("calibrated")
    if not calibrated:   # which reserve: the runtime's named parts (the default) or --reserve's
        shown["reserve"] = f"{gib(f['reserve_bytes'])}, {f.get('reserve_from', '--reserve')}" + (
            f"; device memory {f['capacity_from']}" if f.get("capacity_from") else "")
    if profile is not None:   # --efficiency-profile (costgraph.training.calibration): its memory reserve
        shown["calibrated"] = (f"the reserve, {gib(f['reserve_bytes'])} ({f['reserve_from']})" if calibrated
                               else "nothing here (the profile has no memory reserve, or --reserve was given)")
    timed = set(r.compute["rate"].notes) if r.compute and "rate" in r.compute else set()   # the step time's
    return FitResult("train", model.name, hardware, gpus, f.fits and host.fits, need, f.capacity_bytes,
                     usable, _ordered(steps), shown, [w for w in r.warnings if w not in timed] + host.warnings,
                     host.need, host.capacity)


def _fp8_words(L) -> str:
    """The FP8 options of an FP8 policy (:mod:`costgraph.training.fp8_options`), named; else empty."""
    from .training.fp8 import policy_recipe

    if policy_recipe(L.policy) is None:
        return ""
    return ("; FP8 attention " + ("on" if L.fp8_attention else "off (default)")
            + ", weight gradients " + ("FP8 (default)" if L.fp8_wgrad else "BF16 (--no-fp8-wgrad)"))


def _serve(model, hardware, gpus, values, memory, reserve, s: dict, convention=None) -> FitResult:
    """The serving verdict and its steps: :meth:`Model.infer` at the setting, then once per change; the
    preset's memory under ``convention`` (:func:`costgraph.runtime_memory.device_memory`: what CUDA reports
    by default, as ``infer``'s capacity line)."""
    from . import arguments
    from .choices import DEFAULT_RESERVE, RUNTIME_RESERVE

    if s["prompt"] is None or s["generate"] is None:
        raise CostgraphValueError("serving needs the tokens per sequence", hint="give --prompt and --generate, "
                                                                                "e.g. --prompt 4096 --generate 1024")
    if isinstance(reserve, str) and reserve.strip() == RUNTIME_RESERVE:   # training's default, not serving's
        raise CostgraphValueError(f"--reserve {RUNTIME_RESERVE} is the training verdict's (the CUDA context, cuBLAS "
                                  "workspaces and NCCL buffers); serving keeps a fraction of the device memory free",
                                  hint=f"leave --reserve out (serving's default {DEFAULT_RESERVE}: vLLM's "
                                       "gpu_memory_utilization 0.9) or give a fraction, e.g. --reserve 0.05")
    tp = arguments.whole(s["tp"], "--tp")
    if tp > gpus:
        raise CostgraphValueError(f"--tp {tp} is more than --gpus {gpus}", hint="TP shards one replica over at "
                                                                               "most --gpus devices")
    from .training.fit import floored_note, memory_size

    notes = _shipped(model, s)
    if isinstance(memory, str):   # --memory 23.58GiB: floored, as --kv-memory (Model.infer floors it alike)
        n, floored = memory_size(memory)
        notes[1][:0] = [floored_note(memory, n)] if floored else []
    values = arguments.model_values(model, values)
    if values is not None:   # b and s are the batch and the prompt + generated tokens
        values = {k: v for k, v in values.items() if str(k) not in ("b", "s")}

    from .hardware import preset
    from .runtime_memory import device_memory

    # the convention checked even with --memory (refused beside it but for the default)
    read = device_memory(None if hardware is None else preset(hardware), convention,
                         None if memory is None else memory_size(memory)[0])
    if memory is None:   # the preset's memory alone: capacity needs no peak, and no seconds are computed
        memory = read.bytes

    def run(**change):
        r = model.infer(values=values, memory=memory, reserve=reserve, **{**s, **change})
        if r.values.get("fits") is None:
            raise CostgraphValueError("fit needs the device memory", hint="give --hardware or --memory")
        return r

    base = run()
    need, usable = int(base.values["memory_bytes"]), int(base.settings.capacity_bytes)
    steps = []

    def attempt(change: str, options: str, **kw):
        try:
            r = run(**kw)
        except CostgraphValueError:   # a TP degree the model does not divide into: no step
            return
        after = int(r.values["memory_bytes"])
        if after != need:
            steps.append(Step(change, options, need, after, bool(r.values["fits"])))

    if not base.values["fits"]:
        if base.settings.kv in _SIXTEEN:
            attempt("KV cache fp8", "--kv fp8", kv="fp8")
        if base.settings.weights in _SIXTEEN:
            attempt("weights fp8", "--weights fp8", weights="fp8")
        t = tp * 2
        while t <= max(gpus, _SERVE_MAX_TP):   # past --gpus: the devices one replica would need
            more = "" if t <= gpus else f" on {t} devices"
            attempt(f"TP {t}{more}", f"--tp {t}" + (f" --gpus {t}" if more else ""), tp=t)
            if steps and steps[-1].fits and steps[-1].options.startswith(f"--tp {t}"):
                break
            t *= 2
        best = base.values.get("max_batch")
        if best and best < int(s["batch"]):
            attempt(f"batch {best} (the largest that fits)", f"--batch {best}", batch=best)
    st = base.settings
    shown = {"setting": f"batch {st.batch} × (prompt {st.prompt} + generate {st.generate}) tokens; "
                        f"TP {st.tp}; weights {st.weights}, KV cache {st.kv}",
             "replicas": f"{gpus // tp} of TP {tp} on {gpus} devices" if gpus // tp > 1 else None,
             "weights from": notes[0],
             "device memory from": None if read is None or memory != read.bytes else read.source}
    return FitResult("serve", model.name, hardware, gpus, bool(base.values["fits"]), need,
                     int(st.device_memory), usable, _ordered(steps), shown, notes[1] + list(base.warnings))


def _shipped(model, s: dict) -> tuple[str | None, list[str]]:
    """``weights=None``: a model from a config.json (``model.hf``) serves the weights it ships
    (``torch_dtype``, ``quantization_config``: :meth:`HFModel.shipped`, its scope and kept modules
    too; an unquantized 16-bit checkpoint counted as bf16, as ``costgraph infer`` does), any other
    bf16. Sets ``s``; returns (where the weights came from, the warnings of what was assumed)."""
    from .choices import DEFAULT_WEIGHTS

    hf = getattr(model, "hf", None)
    if s["weights"] is not None or hf is None:
        s["weights"] = s["weights"] or DEFAULT_WEIGHTS
        return None, []
    from .inference.dtypes import derived_weight_dtype

    sh = hf.shipped()
    w = derived_weight_dtype(sh.weights, sh.fields)
    s["weights"] = w if w.quantized else DEFAULT_WEIGHTS
    if w.quantized:
        s["quantized"], s["keep"] = sh.quantized, sh.keep
    return sh.source, list(sh.warnings)
