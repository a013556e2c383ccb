"""The model of a Megatron-LM launch script: a bundled family and its dimensions (:func:`read_model`).

``training/megatron_args.toml`` maps each bundled family's dimensions to Megatron's arguments
(model → arguments, for Megatron's memory estimate); here it is read in reverse. The family is the
one whose fixed arguments the script matches:

* ``--multi-latent-attention`` → ``deepseek_v3`` (MLA, MoE with ``--moe-layer-freq``
  ``([0]*k+[1]*n)``: ``k_d = k`` dense layers first, ``--mtp-num-layers`` → option ``mtp``);
* ``--swiglu`` and ``--normalization RMSNorm`` → ``llama`` (``--num-experts`` → option ``moe``,
  untied unless ``--untie-embeddings-and-output-weights`` is absent → option ``tied``,
  ``--add-qkv-bias`` → ``qkv_bias``, ``--qk-layernorm`` → ``qk_norm``);
* neither, with LayerNorm and learned absolute positions → ``gpt`` (``--disable-bias-linear`` →
  option ``bias = false``; its MLP is 4h wide and its head tied, as Megatron's defaults).

Each mapped argument whose entry is a dimension name gives that dimension (Megatron's defaults first:
``--ffn-hidden-size`` 4h, or ⌊(8h/3)/64⌋·64 with ``--swiglu``; ``--kv-channels`` h / heads;
``--num-query-groups`` the heads without ``--group-query-attention``: arguments.py l. 1320-1333,
transformer_config.py ``num_query_groups``); an entry that is a product (GPT's ``4h``) or a fixed
value is checked: a script it does not hold is refused, located, with what the family has.
"""

from __future__ import annotations

import re

from .result import Launch, Origin
from .text import located


def read_model(a: dict, lines: dict, launch: Launch, path: str, text: str) -> None:
    """The model of Megatron's arguments ``a`` (attribute → value, defaults filled) into ``launch``:
    ``model``, ``dims``, ``options`` (module docstring). ``lines``: each given argument's line.

    Raises
    ------
    CostgraphValueError
        A needed argument missing (``--num-layers``, ``--hidden-size``, ...), or a combination no
        bundled family has (GELU with RMSNorm, GPT with rotary positions or GQA, ...)."""
    from ..training.megatron import _families

    def where(key):
        return f"{path}:{lines[key]}" if key in lines else "Megatron-LM's default"

    _needed(a, lines, path, text)
    _fill(a)
    family = _family(a, lines, path, text)
    fams = _families()
    entry = dict(fams[family])
    while "like" in entry:
        entry = {**fams[entry["like"]], **{k: v for k, v in entry.items() if k != "like"}}
    extra = {}
    if a.get("num_experts") is not None and family == "llama":
        extra = dict(entry.get("if_option", {}).get("moe", {}))
        launch.set_dim("moe", True, where("num_experts"), f"--num-experts {a['num_experts']}")
    launch.model = family
    shape = {"gpt": "LayerNorm, GELU, learned positions", "llama": "--swiglu --normalization RMSNorm",
             "deepseek_v3": "--multi-latent-attention"}[family]
    launch.origins["model"] = Origin(where("multi_latent_attention" if family == "deepseek_v3" else "normalization"),
                                     shape)
    skip = {"kv_channels"} if family == "deepseek_v3" else set()
    checks = []
    for key, spec in [*entry.items(), *extra.items()]:
        if key in ("source", "like", "options_ignored", "if_option") or key in skip:
            continue
        if isinstance(spec, str) and key != "normalization":
            if a.get(key) is None:
                if key == "vocab_size":
                    launch.notes.append("V: the file gives no --vocab-size (its tokenizer's): give --set V=N")
                    continue
                raise located(f"Megatron-LM needs --{key.replace('_', '-')} (model '{family}': {spec})", path, text, 1,
                              hint=f"add --{key.replace('_', '-')} N to the script's arguments (a whole number)")
            if spec in launch.dims and key not in extra:   # a second argument for one dimension: checked
                checks.append((key, spec))
                continue
            launch.set_dim(spec, a[key], where(key), f"--{key.replace('_', '-')} {a[key]}")
        elif isinstance(spec, dict) and "option" in spec:
            on = bool(a.get(key)) != bool(spec.get("negate"))
            launch.set_dim(spec["option"], on, where(key),
                           f"--{key.replace('_', '-')}" if a.get(key) else f"no --{key.replace('_', '-')}")
        elif isinstance(spec, dict) and "dense_first" in spec:
            launch.set_dim(spec["dense_first"], _dense_first(a, lines, path, text), where(key),
                           f"--moe-layer-freq {a.get(key)}")
        else:
            checks.append((key, spec))
    _check(a, checks, launch, family, lines, path, text)
    _options(a, family, launch, where)
    _unmapped(a, lines, {k for k, _ in [*entry.items(), *extra.items()]}, family, path, text)


#: the model arguments a family's mapping may leave out without changing its cost
_HARMLESS = {"max_position_embeddings", "kv_channels", "disable_bias_linear", "add_bias_linear", "add_qkv_bias",
             "qk_layernorm", "mtp_num_layers", "group_query_attention", "position_embedding_type"}
#: the model arguments read (megatron.NUMBERS, TEXTS and FLAGS that describe the model)
_MODEL_KEYS = {"num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
               "ffn_hidden_size", "vocab_size", "max_position_embeddings", "num_experts", "moe_router_topk",
               "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "q_lora_rank", "kv_lora_rank",
               "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim", "mtp_num_layers", "moe_layer_freq",
               "multi_latent_attention", "swiglu", "normalization", "untie_embeddings_and_output_weights"}


def _unmapped(a: dict, lines: dict, mapped: set, family: str, path: str, text: str) -> None:
    """A model argument the script gives that the family's mapping does not read is refused (never dropped)."""
    for key in sorted(_MODEL_KEYS & set(lines), key=lambda k: lines[k]):
        if key in mapped or key in _HARMLESS or (key == "moe_layer_freq" and str(a[key]) == "1"):
            continue
        if key == "moe_router_topk" and a.get("num_experts") is None:
            continue
        name = key.replace("_", "-")
        raise located(f"--{name}: the bundled '{family}' has no such part", path, text, lines[key],
                      hint="write the model as a .cg file and give it as MODEL with --set")


def _needed(a: dict, lines: dict, path: str, text: str) -> None:
    for key in ("num_layers", "hidden_size", "num_attention_heads", "micro_batch_size", "seq_length"):
        if a.get(key) is None:
            raise located(f"the file gives no --{key.replace('_', '-')}, which Megatron-LM requires", path, text, 1,
                          hint=f"add --{key.replace('_', '-')} N to the script")


def _fill(a: dict) -> None:
    """Megatron's derived defaults (arguments.py l. 1320-1333, transformer_config.py)."""
    h, heads = a["hidden_size"], a["num_attention_heads"]
    if a.get("ffn_hidden_size") is None:
        a["ffn_hidden_size"] = int((4 * h * 2 / 3) / 64) * 64 if a.get("swiglu") else 4 * h
    if a.get("kv_channels") is None:
        a["kv_channels"] = h // heads
    if not a.get("group_query_attention"):
        a["num_query_groups"] = heads
    if a.get("num_experts") is not None and a.get("moe_ffn_hidden_size") is None:
        a["moe_ffn_hidden_size"] = a["ffn_hidden_size"]      # arguments.py l. 1650-1651
    if a.get("max_position_embeddings") is None:
        a["max_position_embeddings"] = a["seq_length"]
    a["add_bias_linear"] = not a.get("disable_bias_linear")


def _family(a: dict, lines: dict, path: str, text: str) -> str:
    if a.get("multi_latent_attention"):
        return "deepseek_v3"
    norm, pos = a.get("normalization"), a.get("position_embedding_type")
    if a.get("swiglu") and norm == "RMSNorm":
        if pos not in ("rope", "none"):
            raise located(f"--position-embedding-type {pos} with SwiGLU and RMSNorm: the bundled llama has rotary "
                          "positions", path, text, lines.get("position_embedding_type", 1),
                          hint="--position-embedding-type rope")
        return "llama"
    if not a.get("swiglu") and norm == "LayerNorm":
        if pos != "learned_absolute":
            raise located(f"--position-embedding-type {pos} with LayerNorm and GELU: the bundled gpt has learned "
                          "absolute positions", path, text, lines.get("position_embedding_type", 1),
                          hint="--position-embedding-type learned_absolute for GPT, or --swiglu with RMSNorm and "
                               "rope for Llama")
        return "gpt"
    raise located(f"{'SwiGLU' if a.get('swiglu') else 'a GELU MLP'} with {norm}: no bundled model has it (gpt: "
                  "LayerNorm and GELU; llama: RMSNorm and SwiGLU)", path, text,
                  lines.get("normalization", lines.get("swiglu", 1)),
                  hint="write the model as a .cg file and give it as MODEL with --set")


def _value(spec, dims: dict):
    if isinstance(spec, int) and not isinstance(spec, bool):
        return spec
    if isinstance(spec, str):
        return dims.get(spec)
    if isinstance(spec, list):
        out = 1
        for x in spec:
            v = _value(x, dims)
            if v is None:
                return None
            out *= v
        return out
    if isinstance(spec, dict) and set(spec) == {"num", "den"}:
        n, d = _value(spec["num"], dims), _value(spec["den"], dims)
        return None if n is None or d is None else n // d
    return None


def _check(a, checks, launch, family, lines, path, text) -> None:
    """The family's fixed arguments and products (GPT's ``ffn_hidden_size = 4h``) against the script's."""
    for key, spec in checks:
        if (key == "add_bias_linear" and family == "gpt") or (key == "group_query_attention" and family == "llama"):
            continue   # gpt: option bias (below); llama: kv = heads is MHA
        if key == "add_bias_linear" and a["add_bias_linear"] and not spec:
            launch.notes.append(f"--add-bias-linear (Megatron's default; no --disable-bias-linear): the bundled "
                                f"{family} has no linear biases: they are not counted")
            continue
        want = spec if isinstance(spec, bool) or key == "normalization" else _value(spec, launch.dims)
        got = a.get(key)
        if isinstance(spec, bool):
            got = bool(got)
        if want is not None and got != want:
            name = key.replace("_", "-")
            raise located(f"--{name} {got}: the bundled '{family}' has {name} = {want}", path, text,
                          lines.get(key, 1), hint="write the model as a .cg file and give it as MODEL with --set")


def _options(a: dict, family: str, launch: Launch, where) -> None:
    if family == "gpt":
        launch.set_dim("s_max", a["max_position_embeddings"], where("max_position_embeddings"),
                       f"--max-position-embeddings {a['max_position_embeddings']}")
        launch.set_dim("bias", a["add_bias_linear"], where("disable_bias_linear"),
                       "--disable-bias-linear" if not a["add_bias_linear"] else "no --disable-bias-linear")
    if family == "llama":
        for opt, key in (("qkv_bias", "add_qkv_bias"), ("qk_norm", "qk_layernorm")):
            if a.get(key):
                launch.set_dim(opt, True, where(key), f"--{key.replace('_', '-')}")
    if family == "deepseek_v3" and a.get("mtp_num_layers"):
        launch.set_dim("mtp", True, where("mtp_num_layers"), f"--mtp-num-layers {a['mtp_num_layers']}")
        launch.set_dim("D", a["mtp_num_layers"], where("mtp_num_layers"), f"--mtp-num-layers {a['mtp_num_layers']}")


def _dense_first(a: dict, lines: dict, path: str, text: str) -> int:
    """``k`` of ``--moe-layer-freq`` ``([0]*k+[1]*n)`` (k dense layers, then MoE ones; read, never evaluated)."""
    freq = a.get("moe_layer_freq")
    m = re.fullmatch(r"\(?\[0\]\*([0-9]{1,6})\+\[1\]\*([0-9]{1,6})\)?", str(freq).replace(" ", "").strip("'\""))
    if m and int(m.group(1)) + int(m.group(2)) == a["num_layers"]:
        return int(m.group(1))
    if freq == 1 or freq == "1":
        return 0
    n = a["num_layers"]
    raise located("--moe-layer-freq: the bundled deepseek_v3 takes ([0]*k+[1]*n), k dense layers then n MoE "
                  "layers, n + k = --num-layers", path, text, lines.get("moe_layer_freq", 1),
                  hint=f"e.g. --moe-layer-freq '([0]*3+[1]*{n - 3})' for --num-layers {n} (DeepSeek-V3's 3 dense "
                       "layers), in the ASCII digits 0-9" if isinstance(n, int) and n > 3 else
                  "write ([0]*k+[1]*n) with whole numbers in the ASCII digits 0-9")
