"""The transformers model a draft traces (:mod:`costgraph.drafting.api`): which class a config builds
(:func:`auto_class`), built on the meta device at a probe configuration (:func:`_build`, the multimodal RoPE's
sections fitted to the probe's head: :func:`_fit_mrope`), its probe forward run and traced with the inputs its kind
takes (:func:`_forward`: token ids, pixels, a video, a spectrogram, raw audio, decoder ids), and the guard that no
weight is ever allocated (:func:`_no_weights_built`). Needs the ``torch`` extra (imported by the caller and passed in).
"""

from __future__ import annotations

import contextlib

from ..arguments import shown
from ..errors import CostgraphValueError
from .configs import _config_object
from .probe import mrope_sections

#: which model a config drafts, said where transformers refuses to build it
AUTO_HINT = ("costgraph import drafts the model transformers builds for the config: its causal language model "
             "(AutoModelForCausalLM) where transformers maps one, else its base model (AutoModel: a vision or speech "
             "encoder, an encoder-decoder); name another class with a transformers class as the source")


def auto_class(model_type: str):
    """``AutoModelForCausalLM`` where transformers maps ``model_type`` to a causal language model
    (``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``), else ``AutoModel`` (``MODEL_MAPPING_NAMES``: ViT, wav2vec2, T5, ...;
    the base model the import bench's ``--mapping base`` measures)."""
    from transformers import AutoModel, AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES

    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and model_type in MODEL_MAPPING_NAMES:
        return AutoModel
    return AutoModelForCausalLM


def _build(torch, cfg: dict, class_name: str | None, config=None):
    """The model of ``cfg`` (its config object ``config``, built here where not given) on the meta device."""
    import transformers

    config = _config_object(cfg) if config is None else config
    # batched_mm: MoE experts as one bmm per routed token (the meta kernel of grouped_mm wants sizes that
    # are multiples of 8, which probe primes are not); FlopCounterMode counts the same 2·tokens·k·H·w
    kwargs = {"attn_implementation": "eager", "dtype": torch.bfloat16, "experts_implementation": "batched_mm"}
    try:
        with torch.device("meta"):
            if class_name is not None:
                model = getattr(transformers, class_name)._from_config(config, **kwargs)
            else:
                model = auto_class(cfg["model_type"]).from_config(config, **kwargs)
    except Exception as e:  # noqa: BLE001 - transformers' refusal, worded for the user
        raise CostgraphValueError(f"transformers cannot build model_type {shown(cfg['model_type'])} at the probe "
                                  f"configuration: {type(e).__name__}: {str(e)[:200]}", hint=AUTO_HINT) from None
    model.train(False)
    _fit_mrope(model)
    return model


def _fit_mrope(model) -> None:
    """A multimodal RoPE's sections set to the probe's rotary half-width
    (:func:`costgraph.drafting.probe.mrope_sections`): the modules' ``mrope_section`` comes from ``rope_parameters``
    or the modeling file's default for a 128 head (transformers 5.24 modeling_qwen2_vl.py
    ``Qwen2VLRotaryEmbedding.__init__``), which the forward's split refuses at a probe's head size; the half-width is the module's ``inv_freq`` length (its partial rotary factor included)."""
    for m in model.modules():
        inv = getattr(m, "inv_freq", None)
        scaled = mrope_sections(getattr(m, "mrope_section", None), inv.shape[-1]) if hasattr(inv, "shape") else None
        if scaled is not None:
            m.mrope_section = scaled


def _forward(torch, model, b: int, s: int, t: int | None = None):
    """Facts, forward FLOPs under the routed-experts convention and FlopCounterMode's own count (grouped_mm counted)
    of one ``[b, s]`` forward (an encoder-decoder's decoder: ``[b, t]``, :mod:`costgraph.drafting.inputs_seq2seq`);
    the two counts differ only where experts ran every token through every expert
    (:mod:`costgraph.drafting.routing`, which also stands in for a router's data-dependent counts)."""
    import inspect

    from ..torch_measure import flop_counter, meta_forward
    from .inputs_frames import frames_inputs
    from .inputs_mel import mel_inputs
    from .inputs_audio import audio_inputs
    from .inputs_conv import conv_pixels
    from .inputs_patches import patch_inputs
    from .probe_lists import pixels_of
    from .inputs_merge_sizes import merge_size_inputs
    from .inputs_dual import dual_inputs
    from .inputs_seq2seq import seq2seq_inputs
    from .inputs_video import video_pixels
    from .inputs_text import text_inputs
    from .routing import stand_ins
    from .trace import trace

    ids = torch.zeros((b, s), dtype=torch.long, device="meta")
    counter = flop_counter()
    seen = []

    def run(m, inputs):
        with torch.no_grad(), meta_forward(), counter, _no_weights_built(torch), \
                stand_ins(torch, m, b * s) as routing:
            m(**inputs)
        seen.append(routing)

    params = inspect.signature(model.forward).parameters
    cfg = model.config
    square = all(isinstance(getattr(cfg, f, None), int) for f in ("num_channels", "image_size"))
    # a speech encoder's spectrogram: FastConformer's frames first [b, s frames, mel], else Whisper's [b, mel, s frames]
    audio = frames_inputs(torch, model, b, s) or mel_inputs(torch, model, b, s)
    if audio is not None:
        inputs = audio
    elif (video := video_pixels(torch, model, b)) is not None:    # a video [b, frames, c, image, image] (VideoMAE)
        inputs = video
    elif (dual := dual_inputs(torch, model, b, s)) is not None:   # a dual encoder: token ids and an image (CLIP)
        inputs = dual
    elif "input_ids" not in params and "pixel_values" in params and square:
        # a vision encoder (ViTModel, transformers 5.24 modeling_vit.py ``forward(pixel_values, ...)``): an image
        # [b, c, image, image] of the config's channels and size, in the model's dtype; s = (image/p)² + 1 follows
        inputs = {"pixel_values": torch.zeros((b, cfg.num_channels, cfg.image_size, cfg.image_size),
                                              dtype=torch.bfloat16, device="meta")}
    elif (raw := audio_inputs(torch, model, params, b, s)) is not None:   # raw audio [b, samples] (wav2vec2): s samples
        inputs = raw
    elif (listed := pixels_of(torch, model, params, b)) is not None:    # InternVL's list sizes (k28patch2)
        inputs = listed
    elif (pixels := conv_pixels(torch, model, b, s)) is not None:    # a convolutional backbone of no image_size
        inputs = {"pixel_values": pixels}
    elif (text := text_inputs(torch, model, b, s, t)) is not None:    # FSMT: the decoder's mask given (k28text13)
        inputs = text
    elif (patches := patch_inputs(torch, model, params, b, s)) is not None:   # a VLM's tower: flattened patches
        inputs = patches
    elif (merged := merge_size_inputs(torch, model, params, b, s)) is not None:   # VideoLLaMA3's tower (k28patch2)
        inputs = merged
    else:
        inputs = seq2seq_inputs(torch, model, b, s, t) or {"input_ids": ids, "use_cache": False}
    if "lengths" in inspect.signature(model.forward).parameters:
        # XLM (transformers 5.24 modeling_xlm.py XLMModel.forward) checks ``assert lengths.max().item() <= slen``,
        # which meta ids cannot answer: every sequence is whole (s tokens), given on the CPU
        inputs["lengths"] = torch.full((b,), s, dtype=torch.long)
    if "lang_ids" in inspect.signature(model.forward).parameters:
        # X-MOD (transformers 5.24 modeling_xmod.py XmodOutput.lang_adapter) runs each language's adapter on the rows
        # ``hidden_states[lang_ids == i]``, a count meta ids cannot answer: every sequence in the config's first
        # language (what the model does with its default_language set to it), the ids given on the CPU
        inputs["lang_ids"] = torch.zeros((b,), dtype=torch.long)
    facts = trace(torch, model, inputs, run)
    counted = int(counter.get_total_flops())
    return facts, seen[0].routed_flops(counted, counter.get_flop_counts(), type(model).__name__), counted


@contextlib.contextmanager
def _no_weights_built(torch):
    """A forward that builds a module with real weights fails at once: BigBird's (transformers 5.24
    modeling_big_bird.py ``set_attention_type``) rebuilds its attention when a sequence is too short for block-sparse
    attention, on the CPU, at the probe's sizes (gigabytes per Linear, initialised in Python).

    Through torch's own hook (``torch.nn.modules.module.register_module_parameter_registration_hook``, which
    ``Module.register_parameter`` calls for every parameter it registers), removed on exit; the hook refuses only
    in the thread that entered, so modules built meanwhile by other threads are untouched (thread-safe: nothing of
    torch's is replaced)."""
    import threading

    from torch.nn.modules.module import register_module_parameter_registration_hook

    drafting = threading.get_ident()

    def refuse(module, name, param):
        if threading.get_ident() == drafting and param is not None and param.device.type != "meta":
            raise RuntimeError(f"the forward builds {type(module).__name__}.{name} with weights on "
                               f"{param.device.type} (a module made during the forward, not by the model's "
                               "constructor)")

    handle = register_module_parameter_registration_hook(refuse)
    try:
        yield
    finally:
        handle.remove()
