"""The device figures of ``costgraph infer``, from a preset, from the command line, or absent.

A hardware preset is optional: KV cache bytes, weights, FLOPs and bytes per step need no
device. Only two answers do:

* **seconds** (time to first token, per output token, tokens/s, the compute-bound batch)
  need a dense peak (FLOP/s of the compute dtype: ``--peak``, or the preset's) and an HBM
  bandwidth (B/s: ``--bandwidth``, or the preset's); with ``--tp`` above 1 also a link for
  the all-reduces (``--link-bandwidth`` B/s per direction, or the preset's scale-up link);
* **capacity** (fits, largest batch, longest context) needs the device memory
  (``--memory 80GB``, or the preset's ``memory_bytes``).

Each figure given on the command line replaces the preset's (``--hardware h100-sxm --peak
700e12``) or stands alone. :func:`figures` returns them with ``missing``: for each answer
left out, the reason in words (the text and JSON print it; the JSON gives null values).
Numbers are read exactly (:func:`costgraph.arguments.rational`, :func:`costgraph.training.fit.parse_size`),
never evaluated as code.

Link without a preset: ``--link-bandwidth`` gives the bandwidth term of the ring all-reduce;
its latency term is then 0 (named in the assumptions), as no per-step latency was given.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

#: what each absent figure leaves out, and how to give it
NEED_SECONDS = "seconds: need --hardware NAME, or --peak FLOP/s and --bandwidth B/s"
NEED_PEAK = "seconds: no peak FLOP/s (--hardware NAME or --peak): each op takes max(FLOPs/peak, bytes/bandwidth)"
NEED_BANDWIDTH = "seconds: no HBM bandwidth (--hardware NAME or --bandwidth B/s)"
NEED_LINK = ("seconds: the tensor-parallel all-reduces need a link: --hardware NAME or --link-bandwidth "
             "B/s per direction")
NEED_MEMORY = "capacity: no device memory given (--hardware NAME or --memory 80GB)"


@dataclass(frozen=True)
class Figures:
    """The device figures before efficiencies: ``peak`` dense FLOP/s of the compute dtype,
    ``bandwidth`` HBM B/s, ``memory`` bytes, ``alpha`` seconds per ring step and ``beta``
    B/s per direction of the TP link (each None where absent); ``name`` the preset's key
    (None: no preset); ``origin`` figure → where it comes from (a preset key or a flag);
    ``missing`` answer ("seconds", "capacity") → the reason it is absent."""

    name: str | None
    peak: sympy.Expr | None
    bandwidth: sympy.Expr | None
    memory: int | None
    alpha: sympy.Expr | None
    beta: sympy.Expr | None
    origin: dict = field(default_factory=dict)
    missing: dict = field(default_factory=dict)
    #: the memory's :class:`~costgraph.runtime_memory.DeviceMemory` (its convention and source), None: absent
    memory_from: object = None


def _rate(value, flag: str) -> sympy.Expr:
    """A positive rate given by the user (int, float or text such as ``989.4e12``), exact."""
    from ..arguments import positive_number, rational
    from ..errors import CostgraphValueError

    positive_number(value, flag)
    r = rational(value, flag)
    if flag == "--peak" and r < 1:   # no device computes below 1 FLOP/s (issue 30)
        raise CostgraphValueError(f"--peak {float(r):.4g} FLOP/s is below 1 FLOP/s",
                                  hint="give FLOP/s per device, e.g. 989.4e12 (an H100 SXM's dense BF16 peak)")
    return r


def _memory(value) -> int:
    """Device memory: an int of bytes, or text as ``--memory`` reads it (``80GB``, ``80GiB``),
    floored to whole bytes as ``--kv-memory`` is (``23.58GiB``, a size a log printed rounded:
    25,318,832,209 bytes; issue 29), which :func:`figures` names in ``figures_from``."""
    from ..arguments import whole
    from ..training.fit import parse_size

    return parse_size(value, what="--memory", floor=True) if isinstance(value, str) else whole(value, "--memory")


def floored(value) -> bool:
    """Whether ``--memory`` text was not a whole number of bytes (and :func:`_memory` floored it)."""
    from ..training.fit import parse_size

    if not isinstance(value, str):
        return False
    try:
        parse_size(value, what="--memory")
    except Exception:   # noqa: BLE001 - the whole-bytes check alone; _memory reported any other error
        return True
    return False


def figures(hardware, compute_dtype: str, t: int = 1, *, peak=None, bandwidth=None, memory=None,
            link_bandwidth=None, memory_convention=None) -> Figures:
    """The figures of a preset (``hardware``: a name, a ``my.toml[:NAME]`` file, a
    :class:`~costgraph.hardware.Hardware` or None), each replaced by the one given. The preset's memory
    is read under ``memory_convention`` (:func:`costgraph.runtime_memory.device_memory`: ``cuda``, the
    default, what CUDA reports; ``nominal``, the printed figure).

    Raises
    ------
    CostgraphValueError
        An unknown preset; a figure that is not a positive number; a preset without a peak
        for ``compute_dtype`` when no ``peak`` is given."""
    from ..hardware import preset

    hw = preset(hardware) if hardware is not None else None
    origin: dict = {}

    def pick(given, flag, preset_value, key):
        if given is not None:
            origin[key] = flag
            return given
        if hw is not None and preset_value is not None:
            origin[key] = hw.key
            return preset_value() if callable(preset_value) else preset_value
        return None

    p = pick(None if peak is None else _rate(peak, "--peak"), "--peak",
             None if hw is None else (lambda: sympy.Integer(hw.peak_flops(compute_dtype))), "peak_flops")
    bw = pick(None if bandwidth is None else _rate(bandwidth, "--bandwidth"), "--bandwidth",
              None if hw is None else sympy.Integer(hw.memory_bandwidth), "memory_bandwidth")
    from ..runtime_memory import device_memory

    given = None if memory is None else _memory(memory)
    memory_from = device_memory(hw, memory_convention, given)   # checks the convention even where --memory wins
    mem = pick(given, "--memory (floored to whole bytes, as --kv-memory)" if floored(memory) else "--memory",
               None if memory_from is None else memory_from.bytes, "device_memory")
    alpha, beta = _link(hw, t, link_bandwidth, origin)
    missing = {}
    if p is None and bw is None:
        missing["seconds"] = NEED_SECONDS
    elif p is None:
        missing["seconds"] = NEED_PEAK
    elif bw is None:
        missing["seconds"] = NEED_BANDWIDTH
    elif t > 1 and beta is None:
        missing["seconds"] = NEED_LINK
    if mem is None:
        missing["capacity"] = NEED_MEMORY
    return Figures(None if hw is None else hw.key, p, bw, mem, alpha, beta, origin, missing, memory_from)


def _link(hw, t: int, link_bandwidth, origin: dict):
    """``(alpha, beta)`` of the TP all-reduce: the preset's scale-up link (scale-out past its
    domain: NCCL's ring over the NICs of the group's members on each domain, min(r·B_out, B_up),
    :func:`costgraph.parallel.ranks.ring_scale_out`), the bandwidth replaced by ``link_bandwidth``;
    without a preset, latency 0. Line rates (serving's convention)."""
    if hw is not None:
        if t <= hw.scale_up_domain:
            alpha, beta = sympy.Rational(hw.latency_scale_up_ns, 10**9), sympy.Integer(hw.scale_up_bandwidth)
        else:
            from ..parallel.ranks import ranks_per_domain, ring_scale_out

            alpha, beta = sympy.Rational(hw.latency_scale_out_ns, 10**9), sympy.Integer(hw.scale_out_bandwidth)
            if hw.scale_out_bandwidth and hw.scale_up_bandwidth:   # a ring across domains: its members' NICs
                beta = ring_scale_out(((t, 1),), ranks_per_domain(hw), beta, hw.scale_up_bandwidth)
        origin["link_latency"] = origin["link_bandwidth"] = hw.key
    else:
        alpha = beta = None
    if link_bandwidth is not None:
        beta = _rate(link_bandwidth, "--link-bandwidth")
        origin["link_bandwidth"] = "--link-bandwidth"
        if alpha is None:
            alpha = sympy.Integer(0)
            origin["link_latency"] = "none given: 0"
    return alpha, beta


def lower_bound(quantities: dict, phase: str, step, m) -> None:
    """Without seconds but with a peak or a bandwidth: ``PHASE.seconds_at_least``, the step's
    FLOPs / peak or bytes / bandwidth (the larger where both are known and only the TP link is
    missing). Each op's roofline time max(FLOPs/peak, bytes/bandwidth) is at least either term,
    so their sum over ops is at least the step's total FLOPs / peak and its bytes / bandwidth:
    a decode step on a known bandwidth takes at least its bytes / bandwidth."""
    terms = ([step.flops / m.peak] if m.peak is not None else []) + (
        [step.bytes / m.bandwidth] if m.bandwidth is not None else [])
    if terms:
        quantities[f"{phase}.seconds_at_least"] = sympy.Max(*terms) if len(terms) > 1 else terms[0]


def settings(f: Figures) -> dict:
    """The figures as ``settings`` keys of the JSON: exact numbers as text (``p/q`` where not
    whole), null where absent; ``figures_from``: where each comes from."""
    def text(v):
        return None if v is None else str(v)

    out = {"peak_flops": text(f.peak), "memory_bandwidth": text(f.bandwidth), "device_memory": f.memory,
           "link_bandwidth": text(f.beta), "figures_from": dict(f.origin)}
    if f.memory_from is not None:   # the convention the preset's memory is read under (none: --memory), its source
        out.update({"memory_convention": f.memory_from.convention} if f.memory_from.convention != "given" else {},
                   device_memory_from=f.memory_from.source)
    return out


def untimed_values(rep, dec) -> None:
    """``rep.values`` without a rate: every quantity that needs no device (bytes, FLOPs,
    intensity) where each symbol has a value; seconds, tokens/s and the compute-bound batch
    left out (None)."""
    import sympy

    from .decode import ExactPow, bounded_subs

    one_token = rep.settings.generate < 2   # G = 1: no decode step (costgraph.inference.decode)
    for k, e in rep.quantities.items():
        if one_token and k.startswith("decode."):
            continue
        v = bounded_subs(e, rep.subs)   # exact; a mixture's huge (1 - k/E)^(b q) kept unevaluated
        if not v.free_symbols:
            rep.values[k] = v if v.is_Rational or v.has(ExactPow) else sympy.simplify(v)
    rep.values["compute_bound_batch"] = None


def no_capacity(rep, inf, page: int, batch: int) -> None:
    """Without device memory: the memory of this batch (weights + paged KV cache) still,
    but no fit verdict, largest batch or longest context (None)."""
    from .phases import G, P
    from .exact import exact_value as _exact

    rep.settings.capacity_bytes = None
    mem = rep.quantities["weight_bytes"] + inf.kv_cache_bytes(P + G, batch=inf.b, page=page)
    rep.quantities["memory_bytes"] = mem
    rep.values["memory_bytes"] = _exact(mem, rep.subs)
    rep.values.update(fits=None, max_batch=None, max_context=None)


def notes(f: Figures, t: int) -> list[str]:
    """The assumptions naming where the figures come from and what is absent."""
    out = []
    given = {k: v for k, v in f.origin.items() if v.startswith("--") or v.startswith("none")}
    if given:
        out.append("device figures from the command line: " + ", ".join(f"{k} {v}" for k, v in given.items()))
    if t > 1 and f.origin.get("link_latency") == "none given: 0":
        out.append("TP all-reduce latency 0: --link-bandwidth gives only the link's bandwidth (no preset)")
    out += [f"absent: {why}" for why in f.missing.values()]
    return out

