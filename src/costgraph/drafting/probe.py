"""Probe configurations for drafting a model file, and reading a size back as config symbols.

A transformers config is built at a *probe* configuration where every size field is a product of
primes no other field shares (issue 28 item 1): then every shape factor of every weight names the
config fields it comes from, products included. ``a·d`` is told from ``h`` because ``h`` holds a prime
(``x``, the head size GPT-2 derives as ``h/a``) that neither ``a`` nor ``d`` holds. A second probe at
other primes must give the same draft (:func:`costgraph.drafting.api.draft_model` checks it).

Torch-free and SymPy-free: integers and names only.

>>> probe = Probe.make(("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim"), 0)
>>> probe.symbol_values()["h"], probe.symbol_values()["a"], probe.symbol_values()["d"]
(40040, 77, 680)
>>> probe.cover(77 * 680), probe.cover(3 * 40040), probe.cover(13)
('a * d', '3 * h', None)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .primes import PRIMES as _PRIMES
from .probe_video import FIELDS as VIDEO_FIELDS, VISION as VIDEO_VISION     # k28vision13

#: config field (transformers' canonical name, after ``attribute_map``) → the symbol a draft names it,
#: and what it says. Fields not listed keep the config's value and are written as numbers.
#: An encoder-decoder's causal LM (BartForCausalLM, WhisperForCausalLM: the decoder alone) reads the decoder_*
#: fields, listed first so that the symbol names them; the encoder's (attribute_map's num_attention_heads,
#: num_hidden_layers) are probed at the same values, so that the config's checks pass.
FIELDS: dict[str, tuple[str, str]] = {
    "hidden_size": ("h", "hidden size (d_model)"),
    "decoder_attention_heads": ("a", "attention heads"),
    "decoder_ffn_dim": ("i", "MLP intermediate size"),
    "decoder_layers": ("l", "Transformer layers"),
    "num_decoder_attention_heads": ("a", "attention heads"),     # ProphetNet's decoder (ProphetNetForCausalLM)
    "num_decoder_layers": ("l", "Transformer layers"),
    "num_attention_heads": ("a", "attention heads"),
    "num_key_value_heads": ("kv", "key/value heads"),
    "num_kv_heads": ("kv", "key/value heads"),
    "head_dim": ("d", "attention head size"),
    "intermediate_size": ("i", "MLP intermediate size"),
    "n_inner": ("i", "MLP intermediate size"),
    "ffn_dim": ("i", "MLP intermediate size"),
    "d_ff": ("i", "MLP intermediate size"),
    "dff": ("i", "MLP intermediate size"),       # CTRL's
    "num_layers_per_stack": ("l", "Transformer layers"),     # HRM's, in each of its two stacks (before the inflated
    # num_hidden_layers its __post_init__ sets: layers · H_cycles · (L_cycles + 1), one KV cache slot per call)
    "num_hidden_layers": ("l", "Transformer layers"),
    "vocab_size": ("V", "vocabulary size"),
    "max_position_embeddings": ("s_max", "maximum sequence length (rows of a position table)"),
    "max_target_positions": ("s_max", "maximum sequence length (rows of a position table)"),   # Whisper's decoder
    "num_local_experts": ("E", "experts per MoE layer"),
    "num_experts": ("E", "experts per MoE layer"),
    "n_routed_experts": ("E", "experts per MoE layer"),
    "num_experts_per_tok": ("k", "experts each token passes through (top-k)"),
    "moe_num_experts": ("E", "experts per MoE layer"),                              # Aria's
    "moe_topk": ("k", "experts each token passes through (top-k)"),
    "moe_num_shared_experts": ("n_s", "always-active shared experts (one MLP n_s times as wide)"),
    "moe_intermediate_size": ("m", "expert MLP intermediate size"),
    "lru_width": ("w", "recurrent width (Griffin's RG-LRU)"),
    "conv1d_width": ("K", "convolution width"),
    "conv_kernel": ("K", "convolution width"),
    "conv_L_cache": ("K", "convolution width"),     # LFM's short convolutions
    "expand": ("e", "expansion factor (Mamba's inner width e·h)"),
    "state_size": ("N", "SSM state size per channel"),
    "time_step_rank": ("R", "rank of Δ's projection"),
    "mamba_dt_rank": ("R", "rank of Δ's projection"),
    "q_lora_rank": ("r_q", "query compression rank (MLA)"),
    "kv_lora_rank": ("r_kv", "key/value latent rank (MLA)"),
    "qk_nope_head_dim": ("d_n", "query/key head size without rotary (MLA)"),
    "qk_rope_head_dim": ("d_r", "rotary query/key head size (MLA)"),
    "v_head_dim": ("d_v", "value head size (MLA)"),
    "shared_expert_intermediate_size": ("i_s", "shared expert MLP intermediate size"),
    "shared_intermediate_size": ("i_s", "shared expert MLP intermediate size"),      # Granite 4's shared_mlp
    "moe_shared_expert_intermediate_size": ("i_s", "shared expert MLP intermediate size"),   # Nemotron-H's
    # Mamba-2 mixers (Mamba2Mixer and the hybrids' copies of it: Bamba, Falcon-H1, Granite 4, Nemotron-H, Zamba2)
    "mamba_n_heads": ("hm", "Mamba-2 heads"),
    "n_mamba_heads": ("hm", "Mamba-2 heads"),
    "mamba_num_heads": ("hm", "Mamba-2 heads"),
    "mamba_head_dim": ("dm", "Mamba-2 head size"),
    "mamba_d_ssm": ("di", "Mamba-2 inner width"),
    "mamba_n_groups": ("ng", "Mamba-2 groups of B and C"),
    "mamba_ngroups": ("ng", "Mamba-2 groups of B and C"),
    "n_groups": ("ng", "Mamba-2 groups of B and C"),
    "mamba_d_state": ("N", "SSM state size per channel"),
    "ssm_state_size": ("N", "SSM state size per channel"),
    "mamba_d_conv": ("K", "convolution width"),
    "mamba_expand": ("e", "expansion factor (Mamba's inner width e·h)"),
    "chunk_size": ("C", "chunk size of the chunked SSD scan"),
    "mamba_chunk_size": ("C", "chunk size of the chunked SSD scan"),
    "sliding_window": ("W", "sliding-window width (tokens)"),
    "window_size": ("W", "sliding-window width (tokens)"),      # GPT-Neo's local attention layers
    "block_size": ("Cl", "block size of the lightning attention's blockwise form"),   # MiniMax's
    # Gated DeltaNet (Qwen3-Next's linear-attention layers)
    "linear_num_key_heads": ("hk", "query/key heads of the linear-attention layers"),
    "linear_num_value_heads": ("hv", "value heads of the linear-attention layers"),
    "linear_key_head_dim": ("dk", "query/key head size of the linear-attention layers"),
    "linear_value_head_dim": ("dv", "value head size of the linear-attention layers"),
    "linear_conv_kernel_dim": ("K", "convolution width"),
    # Kimi Delta Attention (Kimi Linear's linear-attention layers)
    "linear_num_heads": ("hl", "heads of the KDA layers"),
    "linear_head_dim": ("dl", "head size of the KDA layers"),
    # Zamba2's shared transformer block: each call's LoRA adapters
    "adapter_rank": ("r_a", "rank of each call's adapters of the shared block"),
    # per-layer embeddings (Gemma 4's, Gemma 3n's per-layer inputs)
    "hidden_size_per_layer_input": ("d_pl", "per-layer input size of each layer"),
    "vocab_size_per_layer_input": ("V_pl", "rows of the per-layer embedding table"),
    # DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2, GLM-5): its heads, head size (at least the rotary
    # head size: the indexer splits its head into the rotary part and the rest) and keys kept per query. ``di`` is
    # the Mamba-2 inner width's symbol too (no config holds both): one prime per probe, above the rotary head size 2·d_r
    "index_n_heads": ("hi", "indexer heads"),
    "index_head_dim": ("di", "indexer head size"),
    "index_topk": ("t_k", "keys each query attends to (index_topk)"),
    # RoCBERT's glyph-shape and pronunciation tables, concatenated with the token embedding (modeling_roc_bert.py)
    "shape_vocab_size": ("V_sh", "rows of the shape embedding table"),
    "shape_embed_dim": ("d_sh", "shape embedding width"),
    "pronunciation_vocab_size": ("V_pr", "rows of the pronunciation embedding table"),
    "pronunciation_embed_dim": ("d_pr", "pronunciation embedding width"),
    "attention_hidden_size": ("w_t", "time-mix width (RWKV's key, value and receptance)"),
    "gated_norm_rank": ("r_g", "rank of the gated norms' gate MLP"),     # A.X-K2's AXK2GatedRMSNorm
    # CPM-Ant (transformers 5.24 configuration_cpmant.py): its head size and MLP width under names of their own, the
    # prompt tokens its forward prepends (prompt_length of each of prompt_types kinds, rows of the token table), its
    # segment types and position-bias buckets (rows of CpmAntSegmentPositionEmbedding's table: G·G + n_b)
    # HRM (transformers 5.24 configuration_hrm_text.py): its forward's high cycles and low cycles per high cycle
    "H_cycles": ("c_H", "high-level cycles (each runs the low stack c_L times, then the high stack)"),
    "L_cycles": ("c_L", "low-level cycles per high-level cycle"),
    "dim_head": ("d", "attention head size"),
    "dim_ff": ("i", "MLP intermediate size"),
    "prompt_length": ("P", "prompt tokens the forward prepends to the sequence"),
    "prompt_types": ("T_p", "prompt types (rows of the token table: P per type)"),
    "segment_types": ("G", "segment types"),
    "position_bias_num_buckets": ("n_b", "relative position buckets"),
    # ProphetNet (transformers 5.24 configuration_prophetnet.py): the decoder's predicting streams and the buckets of
    # its relative positions (ProphetNetNgramSelfAttention.relative_pos_embeddings: h -> num_buckets * heads)
    "ngram": ("n_g", "predicting streams (ProphetNet's n-gram)"),
    "num_buckets": ("nb", "relative position buckets"),
    "router_hidden_size": ("hr", "router width (ZAYA's router MLP and the state it passes between layers)"),
    # vision encoders (ViT, DeiT, DINOv2: transformers 5.24 configuration_vit.py): the image [b, c, image, image] cut
    # into (image/p)² patches of p×p pixels; probed where the config has no vocabulary (a vision tower of its own)
    "image_size": ("image", "image size (pixels per side)"),
    "patch_size": ("p", "patch size (pixels per side)"),
    "num_channels": ("c", "image channels"),
    # speech encoders over a log-Mel spectrogram [b, mel, frames] (Whisper's, Qwen2-Audio's: transformers 5.24
    # modeling_qwen2_audio.py Qwen2AudioEncoder): the Mel bins, and the rows of the position table the stride-2 stem's
    # output adds whole (frames = 2·se)                                                                  (k28feat12)
    "num_mel_bins": ("mel", "log-Mel bins"),
    "max_source_positions": ("se", "encoder positions (rows of the position table; the stem's output length)"),
    # k28tower12: DINOv2 with registers (transformers 5.24 configuration_dinov2_with_registers.py num_register_tokens)
    "num_register_tokens": ("n_r", "register tokens (put between the class token and the patches)"),
    # speech encoders from raw audio (wav2vec2 family: transformers 5.24 modeling_wav2vec2.py
    # ``Wav2Vec2PositionalConvEmbedding``): the positional convolution's groups and width (task k28wav12)
    "num_conv_pos_embedding_groups": ("G_c", "groups of the positional convolution"),
    "num_conv_pos_embeddings": ("K_c", "width of the positional convolution"),
    # Data2VecAudio's width (transformers 5.24 configuration_data2vec_audio.py): its num_conv_pos_embeddings counts the
    # positional convolution layers (5), kept as the config's number (:data:`POS_LAYERS`)
    "conv_pos_kernel_size": ("K_c", "width of the positional convolution"),
    "relative_attention_num_buckets": ("nb", "relative position buckets"),     # k28seq12: T5's T5Attention table
    "encoder_ffn_dim": ("i", "MLP intermediate size"),     # k28seq12: a BART-like encoder's (decoder_ffn_dim's symbol)
    "hidden_dim": ("i", "MLP intermediate size"),     # k28seq12: DistilBERT's FFN width (configuration_distilbert.py)
    "subsampling_conv_channels": ("C_s", "channels of the subsampling stem"),   # k28speech13: FastConformer's, LASR's
    # k28text13: ALBERT's factorised embedding width (modeling_albert.py: tables [V, embedding_size], then to h; ELECTRA's
    # embeddings_project), LUKE's entity table (modeling_luke.py LukeEntityEmbeddings: [entity_vocab_size, entity_emb_size])
    "embedding_size": ("d_emb", "token embedding width (factorised: projected to h)"),
    "entity_vocab_size": ("V_ent", "rows of the entity embedding table"),
    "entity_emb_size": ("d_ent", "entity embedding width"),
    # k28patch13: VLM towers (transformers 5.24 configuration_qwen3_vl.py Qwen3VLVisionConfig; the position table's
    # side is int(num_position_embeddings ** 0.5): modeling_qwen3_vl.py Qwen3VLVisionModel.num_grid_per_side)
    "out_hidden_size": ("h_o", "merger output width (the language model's hidden size)"),
    "projection_intermediate_size": ("i_p", "merger MLP intermediate size"),
    "num_position_embeddings": ("n_pos", "rows of the learned position table (a square)"),
    "projection_size": ("e_j", "joint embedding size (the text head's output)"),   # k28dual13: SigLIP's text head
    "project_dim": ("e_j", "joint embedding size (the text head's output)"),   # k28dual13: AltCLIP's transformation
}
#: k28text13's fields: the probe value of each is its symbol's prime (:data:`_PRIMES`)
TEXT_FIELDS = {"embedding_size": "d_emb", "entity_vocab_size": "V_ent", "entity_emb_size": "d_ent"}
TEXT_FIELDS["src_vocab_size"] = "V_src"    # k28text2: FSMT's encoder table (configuration_fsmt.py src_vocab_size)
FIELDS["src_vocab_size"] = ("V_src", "source vocabulary size (FSMT's encoder table)")     # k28text2
FIELDS.update(VIDEO_FIELDS)     # k28vision13: Pixio's class tokens, a video's frames and tubelets (probe_video.py)
#: the vision fields (:data:`FIELDS`' image, patch and channels, and the register tokens): probed only in a config without ``vocab_size``
VISION = ("image_size", "patch_size", "num_channels", "num_register_tokens", *VIDEO_VISION)     # k28vision13's
#: Mamba2Config's own names: ``num_heads`` and ``head_dim`` are the Mamba-2 heads and their size there (no attention)
MAMBA2_OWN = {"num_heads": "hm"}
#: head-size fields that transformers' configs require to equal the inner width over the Mamba-2 heads
#: (``validate_architecture`` of Mamba2Config, BambaConfig, FalconH1Config, GraniteMoeHybridConfig): probed as
#: "auto" or as that quotient, named by no symbol
MAMBA2_HEAD = ("mamba_d_head",)
#: head sizes a config computes in its ``__post_init__`` from the inner width and the heads, never set (Zamba2's
#: ``mamba_headdim = int(mamba_expand · h) // n_mamba_heads``): the heads must divide the inner width all the same
MAMBA2_COMPUTED_HEAD = ("mamba_headdim",)
#: under MLA (kv_lora_rank present) these follow other fields: K and V have a head per query head, and
#: head_dim is the rotary part (DeepSeek-V3's config); probed at those values, named by no symbol
MLA_FOLLOW = ("num_key_value_heads", "head_dim")

#: config fields of differential attention (transformers 5.24 modeling_diffllama.py ``DiffLlamaAttention.__init__``
#: refuses odd ``num_key_value_heads``: V's KV heads split into two halves): a config holding one is probed with
#: twice the KV heads' prime (and so twice the query heads), read back as ``kv`` and ``a`` all the same
EVEN_KV = ("lambda_std_dev",)

#: symbols that count things rather than size a weight: never read from a shape
COUNTS = frozenset({"l", "k", "C", "W", "Cl", "t_k", "c_H", "c_L", *(f"{c}_{i}" for c in "la" for i in range(1, 5))})

#: the probes' primes: :data:`costgraph.drafting.primes.PRIMES` (``_PRIMES`` here, as before the tables moved)
#: per-stage lists of a hierarchical vision backbone (ConvNeXt: transformers 5.24 configuration_convnext.py
#: ``hidden_sizes``, ``depths``, one entry per stage): entry i (from 0) is the symbol ``{prefix}_{i + 1}``, probed at
#: ``_PRIMES[index][f"{prefix}_{i + 1}"]`` (k28conv12). The widths are 4 × a prime of task k28conv12's range (601 …
#: 691; the 4 so that a bottleneck's width / 4, ResNet's ``reduction``, is whole: written ``h_i / 4``);
#: the depths are counts (:data:`COUNTS`, never read from a shape: a stage's layer list is matched to its own entry
#: by position, so small values cannot collide with a size), kept small so that a probe traces few layers, and
#: different at the two probes. A config of more stages than :data:`STAGES` is probed at its own lists.
STAGE_LISTS: dict[str, tuple[str, str]] = {
    "hidden_sizes": ("h", "channels of stage"),
    "depths": ("l", "layers of stage"),
    # Swin's heads per stage (configuration_swin.py ``num_heads``; SegFormer's ``num_attention_heads``): counts too,
    # named by position (the attention module's heads, the relative position table's second axis), 2 or 4 so that
    # they divide every stage's width (a multiple of 4)
    "num_heads": ("a", "attention heads of stage"),
    "num_attention_heads": ("a", "attention heads of stage"),
}
#: the most stages probed
STAGES = 4
#: a staged backbone's fields of one value, probed with the stage lists only (ALBERT's ``embedding_size`` is
#: another thing): ResNet's stem width (transformers 5.24 configuration_resnet.py ``embedding_size``), RegNet's
#: channels per group of its grouped 3×3 convolutions (configuration_regnet.py ``groups_width``: ``groups =
#: out_channels // groups_width``, modeling_regnet.py ``RegNetXLayer``), where set every stage width's factor too
STAGE_SCALARS: dict[str, tuple[str, str]] = {"embedding_size": ("h_0", "stem channels"),
                                             "groups_width": ("g_w", "channels per group (grouped convolutions)"),
                                             # Swin's stage 1 width, 2^(i-1)·h_e at stage i (a multiple of 4: of
                                             # every probe head count)
                                             "embed_dim": ("h_e", "stage 1's channels (2^(i-1)·h_e at stage i)")}
#: factor of every stage width and of the stem's (above; RegNet's squeeze-excitation reduces a layer's input
#: channels by 4: ``int(round(in_channels / 4))``)
STAGE_WIDTH = 4
#: ``q`` is no symbol: the patches per side (image = p·q, so that n = q² is whole); the vision probes run s = q² + 1
#: (the patches and the class token) in place of :data:`SHAPES`' s
#: ``L`` is no symbol: the audio probes (a config with :data:`AUDIO`'s groups) run :data:`SAMPLES` · L samples of
#: raw audio in place of :data:`SHAPES`' s (the frames the layers run follow from it through the feature encoder)
#: layer counts of probes whose config sets a long layer pattern (each above twice the period)
LAYER_PRIMES = (17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)
#: config fields that set a layer pattern's period (Jamba's attention and expert layers, Zamba's, ERNIE's MoE layers)
PERIOD_FIELDS = ("attn_layer_period", "expert_layer_period", "moe_layer_interval", "full_attention_interval",
                 "sliding_window_pattern", "no_rope_layer_interval", "cross_layer_interval")
#: the field that marks a speech encoder from raw audio (``input_values``): its positional convolution groups
#: ``hidden_size`` channels, so the probe's h holds the groups' prime (``Conv1d(h, h, groups = G_c)`` builds)
AUDIO = "num_conv_pos_embedding_groups"
#: samples per probe prime ``L``: 16 · 733 = 11,728 samples run wav2vec2's feature encoder (receptive field 400,
#: stride 320) to 36 frames (16 · 739: 37), enough for the seven strided convolutions and a few layers' attention
SAMPLES = 16
#: k28speech13: a FastConformer's stem channels (configuration_parakeet.py); its Mel bins probed MEL_STEM·mel, as the
#: stem's Linear (mel // 8 bins) and its stride-2 convolutions (⌊(n − 1)/2⌋ + 1 each) agree only on multiples of 8
STEM, MEL_STEM = "subsampling_conv_channels", 16
#: the field that makes ``num_conv_pos_embeddings`` a count of positional convolution layers, not their width
#: (Data2VecAudio's ``conv_pos_kernel_size``): the count is then not probed (a number in the draft)
POS_LAYERS = "conv_pos_kernel_size"
#: factor of every head size: a rotary fraction of 1/4, 2/5, 1/2 or 3/4 of a head is still even
HEAD = 40
#: (b, s) of the forward each probe traces and counts (s below every probe's s_max)
SHAPES = ((2, 37), (3, 41))


def _primes(n: int) -> dict[int, int]:
    """Prime factorisation of ``n`` ≥ 1: prime → exponent (trial division; sizes are small)."""
    out: dict[int, int] = {}
    p = 2
    while p * p <= n:
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
        p += 1
    if n > 1:
        out[n] = out.get(n, 0) + 1
    return out


def _audio_values(values: dict, p: dict) -> bool:
    """A speech encoder from raw audio's probe values: the positional convolution's groups and width, h holding the
    groups (transformers 5.24 modeling_wav2vec2.py ``Wav2Vec2PositionalConvEmbedding``: h / groups channels a group)."""
    values.update(num_conv_pos_embedding_groups=p["G_c"], num_conv_pos_embeddings=p["K_c"], conv_pos_kernel_size=p["K_c"])
    values["hidden_size"] *= p["G_c"]
    return True


def _input_length(present, p: dict, s: int, audio: bool) -> int:
    """The length the probe's input runs: :data:`SHAPES`' ``s`` for token ids; a vision encoder's n + 1 (s follows the
    image: ``q`` patches a side); a speech encoder's spectrogram frames (k28feat12: twice the position table's rows
    where the config has one, the stem's output adds it whole; else a prime, the stride-2 stem's output ⌊(s−1)/2⌋+1);
    raw audio's samples (:data:`SAMPLES` · L: the layers' frames follow)."""
    if audio:
        return SAMPLES * p["L"]
    if "num_mel_bins" in present and not any(f.startswith("decoder") for f in present):
        return 2 * p["se"] if "max_source_positions" in present else p["frames"]
    if "image_size" in present and "patch_size" in present:
        return p["q"] ** 2 + 1
    return s


@dataclass
class Probe:
    """One probe configuration: the config fields set and the symbol each is read back as.

    ``fields``: canonical config field → probe value; ``symbols``: symbol → (value, field); ``b``, ``s``:
    the batch and sequence length traced."""

    index: int
    fields: dict[str, int] = field(default_factory=dict)
    symbols: dict[str, tuple[int, str]] = field(default_factory=dict)
    b: int = 1
    s: int = 1

    @classmethod
    def make(cls, present, index: int, period: int = 1, derived_head: bool = False, even_kv: bool = False,
             head_follows: bool = False, even_groups: bool = False, stages: int = 0) -> "Probe":
        """The probe ``index`` (0 or 1) for a config whose canonical fields include ``present``. ``period``: the
        longest layer pattern the config sets (Jamba's ``attn_layer_period`` 8): the layers are probed at a prime
        count over twice it (:data:`LAYER_PRIMES`), so that the pattern shows at least twice and folds.
        ``derived_head``: the config derives a Mamba-2 head size (:data:`MAMBA2_HEAD`) that must divide the inner
        width: the expansion then holds the heads' primes (elsewhere it stays small: Zamba's scan loops over it).
        ``even_kv``: the KV heads are twice their prime (:data:`EVEN_KV`). ``head_follows``: ``head_dim`` is set to
        ``hidden_size / num_attention_heads`` and named by no symbol (a model that requires it: Helium's).
        ``even_groups``: twice the query heads per KV head (``g``), so that a model whose layers double the KV heads
        still groups the query heads evenly (MiMo-V2-Flash's sliding-window layers: transformers 5.24
        modeling_mimo_v2_flash.py ``num_key_value_heads * 2 if is_swa``). ``stages``: the stages of a config whose
        :data:`STAGE_LISTS` fields are in ``present`` (1 … :data:`STAGES`): each entry probed as a symbol of its own,
        and the image 2^(stages − 1) times larger, so that every stage's stride-2 downsampling halves a whole side."""
        p = dict(_PRIMES[index])
        if 2 * period >= p["l"]:
            above = [n for n in LAYER_PRIMES if n > 2 * period]
            p["l"] = above[index] if len(above) > index else p["l"]
        kv = p["kv"] * (2 if even_kv else 1)
        a = kv * p["g"] * (2 if even_groups else 1)
        hm = p["hm"] * p["ng"]
        values = {"hidden_size": HEAD * a * p["x"], "num_attention_heads": a, "num_key_value_heads": kv,
                  "num_kv_heads": kv, "ffn_dim": p["i"], "d_ff": p["i"], "dff": p["i"], "head_dim": HEAD * p["d"],
                  "intermediate_size": p["i"], "n_inner": p["i"], "num_hidden_layers": p["l"],
                  "vocab_size": p["V"], "max_position_embeddings": p["s_max"], "max_target_positions": p["s_max"], "num_local_experts": p["E"],
                  "num_experts": p["E"], "n_routed_experts": p["E"], "num_experts_per_tok": p["k"],
                  "moe_num_experts": p["E"], "moe_topk": p["k"], "moe_num_shared_experts": p["n_s"],
                  "moe_intermediate_size": p["m"], "lru_width": HEAD * a * p["w"], "conv1d_width": p["K"], "conv_L_cache": p["K"],
                  "conv_kernel": p["K"], "expand": p["e"], "state_size": p["N"], "time_step_rank": p["R"], "mamba_dt_rank": p["R"],
                  "decoder_attention_heads": a, "decoder_ffn_dim": p["i"], "decoder_layers": p["l"],
                  "num_decoder_attention_heads": a, "num_decoder_layers": p["l"],
                  "q_lora_rank": p["r_q"], "kv_lora_rank": p["r_kv"], "qk_nope_head_dim": p["d_n"],
                  "qk_rope_head_dim": 2 * p["d_r"], "v_head_dim": p["d_v"], "shared_expert_intermediate_size": p["i_s"],
                  "shared_intermediate_size": p["i_s"], "moe_shared_expert_intermediate_size": p["i_s"],
                  "mamba_n_heads": hm, "n_mamba_heads": hm, "mamba_num_heads": hm,
                  "mamba_head_dim": p["dm"], "mamba_d_ssm": p["di"] * hm, "mamba_n_groups": p["ng"],
                  "mamba_ngroups": p["ng"], "n_groups": p["ng"], "mamba_d_state": p["N"], "ssm_state_size": p["N"],
                  "mamba_d_conv": p["K"], "mamba_expand": p["e"], "chunk_size": p["C"],
                  "mamba_chunk_size": p["C"], "block_size": p["Cl"], "sliding_window": p["W"], "window_size": p["W"], "linear_num_key_heads": p["hk"],
                  "linear_num_value_heads": p["hv"] * p["hk"], "linear_key_head_dim": p["dk"],
                  "linear_value_head_dim": p["dv"], "linear_conv_kernel_dim": p["K"],
                  "linear_num_heads": p["hl"], "linear_head_dim": p["dl"], "adapter_rank": p["r_a"],
                  "hidden_size_per_layer_input": p["d_pl"], "vocab_size_per_layer_input": p["V_pl"],
                  "index_n_heads": p["hi"], "index_head_dim": p["di"], "index_topk": p["t_k"],
                  "shape_vocab_size": p["V_sh"], "shape_embed_dim": p["d_sh"], "pronunciation_vocab_size": p["V_pr"],
                  "pronunciation_embed_dim": p["d_pr"], "attention_hidden_size": p["w_t"],
                  "gated_norm_rank": p["r_g"], "dim_head": HEAD * p["d"], "dim_ff": p["i"],
                  "prompt_length": p["P"], "prompt_types": p["T_p"], "segment_types": p["G"],
                  "position_bias_num_buckets": p["n_b"], "num_layers_per_stack": p["l"], "H_cycles": p["c_H"],
                  "L_cycles": p["c_L"], "ngram": p["n_g"], "num_buckets": p["nb"],
                  "router_hidden_size": p["hr"], "image_size": p["p"] * p["q"], "patch_size": p["p"],
                  "num_channels": p["c"], "num_mel_bins": p["mel"] * (MEL_STEM if STEM in present else 1), "max_source_positions": p["se"], STEM: p["C_s"],   # k28speech13: STEM
                  "num_register_tokens": p["n_r"], "out_hidden_size": p["h_o"], "projection_intermediate_size": p["i_p"],
                  "num_position_embeddings": p["g_pos"] ** 2}   # k28tower12 (n_r); k28patch13
        values.update(relative_attention_num_buckets=p["nb"], encoder_ffn_dim=p["i"], hidden_dim=p["i"],   # k28seq12's
                      projection_size=p["e_j"], project_dim=p["e_j"], **{f: p[sym] for f, sym in TEXT_FIELDS.items()})
        mamba2 = "num_heads" in present and "state_size" in present and "num_attention_heads" not in present
        if mamba2:       # Mamba2Config: num_heads and head_dim are the Mamba-2 heads' (no attention)
            values.update(num_heads=hm, head_dim=p["e"] * values["hidden_size"])   # e·h / hm: the validator's
        if mamba2 or derived_head:     # the configs whose Mamba-2 head size must divide the inner width exactly
            values.update(expand=p["e"] * hm, mamba_expand=p["e"] * hm)
        mla = "kv_lora_rank" in present
        values.update({**({"num_key_value_heads": a, "head_dim": values["qk_rope_head_dim"]} if mla else {}),
                       **({"head_dim": HEAD * p["x"]} if head_follows else {})})
        audio = AUDIO in present and _audio_values(values, p)
        probe = cls(index, b=SHAPES[index][0], s=_input_length(present, p, SHAPES[index][1], audio))
        if 0 < stages <= STAGES:     # Swin's: the last stage two windows a side, so that its windows shift
            values["image_size"] = p["p"] * 2 ** (stages - 1) * (2 * p["W"] if "window_size" in present else p["q"])
            probe._stage_fields(present, p, stages)
        for name in present:
            if name == "num_conv_pos_embeddings" and POS_LAYERS in present:    # a layer count: the config's
                continue
            if (mla and name in MLA_FOLLOW) or ((mamba2 or head_follows) and name == "head_dim"):
                probe.fields[name] = values[name]
            elif stages and (name in STAGE_LISTS or name in STAGE_SCALARS):    # Mamba2Config's num_heads is no list
                continue
            elif name in values and (mamba2 or name not in MAMBA2_OWN):
                probe.fields[name] = values[name]
                probe.symbols.setdefault(MAMBA2_OWN.get(name) or FIELDS[name][0], (values[name], name))
        return probe

    def _stage_fields(self, present, p: dict, stages: int) -> None:
        """The per-stage lists (:data:`STAGE_LISTS`) and a staged backbone's own fields (:data:`STAGE_SCALARS`) of
        :meth:`make`, at ``p`` (this probe's primes), for ``stages`` stages; where the config sets no image size
        (ResNet's), the traced ``s`` is the image side: a prime times the stem's and every stage's halving."""
        if "image_size" not in present:
            self.s = p["side"] * 2 ** (stages + 1)
        for name in [f for f in present if f in STAGE_LISTS]:
            prefix = STAGE_LISTS[name][0]
            scale = STAGE_WIDTH * (p["g_w"] if "groups_width" in present else 1) if prefix == "h" else 1
            self.fields[name] = [scale * p[f"{prefix}_{i + 1}"] for i in range(stages)]
            for i in range(stages):
                self.symbols[f"{prefix}_{i + 1}"] = (scale * p[f"{prefix}_{i + 1}"], f"{name}[{i}]")
        for name in [f for f in present if f in STAGE_SCALARS]:
            sym = STAGE_SCALARS[name][0]
            v = p[sym] * (STAGE_WIDTH if sym in ("h_0", "h_e") else 1)
            self.fields[name] = v
            self.symbols[sym] = (v, name)

    def symbol_values(self) -> dict[str, int]:
        """symbol → probe value."""
        return {sym: v for sym, (v, _) in self.symbols.items()}

    def cover(self, n: int, *, max_coefficient: int = 64) -> str | None:
        """``n`` written as ``c * x * y`` in this probe's symbols (largest symbols first), or None
        when a prime of ``n`` belongs to no symbol or the coefficient left is over ``max_coefficient``."""
        if n <= 0:
            return None
        left = _primes(n)
        used: list[str] = []
        cands = sorted(((sym, _primes(v)) for sym, (v, _) in self.symbols.items() if sym not in COUNTS and v > 1),
                       key=lambda c: (-sum(c[1].values()), c[0]))
        progress = True
        while progress:
            progress = False
            for sym, f in cands:
                if all(left.get(q, 0) >= e for q, e in f.items()) and any(q > 5 for q in f):
                    for q, e in f.items():
                        left[q] -= e
                    used.append(sym)
                    progress = True
                    break
        coef = 1
        for q, e in left.items():
            if e and q > 5:
                return None
            coef *= q ** e
        if coef > max_coefficient or (not used and coef > 1):    # a bare number names no field
            return None
        order = {s: i for i, s in enumerate(("V", "E", "h", "a", "kv", "d", "i", "m", "s_max"))}
        used.sort(key=lambda s: order.get(s, 99))
        parts = ([str(coef)] if coef != 1 or not used else []) + used
        return " * ".join(parts)


def mrope_sections(sections, half: int) -> list[int] | None:
    """A multimodal RoPE's ``mrope_section`` (the rotary half-width split between the temporal, height and width
    positions: transformers 5.24 modeling_qwen2_vl.py ``Qwen2VLRotaryEmbedding.recomposition_frequencies``,
    ``freq.split(self.mrope_section, dim=-1)``, which requires the sections to sum to the rotary dimension over two,
    ``inv_freq``'s length; default ``[16, 24, 24]`` of a 128 head, Glm4v's ``[8, 12, 12]``) rescaled to a probe's
    rotary half-width ``half`` in the config's proportions. The rule (largest remainder): each section
    ``floor(half · s / Σs)``, the units left over one each to the sections of the largest remainders, the first
    among equals. None where ``sections`` is not a list of positive integers or already sums to ``half``.
    The sections only reorder the cos/sin tables (no FLOPs, no weights): any split summing to ``half`` counts alike.

    >>> mrope_sections([16, 24, 24], 340)
    [85, 128, 127]
    >>> mrope_sections([8, 12, 12], 64) is None
    False
    >>> mrope_sections([16, 24, 24], 64) is None
    True
    """
    if not isinstance(sections, (list, tuple)) or not sections or half < len(sections) \
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sections):
        return None
    total = sum(sections)
    if total == half:
        return None
    out = [half * v // total for v in sections]
    order = sorted(range(len(sections)), key=lambda j: (-(half * sections[j] % total), j))
    for j in order[:half - sum(out)]:
        out[j] += 1
    return out


def decoder_length(index: int) -> int:
    """The decoder length ``t`` (tokens of ``decoder_input_ids``) that probe ``index`` (0 or 1) traces an
    encoder-decoder at: a prime of its own (911, 919), apart from :data:`SHAPES`' ``s``, so that the cross-attention's
    ``t·s`` products and the decoder's ``t²`` are told from the encoder's ``s²`` (:mod:`.inputs_seq2seq`)."""
    return _PRIMES[index]["t"]


def probe_primes(index: int) -> dict[str, int]:
    """A copy of probe ``index``'s primes (0 or 1): the base factors of its sizes (k28vision13: probe_video.py)."""
    return dict(_PRIMES[index])


def joint_width(index: int) -> int:
    """A dual encoder's ``projection_dim`` at probe ``index`` (:mod:`.dual_draft`): k28dual13's primes 1031, 1033."""
    return _PRIMES[index]["e_p"]
