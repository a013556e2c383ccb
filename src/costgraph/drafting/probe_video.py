"""Probe fields of the vision backbones and video encoders of task k28vision13 (issue 28 item 2), kept apart
from :mod:`costgraph.drafting.probe` (which merges them in): their :data:`FIELDS`, the :data:`TUBELET_LIST` marker
and the fields :func:`vision_values` sets on a probe (:func:`costgraph.drafting.api._probed_runs` calls it on
each). Torch-free, imports nothing of the package.

Probe primes (task k28vision13's range 1409 … 1597, in ``primes.PRIMES``): ``n_c`` 1409 / 1423, ``tb`` 1427 /
1429; ``f_t`` (no symbol) is the tubelets a video, 2 at both probes: ``num_frames = tb · f_t``, so that VideoMAE's
sinusoid table (transformers 5.24 modeling_videomae.py ``get_sinusoid_encoding_table``, built in Python at
``(f/tb)·(image/p)²`` rows of h) stays small.
"""

from __future__ import annotations

#: config field → (symbol, what it says): Pixio's class tokens (transformers 5.24 configuration_pixio.py
#: ``n_cls_tokens``); a video's frames ``[b, f, c, image, image]`` and the frames of a tubelet, the Conv3d patch
#: embedding's temporal kernel and stride (configuration_videomae.py ``num_frames``, ``tubelet_size``)
FIELDS: dict[str, tuple[str, str]] = {
    "n_cls_tokens": ("n_c", "class tokens put in front of the patches"),
    "num_frames": ("f", "frames per video"),
    "tubelet_size": ("tb", "frames per tubelet (the patch embedding's temporal kernel and stride)"),
}
#: all of them vision fields: probed only in a config without ``vocab_size`` (``probe.VISION``)
VISION = tuple(FIELDS)
#: the marker :func:`costgraph.drafting.api._draft` puts among the present fields of a config whose ``tubelet_size``
#: is a list ``[frames, height, width]`` (ViViT's: transformers 5.24 configuration_vivit.py, default ``[2, 16, 16]``,
#: the Conv3d's kernel and stride; no ``patch_size`` field): probed as ``[tb, p, p]``, read back as ``tb``
#: (``tubelet_size[0]``) and ``p`` (``tubelet_size[1]``)
TUBELET_LIST = "tubelet_size[t, p, p]"


def vision_values(probe, present, p: dict):
    """``probe`` (a :class:`~costgraph.drafting.probe.Probe` made for a config whose canonical fields include
    ``present``) with this module's fields of ``present`` set from ``p``, its primes
    (:func:`costgraph.drafting.probe.probe_primes`), and read back as their symbols, and a ViViT tubelet list ``[tb,
    p, p]`` where :data:`TUBELET_LIST` is in ``present``."""
    values = {"n_cls_tokens": p["n_c"], "tubelet_size": p["tb"], "num_frames": p["tb"] * p["f_t"]}
    for name in [f for f in present if f in values]:
        probe.fields[name] = values[name]
        probe.symbols.setdefault(FIELDS[name][0], (values[name], name))
    if TUBELET_LIST in present:
        probe.fields["tubelet_size"] = [p["tb"], p["p"], p["p"]]
        probe.symbols.update(tb=(p["tb"], "tubelet_size[0]"), p=(p["p"], "tubelet_size[1]"))
    return probe
