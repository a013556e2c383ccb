"""The options of ``costgraph fit`` beside the layout's (issue 31 item 1), declared once.

:class:`FitOptions` holds the options that are fit's own: ``--hardware``, ``--host-memory`` (training) and
the serving options (``group="serve"``: any one given asks for ``--serve``); the layout's options and
``--memory``, ``--reserve``, ``--efficiency-profile`` are train's (:mod:`costgraph.train_options`, through
``commands/_analysis.train_arguments``). The command's ``argparse`` arguments and its lists of serving
and training options (``commands/fit.py``) are generated from these fields
(:mod:`costgraph.option_fields`); the field names are :func:`costgraph.fit`'s keywords (``keep``: its
``keep``, the text of ``--not-quantized``), and a :class:`FitOptions` is its ``options`` argument (and
:meth:`costgraph.Model.fit`'s): ``mode``, ``gpus``, ``tp``, ``memory``, ``reserve`` and
``efficiency_profile`` are fields too, without a flag here (the command's own and ``train_arguments``' add
those flags).

>>> FitOptions().batch
1

Light at import (the standard library and :mod:`costgraph.choices`).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import choices
from .infer_options import SCOPES, generate_count, prompt_count
from .option_fields import keywords_checked, option


@keywords_checked()
@dataclass(frozen=True, kw_only=True)
class FitOptions:
    """``costgraph fit``'s options, in ``--help``'s order, then those whose flags another declaration
    adds (module docstring); the options object of :func:`costgraph.fit` and :meth:`costgraph.Model.fit`."""

    hardware: object = option("--hardware", "a hardware preset (costgraph hardware): its device memory", default=None)
    host_memory: object = option("--host-memory", "training with CPU offload: the host memory of one node (2TB, "
                                                  "1.5TiB; default the preset's node where published: DGX H100 2 TB); "
                                                  "the host memory per node is judged against it", default=None,
                                 unit="bytes", group="train", metavar="SIZE")
    prompt: object = option("--prompt", "serving: prompt tokens per sequence P", default=None, unit="tokens",
                            group="serve", type=prompt_count)
    generate: object = option("--generate", "serving: generated tokens per sequence G", default=None, unit="tokens",
                              group="serve", type=generate_count)
    batch: int = option("--batch", "serving: concurrent sequences per replica (default 1)", default=1,
                        unit="sequences", group="serve", type=int)
    weights: object = option("--weights", "serving: weight dtype (default bf16; a config.json: what it ships), fp8, "
                                          "int4, awq, ... as costgraph infer", default=None, group="serve")
    kv: str = option("--kv", "serving: KV cache dtype (default bf16), fp8, int8, ...", default=choices.DEFAULT_KV,
                     group="serve")
    quantized: object = option("--quantized", "serving: which weights --weights applies to", default="linear",
                               cli_default=None, choices=SCOPES, group="serve")
    keep: object = option("--not-quantized", "serving: module names kept in 16 bits", default=(), cli_default=None,
                          group="serve", metavar="NAMES")
    memory_convention: str = option("--memory-convention", "which figure of the preset is the device memory "
                                                           "(training and serving alike): "
                                    + choices.MEMORY_CONVENTION.help(), choices=choices.MEMORY_CONVENTION,
                                    default=None)   # None: cuda; refused with --memory, as any one given
    # the API's: their flags are another declaration's (--train/--serve the command's; --gpus, --tp, --memory,
    # --reserve, --efficiency-profile: commands/_analysis.train_arguments)
    mode: str = option(None, "train (--train, the default) or serve (--serve)", default="train",
                       choices=("train", "serve"))
    gpus: int = option(None, "devices in all (--gpus)", default=1, unit="devices", check="whole")
    tp: int = option(None, "serving: the tensor-parallel degree of one replica (--tp), at most gpus", default=1,
                     unit="devices", check="whole")   # counts: "8", 8.0 read as --gpus 8 (option_fields.is_count)
    memory: object = option(None, "device memory instead of the preset's, bytes or a size: 80GB (--memory)",
                            default=None, unit="bytes")
    reserve: object = option(None, "memory kept free on each device: a fraction or a size (--reserve)", default=None,
                             unit="fraction or bytes")
    efficiency_profile: object = option(None, "training: a calibration profile (a path or costgraph.calibrate's "
                                              "result) whose memory reserve is the verdict's (--efficiency-profile)",
                                        default=None)
