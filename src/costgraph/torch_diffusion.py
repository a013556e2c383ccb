"""Diffusion Transformers for ``costgraph verify`` (:mod:`costgraph.verify` builds
``DIFFUSION_TYPES`` here instead of :func:`costgraph.torch_measure.build_model`): diffusers' class of a diffusers ``config.json``
(``_class_name``) built on the meta device, its forward taking one denoising step's inputs.
diffusers is an optional dependency (the ``diffusion`` extra: ``pip install -e '.[diffusion]'``);
``torch`` is passed in by the caller (which has checked it is installed), so this module
imports nothing of costgraph's but its error and diffusers only when called.
"""
from __future__ import annotations

from .errors import CostgraphValueError

#: diffusers version the PyTorch tier was checked with (tests/models/test_dit.py)
DIFFUSERS_VERSION = "0.42.1"
#: mapping entries (hf_mapping.toml) built by diffusers, not transformers: verify calls :func:`build_diffusion`
DIFFUSION_TYPES = frozenset({"dit", "sd3"})
#: costgraph's mapping entry → diffusers' class name
CLASSES = {"dit": "DiTTransformer2DModel", "sd3": "SD3Transformer2DModel"}
#: text tokens of SD3's pipeline (77 CLIP + 256 T5), the mapping's T
SD3_TEXT_TOKENS = 333


class DiffusersMissing(CostgraphValueError):
    """``costgraph verify`` of a diffusion Transformer without diffusers installed."""


def _diffusers():
    try:
        import diffusers
    except ImportError:
        raise DiffusersMissing(
            "costgraph verify of a diffusion Transformer (DiT, SD3) needs Hugging Face diffusers, which is not "
            "installed", hint=f"install the diffusion extra: pip install -e '.[diffusion]' (or "
                              f"pip install diffusers=={DIFFUSERS_VERSION})") from None
    return diffusers


def build_diffusion(torch, model_type: str, config_dict: dict, *, train: bool = True, dtype: str = "bfloat16",
                    text_tokens: int = SD3_TEXT_TOKENS, **_):
    """diffusers' ``DiTTransformer2DModel`` (``dit``; also for the legacy ``Transformer2DModel``
    configs of the DiT-XL-2 releases) or ``SD3Transformer2DModel`` (``sd3``) built with
    ``from_config`` on meta in ``dtype``, train mode, every parameter requiring grad.

    Wrapped so that ``inputs_for(torch, b, s)`` (what ``torch_measure.make_inputs`` calls; ``s``
    unused: the tokens are fixed by the latent size) makes one step's inputs on meta — latents
    ``[b, in_channels, sample_size, sample_size]`` in ``dtype``, ``timestep`` ``[b]``, and DiT's
    ``class_labels`` ``[b]`` (int64) or SD3's ``encoder_hidden_states`` ``[b, text_tokens,
    joint_attention_dim]`` and ``pooled_projections`` ``[b, pooled_projection_dim]`` — and the
    forward returns the predicted ``sample`` as ``logits``. The wrapper adds no parameters and no
    operations; its name is the inner class's followed by ``Step``.

    Raises :class:`DiffusersMissing` (with the install command) when diffusers is not installed."""
    from types import SimpleNamespace

    diffusers = _diffusers()
    cls = getattr(diffusers, CLASSES[model_type])
    cfg = {k: v for k, v in config_dict.items() if not k.startswith("_")}
    logging = diffusers.utils.logging
    level = logging.get_verbosity()
    logging.set_verbosity_error()   # not the notice that `.to(dtype)` keeps no module in fp32 (there is none)
    try:
        with torch.device("meta"):
            inner = cls.from_config(cfg).to(getattr(torch, dtype))
    finally:
        logging.set_verbosity(level)
    c = inner.config

    class Wrapper(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.config = SimpleNamespace(is_encoder_decoder=False)

        def inputs_for(self, torch_, b: int, s: int) -> dict:
            pd = next(self.parameters()).dtype
            z = torch_.zeros
            kw = {"hidden_states": z((b, c.in_channels, c.sample_size, c.sample_size), dtype=pd, device="meta"),
                  "timestep": z((b,), dtype=torch_.long if model_type == "dit" else pd, device="meta")}
            if model_type == "dit":
                kw["class_labels"] = z((b,), dtype=torch_.long, device="meta")
            else:
                kw["encoder_hidden_states"] = z((b, text_tokens, c.joint_attention_dim), dtype=pd, device="meta")
                kw["pooled_projections"] = z((b, c.pooled_projection_dim), dtype=pd, device="meta")
            return kw

        def forward(self, use_cache=False, **kwargs):
            return SimpleNamespace(logits=self.model(**kwargs).sample)

    Wrapper.__name__ = Wrapper.__qualname__ = f"{type(inner).__name__}Step"
    model = Wrapper(inner)
    model.train(train)
    for p in model.parameters():
        p.requires_grad_(True)
    return model
