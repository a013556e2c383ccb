"""What a Hugging Face checkpoint ships: ``torch_dtype`` and ``quantization_config``
of its ``config.json`` → a weight dtype name of ``inference/dtypes.toml``, the
fields that differ from that entry, which weights are quantized and which
modules are kept in 16 bits (:class:`Shipped`).

Read (keys as transformers and vLLM read them):

* ``quant_method: awq`` — ``bits`` (4), ``group_size`` (128; −1: one group per
  row), ``zero_point`` (true: a 4-bit zero per group) → ``awq``;
  ``modules_to_not_convert``.
* ``quant_method: gptq`` — ``bits`` (4 or 8: the zeros take as many bits),
  ``group_size``, ``desc_act`` (act-order: ``gptq-act-order``, g_idx kept).
* ``quant_method: fp8`` — ``weight_block_size`` ``[rows, cols]`` →
  ``fp8-block`` (DeepSeek-V3: ``[128, 128]``); none → ``fp8`` (per tensor);
  ``activation_scheme: static`` adds the fp32 ``input_scale`` of each tensor
  (vLLM ``Fp8LinearMethod.create_weights`` builds it only then).
* ``quant_method: mxfp4`` (gpt-oss) — ``mxfp4`` on the MoE experts only (vLLM's
  ``Mxfp4Config.get_quant_method`` gives every ``LinearBase`` the unquantized
  method), ``modules_to_not_convert``.
* ``quant_method: modelopt`` — ``quant_algo`` NVFP4 (``group_size`` 16) → ``nvfp4``,
  FP8 → ``fp8``; ``ignore`` / ``exclude_modules``.
* ``quant_method: compressed-tensors`` — the first ``config_groups`` entry's
  ``weights``: 4-bit float, group 16 → ``nvfp4``; 8-bit float by ``strategy``
  (tensor, channel, block) → ``fp8``, ``fp8-per-channel``, ``fp8-block``;
  ``ignore``.
* Another ``quant_method`` (bitsandbytes, gguf, hqq …): a warning, and the
  weights taken as unquantized 16-bit (an upper bound).
* ``torch_dtype`` (or transformers 5's ``dtype``; another value warns): ``float16`` → ``fp16``,
  ``bfloat16`` → ``bf16``; ``float32`` or none → ``bf16``: serving casts a
  float32 checkpoint to 16 bits (vLLM ``_get_and_verify_dtype``, dtype
  ``auto``: 'we use float16 for float32 models'; bfloat16 in later releases).
  The weights no quantizer touches stay in 16 bits either way.

Nothing here is evaluated as code; a malformed value is a located
:class:`~costgraph.errors.CostgraphValueError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..arguments import shown
from ..errors import CostgraphValueError

_TORCH = {"float16": "fp16", "bfloat16": "bf16", "float32": "bf16", "float": "bf16", "half": "fp16"}


@dataclass(frozen=True)
class Shipped:
    """The storage a ``config.json`` describes.

    ``weights``: a weight dtype name of ``dtypes.toml``; ``fields``: the entry's
    fields that differ (``{"group_size": 64}``); ``quantized``: the scope of
    :mod:`costgraph.inference.quantized` (``linear``, ``experts`` …);
    ``keep``: module names kept in 16 bits; ``source``: where it was read, for
    the output; ``warnings``: what was assumed."""

    weights: str
    fields: dict = field(default_factory=dict)
    quantized: str = "linear"
    keep: tuple[str, ...] = ()
    source: str = ""
    warnings: tuple[str, ...] = ()


def _fail(where: str, message: str, hint: str | None = None):
    raise CostgraphValueError(f"{where}: {message}", hint=hint or "correct the file's quantization_config (the "
                              "fields its quantizer writes: README, 'Quantization as shipped')")


def _int(q: dict, key: str, default, where: str, allow=()) -> int:
    v = q.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or (v < 1 and v not in allow):
        _fail(where, f"quantization_config.{key} must be a positive whole number, got {shown(v)}")
    return v


def _names(q: dict, keys, where: str) -> tuple[str, ...]:
    for key in keys:
        v = q.get(key)
        if v is None:
            continue
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            _fail(where, f"quantization_config.{key} must be a list of module names, got {shown(v)}")
        return tuple(v)
    return ()


def _torch_dtype(config: dict, where: str) -> tuple[str, str, tuple[str, ...]]:
    """``(weight dtype, what was read, warnings)`` from ``torch_dtype``; an unknown value warns."""
    v = config.get("torch_dtype")
    v = config.get("dtype") if v is None else v   # transformers 5 writes dtype (torch_dtype absent or null)
    if v is None:
        return "bf16", "no torch_dtype in the config.json: bf16 (16-bit serving)", ()
    if not isinstance(v, str) or v not in _TORCH:
        return "bf16", f"torch_dtype {shown(v)}: bf16 assumed", \
            (f"{where}: torch_dtype {shown(v)} is not float16, bfloat16 or float32; the weights are taken as bf16",)
    note = " (served in 16 bits)" if _TORCH[v] == "bf16" and v != "bfloat16" else ""
    return _TORCH[v], f"torch_dtype {v}{note}", ()


def _awq(q, where):
    bits, g = _int(q, "bits", 4, where), _int(q, "group_size", 128, where, allow=(-1,))
    zero = q.get("zero_point", True)
    if bits != 4:
        _fail(where, f"AWQ with {bits}-bit weights: only 4-bit AWQ is described", hint="vLLM's AWQ takes 4 bits")
    stat = 16 + (4 if zero else 0)
    fields = {} if g == 128 else {"group_size": g} if g > 0 else {"group_size": None, "row_stat_bits": stat}
    if stat != 20 and g > 0:
        fields["group_stat_bits"] = stat
    return "awq", fields, f"awq, bits {bits}, group_size {g}, zero_point {str(bool(zero)).lower()}"


def _gptq(q, where):
    bits, g = _int(q, "bits", 4, where), _int(q, "group_size", 128, where, allow=(-1,))
    if bits not in (2, 3, 4, 8):
        _fail(where, f"GPTQ with {bits}-bit weights", hint="2, 3, 4 or 8 bits")
    act = bool(q.get("desc_act", False))
    fields = {} if bits == 4 else {"element_bits": bits, "group_stat_bits": 16 + bits}
    if g == -1:
        fields.update(group_size=None, row_stat_bits=16 + bits)
    elif g != 128:
        fields["group_size"] = g
    return ("gptq-act-order" if act else "gptq"), fields, \
        f"gptq, bits {bits}, group_size {g}, desc_act {str(act).lower()}"


def _fp8(q, where):
    block = q.get("weight_block_size")
    static = q.get("activation_scheme", "dynamic") == "static"
    extra = {"tensor_stat_bits": 32} if static else {}
    if block is None:
        return "fp8", ({"tensor_stat_bits": 64} if static else {}), \
            f"fp8 per tensor, activation_scheme {q.get('activation_scheme', 'dynamic')}"
    if not (isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and not isinstance(b, bool)
                                                                and b > 0 for b in block)):
        _fail(where, f"quantization_config.weight_block_size must be [rows, columns], got {shown(block)}")
    fields = dict(extra)
    if block != [128, 128]:
        fields.update(group_rows=block[0], group_size=block[1])
    return "fp8-block", fields, f"fp8 block-wise {block[0]}x{block[1]}"


def _modelopt(q, where):
    algo = str(q.get("quant_algo", (q.get("quantization") or {}).get("quant_algo", ""))).upper()
    if algo == "NVFP4":
        g = _int(q, "group_size", 16, where)
        return "nvfp4", ({} if g == 16 else {"group_size": g}), f"modelopt NVFP4, group_size {g}"
    if algo == "FP8":
        return "fp8", {}, "modelopt FP8 per tensor"
    return None


def _compressed(q, where):
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        return None
    w = next(iter(groups.values()))
    w = w.get("weights") if isinstance(w, dict) else None
    if not isinstance(w, dict):
        return None
    bits, kind, strategy = w.get("num_bits"), w.get("type"), w.get("strategy")
    if (bits, kind) == (4, "float") and w.get("group_size") == 16:
        return "nvfp4", {}, "compressed-tensors NVFP4 (4-bit float, group 16)"
    if (bits, kind) == (8, "float"):
        name = {"tensor": "fp8", "channel": "fp8-per-channel", "block": "fp8-block"}.get(strategy)
        if name:
            return name, {}, f"compressed-tensors FP8, strategy {strategy}"
    return None


_METHODS = {"awq": _awq, "gptq": _gptq, "fp8": _fp8, "modelopt": _modelopt, "compressed-tensors": _compressed}


def shipped(config: dict, source: str = "<config>") -> Shipped:
    """The weights a ``config.json`` ships (module docstring): quantized when it has a
    ``quantization_config``, else its ``torch_dtype`` in 16 bits.

    Raises
    ------
    CostgraphValueError
        A ``quantization_config`` that is not an object, or a malformed bits, group size,
        block size or module list (named, with the file). An unknown ``torch_dtype`` or
        ``quant_method`` is a warning (``Shipped.warnings``), not an error."""
    base, why, warned = _torch_dtype(config, source)
    q = config.get("quantization_config")
    if q is None:
        return Shipped(base, source=f"{source}: {why}", warnings=warned)
    if not isinstance(q, dict):
        _fail(source, f"quantization_config must be an object, got {shown(q)}")
    method = q.get("quant_method")
    keep = _names(q, ("modules_to_not_convert", "ignore", "exclude_modules"), source)
    if method == "mxfp4":
        return Shipped("mxfp4", quantized="experts", keep=keep,
                       source=f"{source}: quantization_config mxfp4 (MoE experts only)")
    read = _METHODS[method](q, source) if method in _METHODS else None
    if read is None:
        said = f"quant_method {shown(method)}" + (f", quant_algo {shown(q.get('quant_algo'))}" if "quant_algo" in q else "")
        return Shipped(base, source=f"{source}: {why}",
                       warnings=warned + (f"{source}: quantization_config {said} is not a layout costgraph "
                                          f"describes; the weights are taken as unquantized {base} (an upper bound)",))
    name, fields, said = read
    return Shipped(name, fields=fields, keep=keep, source=f"{source}: quantization_config {said}")
