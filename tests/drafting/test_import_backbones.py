"""``costgraph import`` (issue 28 item 2; task k28vision13) of the remaining vision backbones and video encoders: exact
against PyTorch at both probes (tests/draft_checks.py ``assert_exact``).

transformers 5.24 modeling_pixio.py ``PixioEmbeddings``: ``cls_token [1, n_cls_tokens, h]`` (8 by default) put in
front of the patches whole, ``position_embeddings [1, n + n_cls_tokens, h]`` added (drafting/vision.py, the probe
field ``n_cls_tokens``: n_c). modeling_videomae.py ``VideoMAEPatchEmbeddings``: the video ``[b, f, c, image, image]``
permuted and cut into tubelets by ``nn.Conv3d(c, h, (tubelet_size, p, p), stride=(tubelet_size, p, p))``; a fixed
sinusoid table added (no parameter); no token in front (drafting/video.py, drafting/inputs_video.py, the probe fields
``num_frames`` f and ``tubelet_size`` tb). modeling_vivit.py ``VivitEmbeddings``: the same tubelets (the config's
``tubelet_size`` a list ``[t, p, p]``), the class token in front and learned positions. modeling_timesformer.py:
each frame's patches (a Conv2d), divided space-time attention (drafting/divided_attention.py).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import Drafts, assert_exact  # noqa: E402  (tests/ on sys.path)

#: the base model (AutoModel's) of each type, at its default config
drafted = Drafts({"pixio": "PixioModel", "timesformer": "TimesformerModel", "videomae": "VideoMAEModel",
                  "vivit": "VivitModel"})

EXPECTED = {
    "pixio": "  dim s = n + n_c \"sequence length: the patches and the tokens put in front of them\"\n\n"
             "  input pixels[b, c, image, image]\n\n"
             "  x = flatten_patches(conv2d(pixels, h, kernel = p, stride = p, bias = true, name = projection))"
             "   # [b, n, h], n = (image/p)^2 patches\n"
             "  param cls_token[1, n_c, h]\n  x = concat_seq(cls_token, x)\n"
             "  param position_embeddings[1, n + n_c, h]\n",
    "videomae": "  dim n = (f / tb) * (image / p) * (image / p) \"tubelets: (f/tb)·(image/p)^2\"\n"
                "  dim s = n \"sequence length: the tubelets and the tokens put in front of them\"\n\n"
                "  input pixels[b, c, f, image, image]   # the model's [b, f, c, image, image], permuted (a view)\n\n"
                "  x = flatten_patches(conv3d(pixels, h, kernel = p, stride = p, kernel_t = tb, stride_t = tb, "
                "bias = true, name = projection))",
    # modeling_vivit.py VivitTubeletEmbeddings: nn.Conv3d(c, h, kernel_size=tubelet_size, stride=tubelet_size), the
    # config's tubelet_size [t, p, p] probed as [tb, p, p]; VivitEmbeddings: cls_token in front, positions [1, n + 1, h]
    "vivit": "  dim p   \"patch size (pixels per side) (config.json: tubelet_size[1])\"\n"
             "  dim tb  \"frames per tubelet (the patch embedding's temporal kernel and stride) "
             "(config.json: tubelet_size[0])\"\n"
             "  dim n = (f / tb) * (image / p) * (image / p) \"tubelets: (f/tb)·(image/p)^2\"\n"
             "  dim s = n + 1 \"sequence length: the tubelets and the tokens put in front of them\"\n\n"
             "  input pixels[b, c, f, image, image]   # the model's [b, f, c, image, image], permuted (a view)\n\n"
             "  x = flatten_patches(conv3d(pixels, h, kernel = p, stride = p, kernel_t = tb, stride_t = tb, "
             "bias = true, name = projection))   # [b, n, h], n = (f/tb)·(image/p)^2 tubelets\n"
             "  param cls_token[1, 1, h]\n  x = concat_seq(cls_token, x)\n"
             "  param position_embeddings[1, n + 1, h]\n",
    # modeling_timesformer.py TimesformerLayer.forward (divided_space_time): the temporal attention over each patch's
    # f frames, temporal_dense, the spatial attention over each frame's n patches and its copy of the class token
    "timesformer": "  dim s = n * f + 1 \"sequence length: the patches of every frame and the class token\"\n\n"
                   "  input pixels[b * f, c, image, image]   # the model's [b, f, c, image, image] as b·f frames "
                   "(a view)\n",
}


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_draft_exact_at_both_probes(family):
    assert_exact(drafted(family), EXPECTED[family])


def test_timesformer_attends_over_frames_then_patches():
    """modeling_timesformer.py ``TimesformerLayer.forward``: ``temporal_attention`` on ``[b·n, f, h]`` (each patch's
    frames), then ``attention`` on ``[b·f, n + 1, h]`` (each frame's patches and the class token)."""
    text = drafted("timesformer").text
    assert "t = t + linear(unwindows(gqa_attention(layernorm(windows(t, n), name = temporal_layernorm)" in text
    assert "y = concat_seq(windows(merge_seq(repeat_kv(split_seq(c0, 1), f)), f), windows(t, f))" in text


def test_the_probes_differ_in_the_new_fields():
    """Both probes set the class tokens and the tubelet from task k28vision13's primes (1409 … 1597), each its own."""
    pixio = [c.values["n_c"] for c in drafted("pixio").checks]
    tubelets = [(c.values["tb"], c.values["f"]) for c in drafted("videomae").checks]
    assert pixio[0] != pixio[1] and all(1409 <= v <= 1597 for v in pixio)
    assert tubelets[0][0] != tubelets[1][0] and all(1409 <= tb <= 1597 and f == 2 * tb for tb, f in tubelets)


def test_videomae_counted_by_hand_from_the_transformers_source():
    """By hand at each probe (transformers 5.24 modeling_videomae.py): ``VideoMAEPatchEmbeddings.__init__``'s Conv3d,
    2·b·n·(c·tb·p²)·h FLOPs (each of the b·n tubelets a dot product of c·tb·p² pixels per output channel), n =
    (f // tb)·(image // p)² (``num_patches`` there); ``VideoMAESelfAttention.__init__``: ``query`` and ``value`` with
    a bias (``qv_bias``), ``key`` without; every layer's q, k, v, o (4 · 2·b·s·h²), the scores and the weighted values
    (2 · 2·b·a·s²·(h/a)), the MLP (``VideoMAEIntermediate``, ``VideoMAEOutput``: 2 · 2·b·s·h·i), s = n; the sinusoid
    table (``get_sinusoid_encoding_table``) a plain tensor, no parameter; ``VideoMAEModel.__init__``: no final
    LayerNorm where ``use_mean_pooling`` (the default). Parameters: the Conv3d (c·tb·p²·h + h), per layer
    4h² + 3h (q, k, v, o; biases of q, v, o) + 2hi + i + h (MLP) + 4h (two LayerNorms)."""
    for c in drafted("videomae").checks:
        v = c.values
        b, h, a, i, l, image, p, ch, f, tb = (v[k] for k in ("b", "h", "a", "i", "l", "image", "p", "c", "f", "tb"))
        n = (f // tb) * (image // p) ** 2
        assert n * tb * p * p == f * image * image     # whole tubelets at the probe
        s = n
        layer = 4 * 2 * b * s * h * h + 2 * 2 * b * a * s * s * (h // a) + 2 * 2 * b * s * h * i
        assert c.forward_flops_torch == 2 * b * n * (ch * tb * p * p) * h + l * layer
        assert c.params_torch == (ch * tb * p * p * h + h) + l * (4 * h * h + 3 * h + 2 * h * i + i + h + 4 * h)
