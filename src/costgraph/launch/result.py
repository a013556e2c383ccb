"""The typed result of reading a launch file: :class:`Launch`.

A reader of :mod:`costgraph.launch` turns a file users already run (a Megatron-LM script, a torchtitan
job TOML, a DeepSpeed JSON, an accelerate YAML, a ``vllm serve`` / SGLang line) into one
:class:`Launch`: the model (a bundled model file and configuration, dimension values and model
options, or a model id), the option values keyed by costgraph's own option names (the ``dest`` of
``train``/``plan``/``fit``/``infer``: ``tp``, ``zero``, ``precision``, ...), where each came from
(``file:line`` and the file's own words), the arguments that change no cost (``ignored``) and the
ones the reader does not know (``unknown``: warned, never taken). Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Origin:
    """Where a value came from: ``where`` (``file:line``) and ``text``, the file's own words
    (``--tensor-model-parallel-size 8``, ``[parallelism] tensor_parallel_degree = 1``), or the
    default it is (``Megatron-LM's default``)."""

    where: str
    text: str

    def __str__(self) -> str:
        return f"{self.where} ({self.text})"


@dataclass
class Launch:
    """A launch file read into costgraph's terms.

    Attributes
    ----------
    kind : str
        ``megatron``, ``torchtitan``, ``deepspeed``, ``accelerate``, ``vllm`` or ``sglang``.
    path : str
        The file as the user named it.
    model : str or None
        A bundled model name (``gpt``, ``llama``, ``deepseek_v3``) or, from a serving line, the
        model id it serves; None when the file names none (DeepSpeed, accelerate).
    config : str or None
        A configuration of the bundled model (``llama-3-8b``).
    dims : dict
        Dimension values (``--set h=4096``), whole numbers.
    options : dict
        Model options (``--set tied=true``).
    values : dict
        Command options by their ``dest`` (``tp``, ``pp``, ``zero``, ``precision``, ``global_batch``, ...).
    origins : dict
        For each key of ``values`` and for ``set NAME`` of ``dims``/``options``: its :class:`Origin`.
    ignored : list of str
        The file's arguments that change no cost (learning rate, paths, logging), with their line.
    unknown : list of str
        Arguments the reader does not know, with their line: warned, not taken.
    notes : list of str
        What was derived or assumed (a framework default, a degree resolved from ``--gpus``).
    weak : set of str
        Keys of ``values`` that yield to the command line (the devices of a launcher template:
        ``torchrun --nnodes ${SLURM_NNODES:-1}``), noted instead of refused.
    text : str
        The file's text as read (to locate an error found once the command line is known; not in
        :meth:`to_dict`).
    """

    kind: str
    path: str
    model: str | None = None
    config: str | None = None
    dims: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    origins: dict = field(default_factory=dict)
    ignored: list = field(default_factory=list)
    unknown: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    weak: set = field(default_factory=set)
    text: str = field(default="", repr=False)

    def set_value(self, dest: str, value, where: str, text: str) -> None:
        """Record option ``dest`` = ``value`` read at ``where`` from the file's words ``text``."""
        self.values[dest] = value
        self.origins[dest] = Origin(where, text)

    def set_dim(self, name: str, value, where: str, text: str) -> None:
        """Record the model's dimension (an int) or option (a bool) ``name`` = ``value``."""
        (self.options if isinstance(value, bool) else self.dims)[name] = value
        self.origins[f"set {name}"] = Origin(where, text)

    def set_pairs(self) -> list[str]:
        """The dimension values and model options as ``--set`` pairs (``h=4096``, ``tied=false``)."""
        return [f"{k}={v}" for k, v in self.dims.items()] + \
            [f"{k}={'true' if v else 'false'}" for k, v in self.options.items()]

    def to_dict(self) -> dict:
        """The launch as JSON data: ``kind``, ``file``, ``model``, ``config``, ``set`` (dimension values
        and model options), ``options`` (by ``dest``), ``from`` (each key's ``file:line`` and the
        file's words), ``ignored``, ``unknown``, ``notes``."""
        return {"kind": self.kind, "file": self.path, "model": self.model, "config": self.config,
                "set": {**self.dims, **self.options}, "options": dict(self.values),
                "from": {k: {"where": o.where, "text": o.text} for k, o in self.origins.items()},
                "ignored": list(self.ignored), "unknown": list(self.unknown), "notes": list(self.notes),
                "yields": sorted(self.weak)}
