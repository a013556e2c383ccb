"""``costgraph import`` (issue 28 item 2) of a VLM's vision tower run standalone on flattened patches (task
k28patch13): traced from ``hidden_states`` (or ``pixel_values``) ``[b·m²·s, c·tp·p·p]`` and ``grid_thw`` ``[[1, m,
m·s]] × b`` (drafting/inputs_patches.py), drafted by drafting/patch_tower.py, exact against PyTorch at both probes
(tests/draft_checks.py ``assert_exact``).

transformers 5.24 modeling_qwen3_5.py ``Qwen3_5VisionModel.forward``: ``patch_embed`` (a Conv3d of kernel = stride =
``(tp, p, p)`` over each flattened patch), ``pos_embed`` (``num_position_embeddings`` rows, resampled: no matrix
product), ``blocks`` (``norm1``, ``attn``: fused ``qkv`` and ``proj`` with biases, rotary; ``norm2``, ``mlp``:
``linear_fc1`` h → i, ``linear_fc2`` i → h), ``merger`` (``norm`` of h, ``view(-1, m²·h)``, ``linear_fc1`` m²·h →
m²·h, GELU, ``linear_fc2`` m²·h → out_hidden_size). modeling_qwen3_vl.py adds the DeepStack mergers;
modeling_glm4v.py an RMSNorm after the patches, learned positions of (image_size / p)² rows, a gated MLP of
out_hidden_size, ``downsample`` (a Conv2d of kernel = stride = m) and ``Glm4vVisionPatchMerger``.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import Drafts, assert_exact  # noqa: E402  (tests/ on sys.path)

import costgraph  # noqa: E402
from costgraph.drafting.facts import Module  # noqa: E402
from costgraph.drafting.patch_tower import _post_lines  # noqa: E402
from costgraph.drafting.probe import Probe  # noqa: E402
from costgraph.drafting.writer import Sizer  # noqa: E402

#: the towers claimed exact (bench/bench_import_reach.py --mapping base --kinds vision prints EXACT for each; 24 s of
#: CPU for the file, measured on the loaded 2-core machine):
#: model_type → its default config (drafted by model_type: AutoModel's class)
TYPES = ("qwen3_5_vision", "qwen3_5_moe_vision", "qwen4_exp_vision", "qwen3_vl_vision", "qwen3_vl_moe_vision",
         "cohere_compass_vision", "glm4v_vision", "glm4v_moe_vision", "glm5_next_vision", "glm_ocr_vision",
         "glm_image_vision", "qwen2_5_vl_vision", "exaone4_5_vision", "cosmos3_edge_vision")
drafted = Drafts({t: t for t in TYPES})

QWEN_MERGER = ("  x = layernorm(x, name = norm)\n"
               "  x = merge_tokens(x, 4)   # m × m neighbouring patches into one token (a view)\n"
               "  x = linear(x, 4 * h, bias = true, name = linear_fc1)\n  x = gelu(x)\n"
               "  return linear(x, h_o, bias = true, name = linear_fc2)\n")
GLM_MERGER = ("  x = linear(merge_tokens(x, 4), h_o, bias = true, name = downsample)")
EXPECTED = {
    "qwen3_5_vision": "  input patches[b, 4 * s, 6 * p * p]", "qwen3_5_moe_vision": QWEN_MERGER,
    "qwen4_exp_vision": "  param pos_embed[n_pos, h]", "cohere_compass_vision": "if j in [8] {",
    "qwen3_vl_vision": "  param deepstack_merger_list_2_linear_fc2[h_o, 4 * h]\n",
    "qwen3_vl_moe_vision": "tied = deepstack_merger_list_1_linear_fc1",
    "glm4v_vision": "  param position_embedding[(image / p) * (image / p), h]", "glm4v_moe_vision": GLM_MERGER,
    "glm5_next_vision": "  return swiglu(x, i_p, bias = false, name = merger)",
    # modeling_glm_ocr.py GlmOcrVisionAttention: q_norm and k_norm, RMSNorms of a head
    "glm_ocr_vision": "qkv_bias = true, out_bias = true, qk_norm = true, causal = false, name = attn)",
    # modeling_glm_image.py GlmImageVisionModel.forward: "no position_embeddings needed", no merger
    "glm_image_vision": "rotary = false, causal = false, name = attn)\n    x = x + mlp(layernorm(x, name = norm2), i, bias = true",
    # modeling_qwen2_5_vl.py Qwen2_5_VisionTransformerPretrainedModel.forward: full attention at
    # fullatt_block_indexes, windows of window_size // m // p image tokens elsewhere (cu_window_seqlens)
    "qwen2_5_vl_vision": "  input patches[b, 4 * (W / (2 * p)) * (W / (2 * p)) * s, 6 * p * p]",
    # modeling_exaone4_5.py Exaone4_5_VisionAttention: qkv of (heads + 2·num_key_value_heads)·head columns
    "exaone4_5_vision": "x = x + unwindows(gqa_attention(windows(rmsnorm(x, name = norm1_window), s), a, kv, h / a, ",
    # modeling_cosmos3_edge.py Cosmos3EdgeVisionEmbeddings: patch_embedding, a Linear of the flattened patches;
    # no merger in the tower (Cosmos3EdgePatchMerger is the language model's projector)
    "cosmos3_edge_vision": "  input patches[b, 4 * s, c * p * p]",
}


@pytest.mark.parametrize("family", TYPES)
def test_draft_exact_at_both_probes(family):
    assert_exact(drafted(family), EXPECTED[family])


def test_qwen3_5_tower_counted_by_hand():
    """Forward FLOPs by hand at each probe (modeling_qwen3_5.py, module docstring): N = b·4s patches (m = 2); the
    patch embedding 2·N·(c·tp·p²)·h (c = 3, tp = 2); per block qkv 2·N·h·3h, proj 2·N·h², the scores and the
    weighted values 2 · 2·a·(4s)²·(h/a) for each of the b images (transformers' eager attention splits the packed
    patches by ``cu_seqlens``), the MLP 2 · 2·N·h·i; the merger 2·b·s·4h·4h + 2·b·s·4h·h_o."""
    d = drafted("qwen3_5_vision")
    for c in d.checks:
        v = c.values
        b, s, h, a, i, l, p, ho = (v[k] for k in ("b", "s", "h", "a", "i", "l", "p", "h_o"))
        n = b * 4 * s
        block = 2 * n * h * 3 * h + 2 * n * h * h + b * 2 * 2 * a * (4 * s) ** 2 * (h // a) + 2 * 2 * n * h * i
        merger = 2 * b * s * 4 * h * 4 * h + 2 * b * s * 4 * h * ho
        assert c.forward_flops_torch == 2 * n * (3 * 2 * p * p) * h + l * block + merger


def test_qwen2_5_vl_patch_merger_counted_by_hand():
    """The merger of Qwen2.5-VL's tower, drafted from its modules, against its parameters counted by hand from
    transformers 5.24 modeling_qwen2_5_vl.py ``Qwen2_5_VLPatchMerger.__init__(dim, context_dim,
    spatial_merge_size=2)``::

        self.hidden_size = context_dim * (spatial_merge_size**2)
        self.ln_q = Qwen2_5_VLRMSNorm(context_dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(self.hidden_size, self.hidden_size), nn.GELU(),
                                 nn.Linear(self.hidden_size, dim))

    built by ``Qwen2_5_VisionTransformerPretrainedModel.__init__`` with ``dim=config.out_hidden_size,
    context_dim=config.hidden_size``. At Qwen2.5-VL-7B's tower (hidden_size 1280, out_hidden_size 3584, m = 2):
    hidden 5120; ln_q 1280, mlp.0 5120² + 5120, mlp.2 5120·3584 + 3584: 44,574,464 parameters; forward FLOPs of s
    merged tokens per image 2·b·s·5120² + 2·b·s·5120·3584."""
    probe = Probe.make(("hidden_size", "out_hidden_size"), 0)
    h, ho = probe.symbol_values()["h"], probe.symbol_values()["h_o"]
    leaves = [Module("merger.ln_q", "ln_q", "Qwen2_5_VLRMSNorm", {"weight": (h,)}, order=1),
              Module("merger.mlp.0", "0", "Linear", {"weight": (4 * h, 4 * h), "bias": (4 * h,)}, order=2),
              Module("merger.mlp.1", "1", "GELU", order=3),
              Module("merger.mlp.2", "2", "Linear", {"weight": (ho, 4 * h), "bias": (ho,)}, order=4)]
    lines = _post_lines(leaves, Sizer(probe), h, 4)
    assert lines[1] == "x = merge_tokens(x, 4)   # m × m neighbouring patches into one token (a view)"
    body = "\n".join("  " + t for t in lines[:-1]) + "\n  return " + lines[-1].split(" = ", 1)[1]
    text = ('model merger {\n  dim b "images"\n  dim s "merged tokens per image"\n  dim h "hidden_size"\n'
            '  dim h_o "out_hidden_size"\n  input x[b, 4 * s, h]\n' + body + "\n}\n")
    m = costgraph.loads(text, path="<qwen2_5_vl merger>")
    got = m.costs("model", convention="matmul").evaluate(None, {"b": 2, "s": 256, "h": 1280, "h_o": 3584})
    assert int(got["params"]) == 1280 + (5120 * 5120 + 5120) + (5120 * 3584 + 3584) == 44_574_464
    assert int(got["flops_forward"]) == 2 * 2 * 256 * 5120 * 5120 + 2 * 2 * 256 * 5120 * 3584
