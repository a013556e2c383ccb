"""Inference analyses over the operator graph: prefill and decode steps
(:mod:`.phases`), weight and KV-cache dtypes as data (:mod:`.dtypes`,
``dtypes.toml``), roofline latency, throughput and capacity on a hardware
preset (:mod:`.roofline`), what serving adds (:mod:`.serving`), and the quantities of
``costgraph infer`` with their units (:mod:`.quantities`; its text and JSON are drawn by
:mod:`costgraph.export.inference_report`).

>>> from costgraph import inference
>>> m = inference.load("llama")                        # the key axis split (see phases)
>>> inf = inference.Inference(m, weights="int4", kv="fp8")
>>> inf.decode().flops                                 # doctest: +SKIP
>>> inference.infer(m, hardware="h100-sxm", prompt=512, generate=128, batch=8,
...                 values=m.values("llama-3-8b")).values["time_per_output_token"]  # doctest: +SKIP
"""

from .loading import load, load_hf_config
from .phases import G, KEYS, N, P, Q, Inference, Step, inference_step, split_keys
from .roofline import InferenceReport, infer, machine, step_seconds

__all__ = ["G", "KEYS", "N", "P", "Q", "Inference", "InferenceReport", "Step", "infer", "inference_step",
           "load", "load_hf_config", "machine", "split_keys", "step_seconds"]
