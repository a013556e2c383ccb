"""Launch files users already run, read into costgraph's options (``--launch FILE``, issue 32).

:func:`read_launch` reads a file by its kind and returns a :class:`~costgraph.launch.result.Launch`:

* a Megatron-LM launch script or argument list (:mod:`~costgraph.launch.megatron`, the model by
  :mod:`~costgraph.launch.megatron_model`), split by :mod:`~costgraph.launch.shell`;
* a torchtitan job TOML (``.toml``: :mod:`~costgraph.launch.torchtitan`);
* a DeepSpeed config JSON (``.json``: :mod:`~costgraph.launch.deepspeed`);
* an accelerate config YAML (``.yaml``/``.yml``: :mod:`~costgraph.launch.accelerate`);
* a ``vllm serve`` or SGLang launch line (:mod:`~costgraph.launch.serving`).

A file is read, never executed: no variable is expanded from the environment, no command run, no
other file opened; it is read under the limits of a ``config.json`` (:mod:`~costgraph.launch.text`).

>>> import os, tempfile
>>> from costgraph.launch import read_launch
>>> path = os.path.join(tempfile.mkdtemp(), "serve.sh")
>>> _ = open(path, "w").write("vllm serve gpt2 --tensor-parallel-size 4 --max-model-len 1024 --port 8000\\n")
>>> launch = read_launch(path)
>>> launch.kind, launch.model, launch.values
('vllm', 'gpt2', {'tp': 4, 'gpus': 4, 'max_model_len': 1024})
>>> launch.ignored == [f"--port ({path}:1)"]
True
"""

from __future__ import annotations

from .result import Launch, Origin

#: the kinds of file, by what they are read for
TRAINING = ("megatron", "torchtitan", "deepspeed", "accelerate")
SERVING = ("vllm", "sglang")


def read_launch(path: str, gpus: int | None = None) -> Launch:
    """The :class:`Launch` of the file at ``path``: by its extension (``.toml`` torchtitan, ``.json``
    DeepSpeed, ``.yaml``/``.yml`` accelerate), else a shell script or argument list holding a
    ``vllm serve``/SGLang line or a Megatron-LM ``pretrain_*.py`` command. ``gpus``: the command
    line's device count (torchtitan's ``-1`` degrees, DeepSpeed's batch arithmetic).

    Raises
    ------
    CostgraphValueError
        The file cannot be read (missing, a folder, too large, not UTF-8 text), or the reader of its
        kind refuses it (each error located at ``file:line:column`` with a hint)."""
    from ..arguments import path_like
    from .text import located, read

    path = path_like(path, "path")
    return _read(path, gpus, located, read)


def _read(path: str, gpus: int | None, located, read) -> Launch:
    """:func:`read_launch`'s reader of ``path`` by its kind, the text kept on the result."""
    low = path.lower()
    if low.endswith(".toml"):
        from .torchtitan import read_torchtitan

        text = read(path, "torchtitan job file (.toml)")
        return _kept(read_torchtitan(path, text, gpus), text)
    if low.endswith(".json"):
        from .deepspeed import read_deepspeed

        text = read(path, "DeepSpeed config (.json)")
        return _kept(read_deepspeed(path, text, gpus), text)
    if low.endswith((".yaml", ".yml")):
        from .accelerate import read_accelerate

        text = read(path, "accelerate config (.yaml)")
        return _kept(read_accelerate(path, text), text)
    from .shell import ShellError, commands

    text = read(path, "launch script")
    try:
        script = commands(text)
    except ShellError as e:
        raise located(e.message, path, text, e.line, hint="a launch script as bash reads it") from None
    if any(_serving(words) for words in script.commands):
        from .serving import read_serving

        return _kept(read_serving(path, text, script), text)
    from .megatron import read_megatron

    return _kept(read_megatron(path, text, script, gpus), text)


def _kept(launch: Launch, text: str) -> Launch:
    launch.text = text
    return launch


def _serving(words: list) -> bool:
    texts = [w for w, _ in words]
    return any((w.endswith(("vllm", "sglang")) and texts[k + 1:k + 2] == ["serve"])
               or w in ("sglang.launch_server", "vllm.entrypoints.openai.api_server") for k, w in enumerate(texts))


__all__ = ["read_launch", "Launch", "Origin", "TRAINING", "SERVING"]
