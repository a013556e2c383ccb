"""A ``vllm serve`` or SGLang launch line read as ``costgraph infer``'s options: :func:`read_serving`.

The line (a shell script or the command alone) is split into words by
:mod:`costgraph.launch.shell`, never run. Its command is ``vllm serve MODEL ...``,
``python -m vllm.entrypoints.openai.api_server --model MODEL ...`` or
``python -m sglang.launch_server --model-path MODEL ...``. Read as the runtimes name them
(vllm-project/vllm ``vllm/engine/arg_utils.py`` EngineArgs; sgl-project/sglang
``python/sglang/srt/server_args.py`` ServerArgs):

====================================  ===============================  ===========================
vLLM                                  SGLang                           costgraph
====================================  ===============================  ===========================
MODEL / ``--model``                   ``--model-path``                 MODEL (the model id)
``--tensor-parallel-size``, ``-tp``   ``--tp-size``, ``--tp``          ``tp``
``--pipeline-parallel-size``, ``-pp`` ``--pp-size``                    ``pp``
``--data-parallel-size``, ``-dp``     ``--dp-size``                    ``gpus`` = tp·pp·dp (fit)
``--enable-expert-parallel``          ``--ep-size``                    ``ep``
                                      ``--enable-dp-attention``        ``dp_attention`` = dp
``--max-model-len``                   ``--context-length``             ``max_model_len``
``--gpu-memory-utilization``          ``--mem-fraction-static``        ``gpu_memory_utilization``
``--kv-cache-dtype``                  ``--kv-cache-dtype``             ``kv`` (fp8* → fp8)
``--block-size``                      ``--page-size``                  ``page``
``--quantization``, ``--dtype``       ``--quantization``, ``--dtype``  ``weights``
``--max-num-seqs``                    ``--max-running-requests``       ``max_num_seqs``
``--max-num-batched-tokens``                                           ``max_num_batched_tokens``
``--kv-cache-memory-bytes``                                            ``kv_memory``
====================================  ===============================  ===========================

SGLang's line sets ``runtime`` to ``sglang`` (its KV cache as SGLang sizes it). Prefix caching
(``--enable-prefix-caching``) is noted: its saving needs the shared prefix (``--shared-prefix S``).
Arguments that change no cost (host, port, API keys, chat templates, logging) are ignored; others
are listed as unknown, never taken.
"""

from __future__ import annotations

import re

from ..errors import CostgraphValueError
from .result import Launch
from .shell import unset_message, unset_names
from .text import located, quoted, whole

_VLLM = {"tensor-parallel-size": "tp", "tp": "tp", "pipeline-parallel-size": "pp", "pp": "pp",
         "data-parallel-size": "dp", "dp": "dp", "max-model-len": "max_model_len",
         "gpu-memory-utilization": "gpu_memory_utilization", "kv-cache-dtype": "kv", "block-size": "page",
         "quantization": "weights", "q": "weights", "dtype": "dtype", "max-num-seqs": "max_num_seqs",
         "max-num-batched-tokens": "max_num_batched_tokens", "kv-cache-memory-bytes": "kv_memory",
         "kv-cache-memory": "kv_memory", "model": "model"}
_SGLANG = {"tp-size": "tp", "tp": "tp", "pp-size": "pp", "dp-size": "dp", "dp": "dp", "ep-size": "ep", "ep": "ep",
           "context-length": "max_model_len", "mem-fraction-static": "gpu_memory_utilization",
           "kv-cache-dtype": "kv", "page-size": "page", "quantization": "weights", "dtype": "dtype",
           "max-running-requests": "max_num_seqs", "model-path": "model", "model": "model"}
_FLAGS = {"enable-expert-parallel", "enable-prefix-caching", "enable-dp-attention", "trust-remote-code",
          "enforce-eager", "enable-chunked-prefill", "disable-log-requests", "disable-log-stats",
          "enable-auto-tool-choice", "no-enable-prefix-caching", "disable-radix-cache", "enable-lora"}
_IGNORED = {"host", "port", "api-key", "served-model-name", "trust-remote-code", "disable-log-requests",
            "disable-log-stats", "uvicorn-log-level", "chat-template", "tokenizer", "tokenizer-mode",
            "download-dir", "load-format", "seed", "tool-call-parser", "enable-auto-tool-choice",
            "reasoning-parser", "max-log-len", "distributed-executor-backend", "revision", "log-level",
            "enforce-eager", "swap-space", "disable-custom-all-reduce", "allowed-origins", "ssl-keyfile",
            "ssl-certfile", "root-path", "response-role", "middleware", "generation-config", "uds",
            "disable-radix-cache", "no-enable-prefix-caching", "cuda-graph-max-bs", "attention-backend"}
_WEIGHTS = {"fp8": "fp8", "awq": "awq", "awq_marlin": "awq", "gptq": "gptq", "gptq_marlin": "gptq",
            "mxfp4": "mxfp4", "modelopt_fp4": "nvfp4", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
            "auto": None}
_KV = {"auto": None, "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "bfloat16": "bf16", "float16": "fp16"}


def read_serving(path: str, text: str, script) -> Launch:
    """The :class:`Launch` of a vLLM or SGLang launch line (module docstring).

    Raises
    ------
    CostgraphValueError
        No ``vllm serve`` / SGLang command, a degree or size that is not a positive whole number, a
        value left to a variable the file does not assign, a quantization or KV cache dtype costgraph
        has no figures for."""
    kind, words = _command(script, path, text)
    launch = Launch(kind, path)
    names = _VLLM if kind == "vllm" else _SGLANG
    got, i = {}, 0
    while i < len(words):
        word, line = words[i]
        if not word.startswith("-"):
            if launch.model is None and "model" not in got:
                got["model"] = (word, line, word)
            else:
                launch.unknown.append(f"{quoted(word)} ({path}:{line})")
            i += 1
            continue
        name = word.lstrip("-").split("=", 1)[0]
        takes = name not in _FLAGS and "=" not in word and i + 1 < len(words) and _value_word(words[i + 1][0])
        value = word.split("=", 1)[1] if "=" in word else (words[i + 1][0] if takes else True)
        if name in names and value is True:
            raise located(f"--{name} takes a value", path, text, line, hint=f"write --{name} VALUE", word=word)
        if name in names:
            got[names[name]] = (value, line, f"{word} {value}" if takes else word)
        elif name in ("enable-expert-parallel", "enable-dp-attention", "enable-prefix-caching"):
            got[name] = (True, line, word)
        elif name in _IGNORED:
            launch.ignored.append(f"--{name} ({path}:{line})")
        else:
            launch.unknown.append(f"{quoted(word)} ({path}:{line})")
        i += 2 if takes else 1
    _apply(got, kind, launch, path, text)
    return launch


def _value_word(word: str) -> bool:
    """Whether ``word`` after an option is its value: not an option, or a negative number (``-4``, as
    argparse reads it), so that the value is refused for what it is."""
    return not word.startswith("-") or re.fullmatch(r"-[0-9.][0-9.eE+-]*", word) is not None


def _command(script, path: str, text: str):
    for words in reversed(script.commands):
        texts = [w for w, _ in words]
        for k, w in enumerate(texts):
            if w.endswith("vllm") and texts[k + 1:k + 2] == ["serve"]:
                return "vllm", words[k + 2:]
            if w in ("vllm.entrypoints.openai.api_server", "sglang.launch_server") and k > 0 and texts[k - 1] == "-m":
                return ("vllm" if w.startswith("vllm") else "sglang"), words[k + 1:]
            if w.endswith("sglang") and texts[k + 1:k + 2] == ["serve"]:
                return "sglang", words[k + 2:]
    raise CostgraphValueError(f"{path}: no vllm serve or SGLang launch_server command found",
                              hint="give the serving line: vllm serve MODEL --tensor-parallel-size 4 ..., or "
                                   "python -m sglang.launch_server --model-path MODEL --tp-size 4 ...")


def _apply(got: dict, kind: str, launch: Launch, path: str, text: str) -> None:
    """The read values ``got`` (costgraph name → ``(value, line, words)``) into ``launch``."""
    for dest, (value, line, words) in got.items():
        missing = unset_names(str(value))
        if missing:
            message, hint = unset_message(words.split()[0], missing[0])
            raise located(message, path, text, line, hint=hint, word=words.split()[0])
    where = {k: f"{path}:{line}" for k, (_, line, _) in got.items()}
    if "model" in got:
        launch.model = str(got["model"][0])
        launch.notes.append(f"model {launch.model}: a Hub id is read from the local cache; give MODEL (a bundled "
                            "name or a config.json) to use another")
    degrees = {}
    for dest in ("tp", "pp", "dp", "ep"):
        if dest in got:
            value, line, words = got[dest]
            degrees[dest] = whole(value, words.split()[0], path, text, line)
            if dest != "dp":
                launch.set_value(dest, degrees[dest], where[dest], words)
    tp, pp, dp = degrees.get("tp", 1), degrees.get("pp", 1), degrees.get("dp", 1)
    if "enable-expert-parallel" in got:
        if dp != 1:
            launch.notes.append(f"--enable-expert-parallel with data parallel {dp}: experts over tp × dp = "
                                f"{tp * dp} devices; costgraph's ep is at most --tp (per replica)")
        launch.set_value("ep", tp, where["enable-expert-parallel"], "--enable-expert-parallel (EP = TP)")
    if "enable-dp-attention" in got:
        launch.set_value("dp_attention", dp, where["enable-dp-attention"], f"--enable-dp-attention, dp {dp}")
    launch.set_value("gpus", tp * pp * dp, where.get("tp", where.get("pp", where.get("dp", f"{path}"))),
                     f"TP {tp} × PP {pp} × DP {dp}")
    for dest in ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "page"):
        if dest in got:
            value, line, words = got[dest]
            launch.set_value(dest, whole(value, words.split()[0], path, text, line), where[dest], words)
    for dest in ("gpu_memory_utilization", "kv_memory"):
        if dest in got:
            launch.set_value(dest, str(got[dest][0]), where[dest], got[dest][2])
    _dtypes(got, launch, path, text, where)
    if "enable-prefix-caching" in got:
        launch.notes.append("--enable-prefix-caching: its saving needs the prompt tokens shared (--shared-prefix S)")
    if kind == "sglang":
        launch.set_value("runtime", "sglang", path, "python -m sglang.launch_server")


def _dtypes(got: dict, launch: Launch, path: str, text: str, where: dict) -> None:
    """``weights`` from ``--quantization`` (else ``--dtype``), ``kv`` from ``--kv-cache-dtype``."""
    for dest, table in (("weights", _WEIGHTS), ("dtype", _WEIGHTS), ("kv", _KV)):
        if dest not in got:
            continue
        value, line, words = got[dest]
        if value not in table:
            raise located(f"{quoted(words)}: costgraph has no figures for it", path, text, line,
                          hint="give --weights / --kv on the command line (costgraph infer --help)")
        target = "weights" if dest == "dtype" else dest
        if table[value] is not None and not (dest == "dtype" and "weights" in launch.values):
            launch.set_value(target, table[value], where[dest], words)
