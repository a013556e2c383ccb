"""``costgraph import`` (issue 28 item 2; task k28vision2) of PVT v1 and GLPN: exact against PyTorch at both probes
(tests/draft_checks.py ``assert_exact``).

transformers 5.24 modeling_pvt.py: ``PvtPatchEmbeddings`` (a Conv2d per stage, a LayerNorm, the last stage's class
token in front, learned positions added: drafting/pvt.py), ``PvtLayer`` (``PvtEfficientSelfAttention``'s keys and
values from the map reduced by a strided Conv2d and a LayerNorm, ``PvtFFN`` without a depthwise convolution:
drafting/reduced_attention.py). modeling_glpn.py ``GLPNEfficientSelfAttention``: the same reduction under ``sr``.
No new probe field: the stage lists' symbols are k28conv12's (drafting/primes.py), so no prime of k28vision2's
range (2593 … 2797) is used.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import Drafts, assert_exact  # noqa: E402  (tests/ on sys.path)

EXPECTED = {
    # modeling_pvt.py PvtPatchEmbeddings.forward (last stage): torch.cat((cls_token, embeddings), dim=1), then
    # embeddings + position_embeddings (num_patches + 1 rows)
    "pvt": "  param encoder_patch_embeddings_3_cls_token[1, 1, h_4]\n"
           "  x = concat_seq(encoder_patch_embeddings_3_cls_token, x)",
    # modeling_glpn.py GLPNEfficientSelfAttention.forward: self.sr (kernel = stride = sr_ratio 8 in stage 1), then
    # self.layer_norm, before key and value
    "glpn": "h_1, kernel = 8, stride = 8, bias = true, name = sr)), name = sr_norm)   # (R/8)^2 keys",
}


@pytest.fixture(scope="module")
def drafted():
    """Each type's base model (AutoModel's) at its default config, drafted once for the file."""
    return Drafts({"pvt": "PvtModel", "glpn": "GLPNModel"})


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_draft_exact_at_both_probes(drafted, family):
    assert_exact(drafted(family), EXPECTED[family])


def test_pvt_parameters_counted_by_hand_from_the_transformers_source(drafted):
    """By hand at each probe (transformers 5.24). configuration_pvt.py ``PvtConfig.__init__`` defaults:
    ``patch_sizes`` = ``strides`` = [4, 2, 2, 2], ``sequence_reduction_ratios`` [8, 4, 2, 1], ``mlp_ratios``
    [8, 8, 4, 4], ``qkv_bias`` True. modeling_pvt.py ``PvtEncoder.__init__``: stage i's ``PvtPatchEmbeddings`` of
    ``image_size`` (stage 0) or ``image_size // 2**(i + 1)``, a Conv2d(c_in, h_i, kernel_size=strides[i]) with a bias,
    a LayerNorm (2·h_i), ``position_embeddings`` of ``(image // patch)**2`` rows (+1 and a ``cls_token`` of h_i in the
    last stage); ``PvtLayer``: two LayerNorms, ``query``/``key``/``value`` (h² + h each), where the ratio r > 1 the
    ``sequence_reduction`` Conv2d (h·h·r² + h) and its LayerNorm, ``PvtSelfOutput.dense`` (h² + h), ``PvtFFN``
    (h·mh + mh + mh·h + h, m the MLP ratio); the encoder's final LayerNorm (2·h_4)."""
    patch, ratio, mlp = (4, 2, 2, 2), (8, 4, 2, 1), (8, 8, 4, 4)
    for c in drafted("pvt").checks:
        v = c.values
        total, c_in = 2 * v["h_4"], v["c"]
        for i in range(4):
            h, n, r, m = v[f"h_{i + 1}"], v[f"l_{i + 1}"], ratio[i], mlp[i]
            side = (v["image"] if i == 0 else v["image"] // 2 ** (i + 1)) // patch[i]
            last = i == 3
            total += c_in * h * patch[i] ** 2 + h + 2 * h + (side * side + last) * h + last * h
            layer = 2 * h + 3 * (h * h + h) + (h * h * r * r + h + 2 * h if r > 1 else 0) + h * h + h \
                + h * m * h + m * h + m * h * h + h + 2 * h
            total += n * layer
            c_in = h
        assert c.params_torch == total
        assert c.params_draft == total


def test_the_probes_differ(drafted):
    """The two probes set other stage widths and image sides (so the second probe's equal file is a check)."""
    a, b = (c.values for c in drafted("pvt").checks)
    assert a["h_1"] != b["h_1"] and a["image"] != b["image"]
