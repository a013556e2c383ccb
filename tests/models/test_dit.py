"""Diffusion Transformers (issue 19): ``models/dit.cg`` (DiT, Peebles & Xie 2023) and
``models/sd3.cg`` (MMDiT, Esser et al. 2024), their diffusers ``config.json`` import
(``_class_name``), FLOPs per denoising step and per image (:mod:`costgraph.diffusion`), and
every analysis on the released configs (``examples/hf/dit-xl-2-256.json``,
``examples/hf/sd3-medium.json``; provenance in ``examples/hf/SOURCES.md``).

The figures are diffusers 0.42.1's (torch 2.13), measured on the meta device:
``DiTTransformer2DModel`` of dit-xl-2-256 counts ``sum(p.numel()) = 749,826,464`` parameters
and ``FlopCounterMode`` 237,333,676,032 forward FLOPs per 256-pixel image per step;
``SD3Transformer2DModel`` of sd3-medium 2,028,328,000 parameters and 8,904,337,539,072 forward
FLOPs per step (1024 pixels, 333 text tokens). The PyTorch tier at the end builds diffusers'
classes and is skipped, with its reason, without diffusers (the ``diffusion`` extra).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sympy

import costgraph
from costgraph import cli
from costgraph.diffusion import per_image
from costgraph.errors import CostgraphError

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"
DIT = HF / "dit-xl-2-256.json"
SD3 = HF / "sd3-medium.json"
DIT_PARAMS, DIT_FORWARD = 749_826_464, 237_333_676_032
SD3_PARAMS, SD3_FORWARD = 2_028_328_000, 8_904_337_539_072


def _numbers(hf):
    got = hf.costs("model", convention="matmul").evaluate(**hf.values)
    return got["params"], got["flops_forward"], got["kv_cache_bytes"]


def test_released_configs_import_by_class_name():
    dit = costgraph.load_hf_config(str(DIT))   # the legacy `_class_name` Transformer2DModel, norm_type ada_norm_zero
    assert dit.model_type == "dit"
    assert dit.values == dict(image=32, p=2, c=4, c_out=8, a=16, d=72, l=28, classes=1000, b=1)
    assert _numbers(dit) == (DIT_PARAMS, DIT_FORWARD, 0)
    sd3 = costgraph.load_hf_config(str(SD3))
    assert sd3.model_type == "sd3" and sd3.model.graph.options == {"cfg": False, "qk_norm": False}
    assert sd3.values == dict(image=128, p=2, c=16, c_out=16, a=24, d=64, l=24, joint=4096, pooled=2048, T=333, b=1)
    assert _numbers(sd3) == (SD3_PARAMS, SD3_FORWARD, 0)


def test_bundled_presets_are_the_released_configs():
    for name, preset, want in (("dit", "dit-xl-2-256", DIT_PARAMS), ("sd3", "sd3-medium", SD3_PARAMS)):
        m = costgraph.load(name)
        assert m.costs().evaluate(**m.configs[preset])["params"] == want


def test_dit_closed_forms():
    """Per block (its own embedder): 19h² + (classes + 274)h parameters (adaLN 6h², attention 4h²,
    MLP 8h², the timestep MLP 256h + h², the label table (classes + 1)·h); forward per block
    2bh(256 + h) for the embedder, 12bh² for adaLN, 2bn(4h² + 8h²) for the linears and 4bn²h for
    QKᵀ and PV; block 0's embedder runs again in the final layer."""
    m = costgraph.load("dit")
    b, image, p, c, c_out, a, d, l, classes = (sympy.Symbol(x, positive=True, integer=True) for x in
                                               ("b", "image", "p", "c", "c_out", "a", "d", "l", "classes"))
    h, n = a * d, image ** 2 / p ** 2
    costs = m.costs("model", convention="matmul")
    block = 19 * h ** 2 + (classes + 274) * h
    final = 2 * h ** 2 + 2 * h + h * p ** 2 * c_out + p ** 2 * c_out
    assert sympy.expand(costs.params - (l * block + c * p ** 2 * h + h + final)) == 0
    emb = 2 * b * h * (256 + h)
    fwd_block = emb + 12 * b * h ** 2 + 24 * b * n * h ** 2 + 4 * b * n ** 2 * h
    want = l * fwd_block + 2 * b * n * c * p ** 2 * h + emb + 4 * b * h ** 2 + 2 * b * n * h * p ** 2 * c_out
    assert sympy.expand(costs.flops_forward - want) == 0


def test_per_step_and_per_image_with_steps_a_dimension_and_cfg_doubling_the_batch():
    m = costgraph.load("dit")
    values = m.configs["dit-xl-2-256"]
    d = per_image(m, values=values)
    steps, b = sympy.Symbol("steps", positive=True, integer=True), sympy.Symbol("b", positive=True, integer=True)
    assert d.steps == steps and d.per_step_value == DIT_FORWARD and d.per_image_value is None
    assert sympy.expand(d.per_image - steps * d.per_step / b) == 0 and b not in d.per_image.free_symbols
    assert per_image(m, 50, values=values).per_image_value == 50 * DIT_FORWARD
    guided = per_image(costgraph.load("dit", options={"cfg": True}), 50, values={**values, "b": 4})
    assert guided.cfg and guided.per_step_value == 8 * DIT_FORWARD          # 4 images: a batch of 8 rows
    assert guided.per_image_value == 50 * 2 * DIT_FORWARD
    assert guided.to_dict()["flops_per_image_value"] == 100 * DIT_FORWARD
    sd3 = costgraph.load_hf_config(str(SD3))
    assert per_image(sd3, 28, values=sd3.values).per_image_value == 28 * SD3_FORWARD
    with pytest.raises(CostgraphError, match="not a diffusion Transformer"):
        per_image(costgraph.load("vit"))
    with pytest.raises(CostgraphError, match="steps must be a whole number"):
        per_image(m, 0)


@pytest.mark.parametrize("changes, fragment", [
    (dict(norm_type="layer_norm"), "not DiT"),
    (dict(_class_name="UNet2DConditionModel"), "unsupported diffusers class"),
    (dict(activation_fn="geglu"), "activation_fn"),
    (dict(cross_attention_dim=1152), "cross_attention_dim"),
    (dict(dropout=0.1), "dropout"),
])
def test_dit_import_refuses_what_the_model_file_does_not_describe(changes, fragment):
    cfg = {**json.loads(DIT.read_text()), **changes}
    with pytest.raises(CostgraphError, match=fragment):
        costgraph.from_hf_config(cfg, source="dit")


def test_sd3_variants_qk_norm_and_dual_attention():
    cfg = json.loads(SD3.read_text())
    qk = costgraph.from_hf_config({**cfg, "qk_norm": "rms_norm"}, source="sd3.5")
    assert qk.model.graph.options["qk_norm"] is True
    # RMSNorm γ [d] on q and k of both streams: 4d per block
    assert _numbers(qk)[0] == SD3_PARAMS + 24 * 4 * 64
    with pytest.raises(CostgraphError, match="dual_attention_layers"):
        costgraph.from_hf_config({**cfg, "dual_attention_layers": [0, 1]}, source="sd3.5-medium")


def _cli(capsys, *args):
    code = cli.main([*args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_derive_train_report_and_infer(capsys, tmp_path):
    code, out, err = _cli(capsys, "derive", str(DIT), "--format", "json")
    assert code == 0, err
    assert json.loads(out)["quantities"]["flops_forward"]["value"] == DIT_FORWARD
    code, out, err = _cli(capsys, "train", str(SD3), "--format", "json")
    assert code == 0, err
    flops = json.loads(out)["flops"]
    # forward + backward, one step. The inputs (latents, the text encoders' outputs, the pooled projection,
    # the timestep) need no gradient (PyTorch's default, issue 30): 4,197,187,584 FLOPs below the figure with
    # input gradients, the dX of context_embedder (2·333·4096·1536), of the pooled projection's first
    # linear (2·2048·1536) and of the timestep embedder's first linear (2·256·1536)
    assert flops["model_per_device"]["value"] == 26_708_010_123_264
    assert 26_712_207_310_848 - 26_708_010_123_264 == 2 * 333 * 4096 * 1536 + 2 * 2048 * 1536 + 2 * 256 * 1536
    assert flops["per_token"]["value"] * (4096 + 333) == 26_708_010_123_264   # over s = n + T tokens
    code, out, err = _cli(capsys, "train", str(DIT), "--format", "json")
    assert code == 0, err
    assert json.loads(out)["flops"]["per_token"]["value"] * 256 == json.loads(out)["flops"]["model_per_device"]["value"]
    code, out, err = _cli(capsys, "report", "dit", "--config", "dit-xl-2-256", "--format", "md", "-o", str(tmp_path / "dit.md"))
    assert code == 0, err
    assert "749,826,464" in (tmp_path / "dit.md").read_text()
    code, out, err = _cli(capsys, "infer", str(DIT), "--prompt", "1", "--generate", "1")
    assert code == 2 and "Traceback" not in err
    assert "is a diffusion Transformer" in err and "costgraph.diffusion.per_image" in err


# ---------------------------------------------------------------- PyTorch tier (diffusers)

torch_tier = pytest.mark.skipif(
    not all(__import__("importlib").util.find_spec(m) for m in ("torch", "diffusers")),
    reason="needs torch and diffusers (the diffusion extra: pip install -e '.[torch,diffusion]')")

#: small configs (runtime): every block kind (DiT's per-block embedders, SD3's last context_pre_only block)
SMALL = {
    "dit": {"_class_name": "DiTTransformer2DModel", "num_attention_heads": 2, "attention_head_dim": 8,
            "in_channels": 4, "out_channels": 8, "num_layers": 3, "sample_size": 8, "patch_size": 2,
            "num_embeds_ada_norm": 10},
    "sd3": {"_class_name": "SD3Transformer2DModel", "sample_size": 8, "patch_size": 2, "in_channels": 4,
            "num_layers": 3, "attention_head_dim": 8, "num_attention_heads": 2, "joint_attention_dim": 12,
            "caption_projection_dim": 16, "pooled_projection_dim": 10, "out_channels": 4, "pos_embed_max_size": 8},
    "sd3.5": {"_class_name": "SD3Transformer2DModel", "sample_size": 8, "patch_size": 2, "in_channels": 4,
              "num_layers": 2, "attention_head_dim": 8, "num_attention_heads": 2, "joint_attention_dim": 12,
              "caption_projection_dim": 16, "pooled_projection_dim": 10, "out_channels": 4,
              "pos_embed_max_size": 8, "qk_norm": "rms_norm"},
}


def _forward_flops(model, b: int) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    inputs = model.inputs_for(torch, b, 0)
    with FlopCounterMode(display=False) as mode:
        model(**inputs)
    return int(mode.get_total_flops())


@torch_tier
@pytest.mark.parametrize("name", sorted(SMALL))
def test_parameters_and_forward_flops_equal_diffusers(name):
    """diffusers 0.42.1 on meta: sum(p.numel()) and FlopCounterMode's forward FLOPs of one step (b = 2,
    bf16, train mode) equal costgraph's; the text tokens T = 5 for SD3."""
    import torch

    from costgraph.torch_diffusion import build_diffusion
    from costgraph.torch_measure import param_count

    cfg = SMALL[name]
    hf = costgraph.from_hf_config(cfg, source=name)
    tm = build_diffusion(torch, hf.model_type, cfg, text_tokens=5)
    values = {**hf.values, "b": 2, **({"T": 5} if "T" in hf.values else {})}
    got = hf.costs("model", convention="matmul").evaluate(**values)
    assert type(tm).__name__ == f"{cfg['_class_name']}Step"
    assert param_count(tm) == got["params"]
    assert _forward_flops(tm, 2) == got["flops_forward"]


@torch_tier
def test_released_configs_parameters_equal_diffusers():
    import torch

    from costgraph.torch_diffusion import build_diffusion
    from costgraph.torch_measure import param_count

    for path, want in ((DIT, DIT_PARAMS), (SD3, SD3_PARAMS)):
        cfg = json.loads(path.read_text())
        assert param_count(build_diffusion(torch, costgraph.load_hf_config(str(path)).model_type, cfg)) == want


def test_verify_without_diffusers_says_how_to_install_it(monkeypatch):
    import sys

    from costgraph.torch_diffusion import DiffusersMissing, build_diffusion

    monkeypatch.setitem(sys.modules, "diffusers", None)   # import diffusers raises ImportError
    with pytest.raises(DiffusersMissing) as e:
        build_diffusion(None, "dit", SMALL["dit"])
    assert "pip install -e '.[diffusion]'" in e.value.hint
