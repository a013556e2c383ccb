"""``costgraph verify``: costgraph's closed forms against what PyTorch
measures (:mod:`costgraph.torch_measure`) on the transformers model of a
``config.json``, each quantity exact or its difference — fitted as
``α·b·s + β·b·s²`` over the shapes and written in the config's symbols
(:func:`explain`) where it can be.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .result_fields import Q, Table
from .results import Tabular
from .torch_diffusion import DIFFUSION_TYPES, build_diffusion
from .torch_measure import (ENCODER_TYPES, PAIR_TYPES, SPEECH_TYPES, VISION_TYPES, _is_seq2seq, build_model, flops,
                            kv_cache_bytes, param_count, require)
from .torch_saved import saved_bytes


#: (b, s) shapes: two determine a difference linear in b·s and b·s², the third checks it
SHAPES = ((1, 16), (2, 32), (3, 8))


#: the unit of each compared quantity, by its name (a count of parameters has none): what the table and
#: ``to_pandas()`` of a :class:`Verification` show beside its numbers
UNITS = {"parameters": "", "forward FLOPs": "FLOP", "backward FLOPs": "FLOP", "KV cache bytes": "bytes",
         "saved bytes": "bytes"}


@dataclass
class Quantity:
    """One compared quantity: ``torch`` and ``costgraph`` values per shape (one shape for params); its unit
    :data:`UNITS` of its ``name``."""

    name: str
    shapes: list[tuple[int, int]]
    torch: list[int]
    costgraph: list[int]
    skipped: str | None = None
    fit: tuple[int, int] | None = field(default=None)      # difference = α·b·s + β·b·s², when it fits
    #: α and β in the config's symbols: "b·s" / "b·s²" → the monomials equal to them (explain)
    symbolic: dict[str, list[str]] = field(default_factory=dict)

    @property
    def unit(self) -> str:
        return UNITS[self.name]

    @property
    def diffs(self) -> list[int]:
        return [t - c for t, c in zip(self.torch, self.costgraph)]

    @property
    def exact(self) -> bool:
        return self.skipped is None and not any(self.diffs)


def _fit(shapes, diffs):
    """(α, β) with diff = α·b·s + β·b·s² at the first two shapes, if it holds at all of them (integers)."""
    from fractions import Fraction

    (b1, s1), (b2, s2) = shapes[:2]
    m11, m12, m21, m22 = b1 * s1, b1 * s1 * s1, b2 * s2, b2 * s2 * s2
    det = m11 * m22 - m12 * m21
    if det == 0:
        return None
    alpha = Fraction(diffs[0] * m22 - m12 * diffs[1], det)
    beta = Fraction(m11 * diffs[1] - m21 * diffs[0], det)
    if alpha.denominator != 1 or beta.denominator != 1:
        return None
    if any(alpha * b * s + beta * b * s * s != d for (b, s), d in zip(shapes, diffs)):
        return None
    return int(alpha), int(beta)


#: monomials tried by :func:`explain`: at most this many dimensions, coefficients up to this size
MAX_FACTORS = 3
#: at most this many explanations printed (fewest factors first), then how many more
SHOWN = 5
MAX_COEFFICIENT = 64


def explain(value: int, dims: dict[str, int], *, max_factors: int = MAX_FACTORS,
            max_coefficient: int = MAX_COEFFICIENT) -> list[str]:
    """The monomials ``c·x·y·z`` in the config's dimensions that equal ``value``: products of at
    most ``max_factors`` dimensions (repeats allowed: ``h^2``) times a whole coefficient ``c``,
    ``1 ≤ |c| ≤ max_coefficient``, printed as ``derive`` prints a term (the field's factor order,
    :func:`costgraph.export.printing.field_order`). ``dims``: name → value (dimensions worth 1 are left
    out: they would explain anything). Fewest factors first, then the smallest coefficient.
    Several answers mean the shapes cannot tell them apart at this config's values (GPT-2 small
    has l = a = 12): a fit, not a derivation.

    >>> explain(221_184, {"h": 768, "l": 12, "a": 12})
    ['24 h a', '24 l h', '2 h a^2', '2 l h a', '2 l^2 h']
    """
    from itertools import combinations_with_replacement

    import sympy

    from .numbers.printing import field_order, to_text
    from .engine.symbols import dim

    if value == 0:
        return []
    names = sorted(n for n, v in dims.items() if isinstance(v, int) and not isinstance(v, bool) and v > 1)
    found = []
    for k in range(max_factors + 1):
        for combo in combinations_with_replacement(names, k):
            prod = 1
            for n in combo:
                prod *= dims[n]
            if value % prod or not 1 <= abs(value // prod) <= max_coefficient:
                continue
            term = sympy.Integer(value // prod) * sympy.Mul(*[dim(n) for n in combo])
            found.append((k, abs(value // prod), to_text(field_order(term, expanded=True))))
    found.sort(key=lambda x: (x[0], x[1]))
    return list(dict.fromkeys(text for _, _, text in found))


@dataclass(repr=False)
class Verification(Tabular):
    """:func:`verify`'s result: the costgraph model and the transformers class compared, the
    config's path, whether dropout was on, one :class:`Quantity` per comparison (parameters;
    forward/backward FLOPs; KV cache and saved bytes, in bytes), and the torch/transformers
    versions; ``exact`` when every compared quantity agrees. ``print`` gives the report of
    ``costgraph verify`` (:func:`to_text`); a notebook a table, one row per quantity and shape
    (:class:`~costgraph.results.Tabular`)."""
    model: str                 # costgraph model name
    model_type: str
    torch_class: str
    source: str
    dropout: bool
    quantities: list[Quantity]
    versions: str

    @property
    def exact(self) -> bool:
        return all(q.exact for q in self.quantities if q.skipped is None)

    def __str__(self) -> str:
        return to_text(self)

    def _table(self) -> Table:
        """One row per quantity and shape: torch, costgraph, their difference and the verdict."""
        rows = []
        for q in self.quantities:
            unit = q.unit
            if q.skipped is not None:
                rows.append((q.name, None, None, None, None, None, f"skipped: {q.skipped}"))
            for (b, s), t, c in zip(q.shapes, q.torch, q.costgraph):
                at = (None, None) if q.name == "parameters" else (b, s)
                rows.append((q.name, *at, Q(t, unit), Q(c, unit), Q(t - c, unit), "exact" if t == c else "differs"))
        verdict = "all exact" if self.exact else "differences found"
        return Table(f"costgraph '{self.model}' vs transformers {self.torch_class} ({self.versions}): {verdict}",
                     ("quantity", "b", "s", "torch", "costgraph", "torch − costgraph", ""), rows)


def _hf_build_config(config: dict) -> dict:
    """The config as transformers builds it on meta: remote-code ``auto_map`` and a quantizer dropped."""
    cfg = {k: v for k, v in config.items() if k not in ("model_type", "auto_map")}
    if cfg.get("quantization_config") is not None:
        cfg["quantization_config"] = None
    return cfg


def _qwen_vl_model(torch, hf, config: dict):
    """``(model, image tokens)`` for a Qwen2-VL / Qwen2.5-VL config (the image of the mapping's ``g``
    merge units a side, :func:`costgraph.torch_vision.build_qwen_vl`), else None."""
    from .torch_vision import QWEN_VL_TYPES, build_qwen_vl

    if hf.model_type not in QWEN_VL_TYPES:
        return None
    g = int(hf.values["g"])
    return build_qwen_vl(torch, hf.model_type, _hf_build_config(config), g=g), g * g


def _torch_model(torch, hf, config: dict, costgraph_model, shapes: list) -> tuple:
    """The PyTorch class of ``hf``'s family, built on meta, and the (b, s) shapes it is run at:
    image tokens ahead of the text for VLMs, the fixed token count of an image or latent."""
    from .torch_vision import MULTIMODAL_TYPES, build_llava, image_tokens
    from .torch_vlm import VLM_TYPES, build_vlm, sequence_tokens

    multimodal = hf.model_type in MULTIMODAL_TYPES
    qwen_vl = _qwen_vl_model(torch, hf, config)
    if hf.model_type in DIFFUSION_TYPES:   # diffusers' DiT / SD3, T text tokens for SD3
        tm = build_diffusion(torch, hf.model_type, _hf_build_config(config), text_tokens=hf.values.get("T", 0))
    elif hf.model_type in VLM_TYPES:   # Gemma 3 (image tokens in the sequence), Mllama (cross-attention)
        tm = build_vlm(torch, hf.model_type, _hf_build_config(config))
    else:
        tm = (qwen_vl[0] if qwen_vl else build_llava(torch, _hf_build_config(config)) if multimodal
              else build_model(hf.model_type, _hf_build_config(config)))
    if multimodal:   # LLaVA: the decoder's s counts the n image tokens, then s text tokens
        shapes = [(b, image_tokens(config) + s) for b, s in shapes]
    elif hf.model_type in VLM_TYPES:
        shapes = [(b, sequence_tokens(hf.model_type, config) + s) for b, s in shapes]
    if qwen_vl:      # Qwen2-VL: likewise, g² image tokens of one image of g × g merge units
        shapes = [(b, qwen_vl[1] + s) for b, s in shapes]
    if hf.model_type in VISION_TYPES or hf.model_type in DIFFUSION_TYPES:   # b varies, the tokens are fixed
        derived = costgraph_model.graph.dims["n" if hf.model_type in DIFFUSION_TYPES else "s"].derived
        tokens = int(derived.subs({sym: hf.values[str(sym)] for sym in derived.free_symbols}))
        shapes = [(b, tokens) for b, _ in shapes]
    return tm, shapes


def verify(config_path: str, model: str | None = None, shapes=SHAPES, *, kv: bool = True) -> Verification:
    """Compare costgraph's costs of ``config_path`` (a config.json; ``model``: a bundled name or .cg path
    replacing the mapped model file) with what PyTorch measures on the transformers model."""
    from .language.hf_config import from_hf_config, read_config

    torch = require()
    import transformers

    config = read_config(config_path)
    hf = from_hf_config(config, source=str(config_path), profile="pytorch", model=model)
    costgraph_model = hf.model
    dropout = costgraph_model.settings.dropout
    tm, shapes = _torch_model(torch, hf, config, costgraph_model, [tuple(x) for x in shapes])
    seq2seq = _is_seq2seq(tm)

    def cg(b, s):
        values = {**hf.values, "b": b}
        if "s" in costgraph_model.symbols:
            values["s"] = s
        if seq2seq and "t" in costgraph_model.symbols:
            values["t"] = s
        return costgraph_model.costs("model", convention="matmul").evaluate(None, values)

    cgs = [cg(b, s) for b, s in shapes]
    qs = [Quantity("parameters", [shapes[0]], [param_count(tm)], [int(cgs[0]["params"])])]
    fl = [flops(tm, b, s) for b, s in shapes]
    qs.append(Quantity("forward FLOPs", shapes, [f["forward"] for f in fl], [int(c["flops_forward"]) for c in cgs]))
    qs.append(Quantity("backward FLOPs", shapes, [f["backward"] for f in fl], [int(c["flops_backward"]) for c in cgs]))
    if not kv:
        qs.append(Quantity("KV cache bytes", shapes, [], [], skipped="not asked (--no-kv)"))
    elif seq2seq and hf.model_type in SPEECH_TYPES:   # EncoderDecoderCache: self-attention + cross-attention
        from .torch_speech import encoder_decoder_cache_bytes

        qs.append(Quantity("KV cache bytes", shapes,
                           [encoder_decoder_cache_bytes(torch, tm, b, s)["total"] for b, s in shapes],
                           [int(c["kv_cache_bytes"]) for c in cgs]))
    elif seq2seq:
        qs.append(Quantity("KV cache bytes", shapes, [], [], skipped="encoder-decoder (EncoderDecoderCache)"))
    elif hf.model_type in DIFFUSION_TYPES:
        qs.append(Quantity("KV cache bytes", shapes, [], [], skipped="a diffusion Transformer keeps no KV cache"))
    elif hf.model_type in ENCODER_TYPES or hf.model_type in PAIR_TYPES:   # encoders; CLIP, SigLIP
        qs.append(Quantity("KV cache bytes", shapes, [], [], skipped="an encoder keeps no KV cache (costgraph: "
                           f"{max(int(c['kv_cache_bytes']) for c in cgs)} bytes)"))
    else:
        try:
            qs.append(Quantity("KV cache bytes", shapes, [kv_cache_bytes(tm, b, s) for b, s in shapes],
                               [int(c["kv_cache_bytes"]) for c in cgs]))
        except Exception as e:  # noqa: BLE001 - a cache transformers builds differently is reported, not fatal
            qs.append(Quantity("KV cache bytes", shapes, [], [], skipped=f"{type(e).__name__}: {e}"[:200]))
    qs.append(Quantity("saved bytes", shapes, [saved_bytes(tm, b, s)["bytes"] for b, s in shapes],
                       [int(c["activation_bytes"]) for c in cgs]))
    dims = {k: v for k, v in hf.values.items() if k not in ("b", "s", "t")}
    for q in qs:
        if q.skipped is None and len(q.shapes) >= 2 and any(q.diffs):
            q.fit = _fit(q.shapes, q.diffs)
            if q.fit is not None:
                q.symbolic = {sym: explain(coef, dims) for sym, coef in zip(("b·s", "b·s²"), q.fit) if coef}
    return Verification(costgraph_model.name, hf.model_type, type(tm).__name__, str(config_path),
                        bool(dropout), qs, f"torch {torch.__version__}, transformers {transformers.__version__}"
                        + _diffusers_version(hf.model_type))


def _diffusers_version(model_type: str) -> str:
    """", diffusers X" for a diffusion Transformer (built by diffusers), else nothing."""
    if model_type not in DIFFUSION_TYPES:
        return ""
    import diffusers

    return f", diffusers {diffusers.__version__}"


def _signed(n: int) -> str:
    return f"+{n:,}" if n > 0 else f"{n:,}"


def _term(coef: int, sym: str) -> str:
    return f"{coef:,}·{sym}" if coef not in (1, -1) else (sym if coef == 1 else f"-{sym}")


def to_text(v: Verification) -> str:
    """The report ``costgraph verify`` prints."""
    lines = [f"costgraph '{v.model}' vs transformers {v.torch_class} ({v.source}, model_type {v.model_type})",
             f"  {v.versions}; meta device, bf16, eager attention, train mode; dropout "
             f"{'on (the config sets a rate)' if v.dropout else 'off'}; FLOPs: matrix products (matmul convention);"
             " saved bytes: the pytorch profile"]
    for q in v.quantities:
        if q.skipped is not None:
            lines.append(f"  {q.name:<16} skipped: {q.skipped}")
            continue
        for (b, s), t, c in zip(q.shapes, q.torch, q.costgraph):
            at = "" if q.name == "parameters" else f" b={b} s={s}"
            what = f"{q.name}{at}"
            if t == c:
                lines.append(f"  {what:<28} exact      {t:,}")
            else:
                lines.append(f"  {what:<28} torch {t:,} − costgraph {c:,} = {_signed(t - c)}")
        if q.fit is not None:
            alpha, beta = q.fit
            terms = [_term(alpha, "b·s") if alpha else "", _term(beta, "b·s²") if beta else ""]
            lines.append(f"  {'':<28} difference = {' + '.join(x for x in terms if x).replace('+ -', '− ')}"
                         f" (fits all {len(q.shapes)} shapes)")
            for sym, coef in zip(("b·s", "b·s²"), q.fit):
                found = q.symbolic.get(sym)
                if not coef:
                    continue
                if not found:
                    lines.append(f"  {'':<28} {sym}: {coef:,} is no c·x·y·z of the config's dimensions "
                                 f"(|c| ≤ {MAX_COEFFICIENT}, at most {MAX_FACTORS} of them)")
                    continue
                shown = found[:SHOWN]
                tail = (f" (and {len(found) - SHOWN} more; several explain it: a fit at this config's values)"
                        if len(found) > SHOWN else
                        " (several explain it: a fit at this config's values)" if len(found) > 1 else "")
                lines.append(f"  {'':<28} {sym}: {coef:,} = {' = '.join(shown)} in the config's symbols{tail}")
        elif len(q.shapes) >= 2 and any(q.diffs):
            lines.append(f"  {'':<28} difference is not α·b·s + β·b·s² (see each shape)")
    lines.append("all exact" if v.exact else "differences found (torch − costgraph above)")
    return "\n".join(lines)
