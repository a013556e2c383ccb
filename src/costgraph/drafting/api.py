"""``costgraph import``: draft a model file from the transformers model of a config (issue 28 item 1).

:func:`draft_model` builds the transformers model on the meta device at two probe configurations
(:mod:`costgraph.drafting.probe`: every size field a product of primes no other field shares),
traces one forward of each (:mod:`costgraph.drafting.trace`), recognises the blocks and writes
the model file (:mod:`costgraph.drafting.model_file`); the two drafts must be the same text, and
at each probe the draft's parameters and forward FLOPs (``matmul`` convention) are compared with
PyTorch's ``sum(p.numel())`` and ``FlopCounterMode`` on the same meta model (the ``costgraph
verify`` tier, :mod:`costgraph.torch_measure`). Needs the ``torch`` extra.
"""

from __future__ import annotations

from collections import OrderedDict

from ..arguments import shown
from ..errors import CostgraphValueError
from .configs import _config, _config_object, _field, present_fields, probed_config, rounded_widths
from .draft import Check, Draft  # noqa: F401  (Check: the checks' type, importable from here)
from .inputs_patches import window_probe
from .conv_stages import IMAGE_SIDE, field_value, stage_count
from .probe import (EVEN_KV, MAMBA2_COMPUTED_HEAD, MAMBA2_HEAD, PERIOD_FIELDS, STAGE_LISTS, STAGE_SCALARS, Probe,
                    decoder_length)
from .probe import probe_primes     # k28vision13
from .probe_video import TUBELET_LIST, vision_values     # k28vision13
from .fsmt import KEEPS_PAD     # k28text2
from .probe_frames import frames_values     # k28speech2
from .probe_lists import SQUARE_LISTS, list_values, square_lists     # k28patch2
from .model_build import AUTO_HINT, _build, _forward, _no_weights_built, auto_class  # noqa: F401 (importable here)
from .probe_fit import fitted, layer_period, params_at_config, unset_counts


def _require():
    from ..torch_measure import TorchMissing, require

    try:
        return require()
    except TorchMissing as e:
        raise TorchMissing(e.message.replace("costgraph verify", "costgraph import"), hint=e.hint) from None


def _probe_config(cfg: dict, config, probe: Probe) -> dict:
    nested, target = probed_config(config)
    if nested is None:
        return _probe_fields(cfg, config, probe)
    out = dict(cfg)
    inner = cfg.get(nested) if isinstance(cfg.get(nested), dict) else {}
    out[nested] = _probe_fields(inner, target, probe)
    return out


def _probe_fields(cfg: dict, config, probe: Probe) -> dict:
    keys = getattr(type(config), "attribute_map", {}) or {}
    out = {k: v for k, v in cfg.items() if k != "layer_types"}
    for f, v in probe.fields.items():
        out[keys.get(f, f)] = v
    for f in ("n_group", "topk_group"):     # group-limited routing (DeepSeek-V3): E need not divide into groups at
        if isinstance(getattr(config, f, None), int):   # a probe; which experts run changes no count
            out[f] = 1
    heads = probe.fields.get("num_attention_heads")
    if isinstance(heads, int):     # left None by the config, needed by the model (Ministral's head_dim, Nemotron's kv)
        follow = {"num_key_value_heads": heads, "head_dim": probe.fields.get("hidden_size", 0) // heads}
        for f, v in follow.items():
            if f in config.to_dict() and _field(config, f) is None and f not in probe.fields and v:
                out[keys.get(f, f)] = v
    layers = probe.fields.get("num_hidden_layers")
    kinds = _field(config, "attention_layers")
    if isinstance(_field(config, "attention_types"), list) and isinstance(kinds, list) and isinstance(layers, int):
        out["attention_types"] = _cycled(kinds, layers)
    for f in MAMBA2_HEAD:      # the Mamba-2 head size follows the inner width and the heads (the config's "auto")
        if hasattr(config, f):
            out[f] = "auto"
    window_probe(out, config, probe)     # k28patch13: Qwen2.5-VL's windows, whole at the probe
    for i, t in enumerate(("pad_token_id", "bos_token_id", "eos_token_id")):
        if isinstance(out.get(t), int) or isinstance(getattr(config, t, None), int):
            out[t] = i
        elif isinstance(out.get(t), list):
            out[t] = [i]
    if getattr(config, "model_type", None) in KEEPS_PAD and isinstance(getattr(config, "pad_token_id", None), int):
        out["pad_token_id"] = config.pad_token_id     # FSMT's position rows: s_max + pad_token_id + 1 (k28text2)
    return out


def _types_period(kinds) -> int | None:
    """The shortest period of a config's ``layer_types`` (one kind per layer), its last layer aside: Gemma 4
    unified's ``__post_init__`` (transformers 5.24 configuration_gemma4_unified.py) writes a full-attention layer
    every 6th, a pattern no config field names, and forces the last layer to full attention. None for a list
    shorter than two periods or of no period. The probes then have over twice that many layers, so that the
    pattern shows at least twice and folds alike at both. Where no period holds from the first layer, the first
    layer aside too: MiMo-V2-Flash's (transformers 5.24 configuration_mimo_v2_flash.py ``__post_init__``: full
    attention at layer 0 and every 6th, sliding-window attention elsewhere)."""
    if not isinstance(kinds, list) or len(kinds) < 4:
        return None
    for first in (0, 1):
        body = kinds[:-1]
        m = next((m for m in range(1, (len(body) - first) // 2 + 1)
                  if all(body[j] == body[first + (j - first) % m] for j in range(first, len(body)))), None)
        if m is not None:
            return m
    return None


def _fixed_layer_list(cfg: dict, nested: str | None, target) -> bool:
    """Whether the config's list of layer kinds (``layer_types``, one per layer) stays as it is when
    ``num_hidden_layers`` changes: Zamba2's ``layers_block_type`` (transformers 5.24 configuration_zamba2.py
    ``__post_init__``: a fixed list of 54 when None, the user's list otherwise; ``validate_layer_type`` refuses a
    layer count of another length). Such a config is probed at its own layer count (the draft's ``repeat`` writes the
    list, ``if j in [...]``), as Nemotron-H's, whose layer count is no field. False where the list follows the layer
    count (Gemma 3's, recomputed from a pattern), or there is no list."""
    kinds, n = _field(target, "layer_types"), _field(target, "num_hidden_layers")
    if not isinstance(kinds, list) or not isinstance(n, int) or isinstance(n, bool) or len(kinds) != n:
        return False
    keys = getattr(type(target), "attribute_map", {}) or {}
    inner = cfg.get(nested) if nested else cfg
    changed = {k: v for k, v in (inner if isinstance(inner, dict) else {}).items() if k != "layer_types"}
    changed[keys.get("num_hidden_layers", "num_hidden_layers")] = n + 1
    try:
        other = _config_object({**cfg, nested: changed} if nested else {**changed, "model_type": cfg["model_type"]})
    except CostgraphValueError:
        return True
    kinds = _field(probed_config(other)[1], "layer_types")
    return isinstance(kinds, list) and len(kinds) != n + 1


def _kv_follows_heads(cfg: dict, nested: str | None, target, present: list) -> bool:
    """Whether the key/value heads may follow the query heads at the probes, after a probe with heads of their own
    failed: the config.json leaves ``num_key_value_heads`` out (or None) and the config sets it to
    ``num_attention_heads`` (``__post_init__``), so that a model whose shapes need the two equal builds and runs
    (Zamba2's adapters add a ``[2h]`` output to K's and V's projections: transformers 5.24 modeling_zamba2.py
    ``Zamba2Attention``). The draft then writes the query heads' symbol for both."""
    inner = cfg.get(nested) if nested else cfg
    given = inner.get("num_key_value_heads") if isinstance(inner, dict) else None
    return "num_key_value_heads" in present and given is None \
        and _field(target, "num_key_value_heads") == _field(target, "num_attention_heads")


def _cycled(kinds: list, layers: int) -> list:
    """GPT-Neo's ``attention_types`` (``[[kinds, repeats], ...]``, expanded to one kind per layer and required to
    have ``num_layers`` of them: configuration_gpt_neo.py ``validate_architecture``) for ``layers`` layers: the
    shortest period of the config's list, repeated, then the start of one more period."""
    period = next(m for m in range(1, len(kinds) + 1)
                  if all(kinds[i] == kinds[i % m] for i in range(len(kinds))))
    pattern = list(kinds[:period])
    out = [[pattern, layers // period]]
    if layers % period:
        out.append([pattern[:layers % period], 1])
    return out


def _draft_once(torch, cfg, config, class_name, probe: Probe, name: str, built=None):
    """The draft of one probe; ``built``: ``(probe config, its config object)`` where the probe's check built them
    (:func:`_probed_runs`), else built here."""
    from .model_file import body_lines
    from .writer import Sizer

    probed, probed_object = built or (_probe_config(cfg, config, probe), None)
    try:
        probed_object = probed_object or _config_object(probed)
    except CostgraphValueError as e:   # trial 9: worded as the user's config refused ("give ... a config.json")
        sizes = ", ".join(f"{k}={v}" for k, v in probe.symbol_values().items())
        reason = e.message.split(f"{shown(cfg['model_type'])}: ", 1)[-1]
        raise CostgraphValueError(
            f"transformers refuses the probe configuration ({sizes}) of model_type {shown(cfg['model_type'])}: "
            f"{reason}", hint="costgraph import sets the size fields to probe values and keeps the config's other "
                              "fields; one that must follow the sizes breaks the probe: try the model_type alone "
                              f"(costgraph import {cfg['model_type']}), or write this family's model file by hand "
                              "(docs: a new architecture in ten minutes)") from None
    model = _build(torch, probed, class_name, probed_object)
    # as built, before the forward: FSMT's forward remakes a position table longer than the probe's t (k28text2)
    params = int(sum(p.numel() for p in model.parameters()))
    try:
        facts, fl, counted = _forward(torch, model, probe.b, probe.s, decoder_length(probe.index))
    except Exception as e:  # noqa: BLE001 - a forward transformers cannot run on meta, worded for the user
        raise CostgraphValueError(f"the forward of {type(model).__name__} fails on the meta device at the probe "
                                  f"configuration: {type(e).__name__}: {str(e)[:200]}",
                                  hint="costgraph import traces one forward of the inputs the model takes (token "
                                       "ids, decoder ids, pixels, audio or its features) at the probe sizes; write "
                                       "this family's model file by hand (docs: a new architecture in ten minutes)") \
            from None
    _, target = probed_config(config)
    real = {sym: field_value(target, f) for sym, (_, f) in probe.symbols.items()}
    sz = Sizer(probe, real={s: v for s, v in real.items() if isinstance(v, int) and not isinstance(v, bool)},
               rounded=rounded_widths(target, probe.symbol_values()),
               causal_lm=type(model).__name__.endswith(("ForCausalLM", "LMHeadModel")))
    rotary = any("rotary" in m.cls.lower() for m in facts.walk())
    try:
        inputs, lines = body_lines(facts, sz, rotary)
    except ValueError as e:
        raise CostgraphValueError(f"cannot draft {type(model).__name__}: {e}",
                                  hint="costgraph import drafts models whose layers are a ModuleList") from None
    return type(model).__name__, inputs, lines, sz, params, fl, counted


def draft_model(source, *, name: str | None = None, check: bool = True) -> Draft:
    """Draft a model file from the transformers model of ``source``.

    ``source``: a parsed config.json (a dict with ``model_type``), its path, a ``model_type`` of the
    installed transformers (its default config) or a transformers class name (``"LlamaForCausalLM"``).
    ``name``: the model's name in the file (default: the model_type). ``check``: compare the draft's
    parameters and forward FLOPs with PyTorch at both probes (:class:`Check`). A config drafted before in this
    process (the same fields, class, name and check; the last :data:`DRAFT_CACHE_SIZE` kept) is not traced again: a
    copy of that draft is returned.

    Raises
    ------
    TorchMissing
        torch or transformers is not installed (the hint names the extra).
    CostgraphValueError
        transformers cannot build the config, or the model has no ModuleList of layers.
    """
    import copy
    import json

    torch = _require()
    cfg, class_name = _config(source)
    key = (json.dumps(cfg, sort_keys=True, default=str), class_name, name, check)
    if key in _DRAFTED:
        _DRAFTED.move_to_end(key)
    else:
        _DRAFTED[key] = _draft(torch, cfg, class_name, name, check)
        while len(_DRAFTED) > DRAFT_CACHE_SIZE:
            _DRAFTED.popitem(last=False)   # the least recently used
    return copy.deepcopy(_DRAFTED[key])


#: how many drafts a process keeps (least recently used dropped first): a draft is a few kB of text and
#: checks, and a process drafts a handful of configs (``derive`` of a config.json after ``import`` of it, a
#: test module's families); a long-running caller drafting many configs stays bounded
DRAFT_CACHE_SIZE = 32

#: the drafts made in this process, by (config, class, name, check), most recently used last: drafting is a
#: function of the config and the installed torch and transformers, so a config drafted twice is traced once
_DRAFTED: OrderedDict[tuple, Draft] = OrderedDict()


def _probed_runs(torch, cfg, config, class_name, model_name, present, period, derived, even_kv, stages=0):
    """(probes, runs): the two probes and their drafts. A config whose model requires ``head_dim`` to be
    ``hidden_size / num_attention_heads`` (Helium's ``o_proj`` is h → h: transformers 5.24 modeling_helium.py) fails at
    probes that set the head size apart; it is then probed again with the head size following h / a, read back so.
    A model whose layers double the KV heads (MiMo-V2-Flash's sliding-window layers) fails where the query heads per
    KV head are odd: it is probed again with twice as many (``Probe.make``'s ``even_groups``). These tries only where
    the first fails and the config has the fields; the first failure is reported where every try fails. Each probe is
    one a config's validator accepts (:func:`costgraph.drafting.probe_fit.fitted`)."""
    built: dict = {}   # id(probe) → (its config, the config object): built once, by the check, for its draft

    def builds(probe):
        probed = _probe_config(cfg, config, probe)
        built[id(probe)] = (probe, probed, _config_object(probed))

    def runs(**variant):
        made = [Probe.make(present, i, period, derived, even_kv, stages=stages, **variant) for i in (0, 1)]
        probes = fitted([list_values(frames_values(vision_values(p, present, probe_primes(p.index)), present),
                                     present, probe_primes(p.index))   # k28vision13, k28speech2, k28patch2
                         for p in made], builds)
        made = {k: v[1:] for k, v in built.items() if v[0] is probes[0] or v[0] is probes[1]}
        return probes, [_draft_once(torch, cfg, config, class_name, p, model_name, made.get(id(p))) for p in probes]

    try:
        return runs()
    except CostgraphValueError as e:
        first = e
    heads = "num_attention_heads" in present
    variants = [v for v, has in (({"head_follows": True}, heads and "head_dim" in present),
                                 ({"even_groups": True}, heads and "num_key_value_heads" in present)) if has]
    for variant in variants:
        try:
            return runs(**variant)
        except CostgraphValueError:
            pass
    raise first from None


def _draft(torch, cfg: dict, class_name: str | None, name: str | None, check: bool) -> Draft:
    """:func:`draft_model` of a read config (``cfg`` with its model_type; ``class_name`` or None)."""
    from .. import model as cg
    from .dual_draft import draft_dual
    from .model_file import render

    import transformers

    dual = draft_dual(torch, cfg, class_name, name, check, _draft, _check_at_config)    # two towers (CLIP): drafting/dual.py
    if dual is not None:
        return dual
    config = _config_object(cfg)
    nested, target = probed_config(config)
    present, unset = _present(transformers, cfg, class_name, nested, target)
    model_name = name or "".join(ch if ch.isalnum() else "_" for ch in cfg["model_type"])
    periods = [_field(target, f) for f in PERIOD_FIELDS]
    periods.append(_types_period(_field(target, "layer_types")))
    period = max((v for v in periods if isinstance(v, int) and not isinstance(v, bool)), default=1)
    period = layer_period(target, period)
    derived = any(hasattr(target, f) for f in (*MAMBA2_HEAD, *MAMBA2_COMPUTED_HEAD))
    even_kv = any(hasattr(target, f) for f in EVEN_KV)
    stages = stage_count(target)     # a staged backbone's per-stage lists (ConvNeXt's hidden_sizes, depths)
    if stages:
        keys = getattr(type(target), "attribute_map", {}) or {}     # Swin's num_attention_heads is its num_heads
        present += [*(f for f in STAGE_LISTS if isinstance(_field(target, f), (list, tuple)) and f not in keys),
                    *(f for f in STAGE_SCALARS if isinstance(_field(target, f), int))]
        follow = {"num_hidden_layers": stages,      # num_stages, Swin's num_layers: the lists' length
                   "num_attention_heads": _field(target, "num_heads"),    # Swin's attribute_map: the list itself
                   "hidden_size": _field(target, "hidden_size") if "embed_dim" in present else None}   # Swin's last
        present[:] = [f for f in present if f not in follow or _field(target, f) != follow[f]]      # width
    args = (torch, cfg, config, class_name, model_name)
    try:
        probes, runs = _probed_runs(*args, present, period, derived, even_kv, stages)
    except CostgraphValueError:
        if not _kv_follows_heads(cfg, nested, target, present):
            raise
        present.remove("num_key_value_heads")
        probes, runs = _probed_runs(*args, present, period, derived, even_kv, stages)
    torch_class, inputs, lines, sz, _, _, _ = runs[0]
    keys = getattr(type(target), "attribute_map", {}) or {}
    fields = {sym: f for sym, (_, f) in probes[0].symbols.items() if sym in sz.used}
    real = {sym: int(field_value(target, f)) for sym, f in fields.items() if f not in unset}
    if sz.stages and "image" not in sz.used:      # a backbone's image side set by no field: the config's s
        real["s"] = IMAGE_SIDE
    prefix = f"{nested}." if nested else ""
    mapping = {sym: prefix + keys.get(f, f) for sym, f in fields.items()}   # as config.json names it (GPT-2: n_embd)
    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    header = [f"# Drafted by `costgraph import` from transformers {transformers.__version__} `{torch_class}`",
              f"# (model_type {cfg['model_type']}) on the meta device. Read it before relying on it: it was compared",
              "# with PyTorch at two probe configurations (parameters and forward FLOPs, at the end of the file).",
              "# config.json fields: " + ", ".join(f"{s} = {f}" for s, f in mapping.items())]
    sz.warnings += [f"{prefix}{keys.get(f, f)} is None in the config: the draft's {sym} has no value there; give it "
                    f"with --set {sym}=N (or {prefix}{keys.get(f, f)} in the config.json)"
                    for sym, f in fields.items() if f in unset]
    header += [f"# warning: {w}" for w in sz.warnings]
    context = _field(target, "max_position_embeddings")
    text = render(model_name, header, inputs, lines, sz, mapping, real, "imported",
                  context if isinstance(context, int) and not isinstance(context, bool) else None)
    result = Draft(text, model_name, cfg["model_type"], torch_class, versions, mapping, real, list(sz.warnings),
                   list(sz.todos), confirmed=(runs[1][1], runs[1][2]) == (inputs, lines))
    if not result.confirmed:
        result.warnings.append("the second probe drafted another file: some size is not read from the config")
    built = _loaded(cg, text, model_name, result) if check else None
    if built is not None:
        for p, run in zip(probes, runs):
            values = _probe_values(p, sz)
            got = built.costs("model", convention="matmul").evaluate(None, values)
            result.checks.append(Check(p.index, values, run[4], int(got["params"]), run[5], int(got["flops_forward"]),
                                       None if run[6] == run[5] else run[6]))
        _check_at_config(torch, cfg, class_name, built, result)
    return result


def _present(transformers, cfg: dict, class_name: str | None, nested, target) -> tuple[list[str], list[str]]:
    """(present, unset): the canonical size fields :func:`_draft` probes in ``target`` (the config, or its nested
    text config ``nested``), less those a family sets from others, plus the count fields left None (``unset``)."""
    _refuse_image_fields(target)
    present = present_fields(target, pixels=_reads_pixels(transformers, class_name))
    if "patch_size" in present and "image_size" not in present and isinstance(_field(target, "num_mel_bins"), int):
        present.remove("patch_size")    # AST: its patches' count the config's spectrogram sets (drafting/spectrogram.py)
        if "num_mel_bins" in present:   # and its Mel bins (a spectrogram of the config's size: k28wav12's convention)
            present.remove("num_mel_bins")
    if "embedding_size" in present and _field(target, "embedding_size") == _field(target, "hidden_size"):
        present.remove("embedding_size")    # k28text13: RoFormer's follows h (None: no embeddings_project), not probed
    if "num_hidden_layers" in present and _fixed_layer_list(cfg, nested, target):
        present.remove("num_hidden_layers")
    if isinstance(_field(target, "tubelet_size"), (list, tuple)) and len(_field(target, "tubelet_size")) == 3:
        present.append(TUBELET_LIST)     # ViViT's [frames, height, width] tubelet (k28vision13)
    if square_lists(target):
        present.append(SQUARE_LISTS)     # InternVL's [448, 448] image, [14, 14] patches (k28patch2)
    unset = unset_counts(target, present)
    present += unset
    return present, unset


def _probe_values(p: Probe, sz) -> dict:
    """The draft's symbols at probe ``p`` (those the draft uses) and its input lengths: ``b``; ``s`` where it is the
    input's (a vision encoder's s is derived; a convolutional backbone's image side is s where no field sets it); a
    speech encoder's samples ``L`` (its frames derived); an encoder-decoder's decoder length ``t``."""
    values = {s: v for s, v in p.symbol_values().items() if s in sz.used}
    values.update(b=p.b) if sz.seq or (sz.stages and "image" in sz.used) else values.update(b=p.b, s=p.s)
    if sz.front_config:     # a speech encoder's probe runs s samples of raw audio: L (its frames derived); a
        values[sz.front_config[0].split(" = ")[0]] = p.s     # FastConformer's s frames of a spectrogram: T
    if "t" in sz.used:      # an encoder-decoder's decoder length (:mod:`.inputs_seq2seq`)
        values["t"] = decoder_length(p.index)
    return values


#: the image fields a vision config holds as sizes: never 0 or negative (no default config of transformers 5.24 holds
#: one so; a 0 there is no part left out, as a 0 of :func:`present_fields` is, but an image of no pixels)
IMAGE_FIELDS = ("image_size", "patch_size", "num_channels")


def _refuse_image_fields(config) -> None:
    """Refuse an image size, patch size or channel count at 0 or below (the meta forward would fail on it, or the
    probe would leave it out and trace an image of no pixels: ``image_size = 0`` made ``Conv2d`` refuse a
    kernel "greater than actual input size"), naming the key."""
    for f in IMAGE_FIELDS:
        v = _field(config, f)
        if isinstance(v, int) and not isinstance(v, bool) and v <= 0:
            raise CostgraphValueError(f"config.json key '{f}' must be a positive whole number, got {v}",
                                      hint=f"write '{f}' as the released config.json does: a JSON number above 0 "
                                           "(ViT-Base: image_size 224, patch_size 16, num_channels 3)")


def _reads_pixels(transformers, class_name: str | None) -> bool:
    """Whether the class's forward takes ``pixel_values`` and no ``input_ids`` (a vision encoder: BEiT's)."""
    import inspect

    cls = getattr(transformers, class_name, None) if class_name else None
    params = inspect.signature(cls.forward).parameters if cls is not None else {}
    return "pixel_values" in params and "input_ids" not in params


def _filled(cfg: dict) -> dict:
    """``cfg`` with the fields a config leaves None that the probes set to follow others (:func:`_probe_fields`:
    Ministral's ``head_dim`` h / a, Nemotron's ``num_key_value_heads`` a) set so at the config's own sizes, as the
    draft reads them."""
    config = _config_object(cfg)
    nested, target = probed_config(config)
    heads, hidden = _field(target, "num_attention_heads"), _field(target, "hidden_size")
    if not (isinstance(heads, int) and isinstance(hidden, int) and heads > 0):
        return cfg
    keys = getattr(type(target), "attribute_map", {}) or {}
    fill = {keys.get(f, f): v for f, v in (("num_key_value_heads", heads), ("head_dim", hidden // heads))
            if f in target.to_dict() and _field(target, f) is None}
    if not fill:
        return cfg
    if nested is None:
        return {**cfg, **fill}
    inner = cfg.get(nested) if isinstance(cfg.get(nested), dict) else {}
    return {**cfg, nested: {**inner, **fill}}


def _check_at_config(torch, cfg: dict, class_name: str | None, built, result: Draft) -> None:
    """``result.config_params``: PyTorch's parameters of the model built on meta from the config itself, and the
    draft's at the config's values (``result.values``); a warning where they differ or the model does not build."""
    try:
        model = _build(torch, _filled(cfg), class_name)
    except CostgraphValueError as e:
        result.warnings.append(f"not compared at the config's own sizes: {str(e).splitlines()[0]}")
        return
    from ..errors import CostgraphError

    params = int(sum(p.numel() for p in model.parameters()))
    try:
        got = params_at_config(built, result.values, result.mapping)
    except CostgraphError as e:     # a size the config's own values make fractional or negative
        result.warnings.append(f"the draft does not evaluate at the config's own sizes: {str(e).splitlines()[0]}")
        return
    result.config_params = [params, got]
    if params != got:
        result.warnings.append(f"parameters at the config's own sizes: torch {params:,}, draft {got:,}: a size is "
                               "written as a number the config's fields set otherwise")


def _loaded(cg, text: str, model_name: str, result: Draft):
    """The draft's model, or None where a draft with modules left as TODO does not load (the layer's dataflow runs
    through a module not drafted: Inkling's): the TODOs say what is missing; a draft without TODO must load."""
    from ..errors import CostgraphError

    try:
        return cg.loads(text, path=f"<import {model_name}>")
    except CostgraphError as e:
        if not result.todos:
            raise
        result.warnings.append(f"the draft does not load ({str(e).splitlines()[0]}) while modules are left as TODO: "
                               "not compared with PyTorch")
        return None
