"""``costgraph plot`` and :mod:`costgraph.export.plots`: the bars' heights read
back from matplotlib's Axes equal published numbers; the SVG parses as XML and
its text (kept as text) names the parts and units; the PNG is a PNG.

Published values used (with sources):

* GPT-2 small: 124,439,808 parameters (DOMAIN.md §1); mixed-precision Adam
  keeps 2 + 2 + 12 = 16 bytes per parameter: fp16 weights, fp16 gradients,
  and K = 12 bytes of optimizer states (fp32 master copy and two moments) —
  Rajbhandari et al. 2020 (ZeRO), §3.1;
* GPT activations for backward: ``l(34bsh + 5bs²a)`` (Korthikanti et al.
  2022, §4.1) plus, outside the layers, ``5bsh + 8bs + 8s`` (README,
  "Whole-model activations") and the fp32 logits of the loss ``4bsV``;
* GPT forward FLOPs: attention ``8bsh² + 4bs²h`` and MLP ``16bsh²`` per layer,
  head ``2bshV`` (DOMAIN.md §3; Narayanan et al. 2021);
* Llama-2-70B: 68,976,648,192 parameters, KV cache 1,280 MiB per 4,096-token
  sequence in bf16 (8 KV heads of 128: 2·80·8·128·2 bytes per token; DOMAIN.md §8).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.export import plots
import subprocess

GPT2 = dict(b=1, s=1024, h=768, a=12, l=12, V=50257, s_max=1024)
GPT2_PARAMS = 124_439_808
SVG = "{http://www.w3.org/2000/svg}"


def _svg_texts(path) -> list[str]:
    root = ET.parse(path).getroot()                    # well-formed XML, or this raises
    assert root.tag == f"{SVG}svg"
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def _bars(ax):
    """Each BarContainer's label and its rectangles' (x or y, height or width)."""
    return {c.get_label(): c.patches for c in ax.containers}


def test_training_memory_bars_equal_published_bytes():
    gpt = costgraph.load("gpt")
    values = gpt.values("gpt2")
    # one device, mixed precision, Adam; Korthikanti et al. 2022's activations with their 4·s·b·V bytes of fp32
    # logits: the cross-entropy convention that count is, named (the default, Megatron-LM's unfused kernel, holds 6 B)
    result = gpt.train(attention="eager", cross_entropy="logits")
    data = plots.memory_sweep_train(gpt, result, values, "b", [1, 2, 4])
    N = GPT2_PARAMS
    assert data.parts["weights"] == [2 * N] * 3
    assert data.parts["gradients"] == [2 * N] * 3
    assert data.parts["optimizer"] == [12 * N] * 3      # ZeRO's K = 12
    g = GPT2
    def acts(b):
        s, h, a, l, V = g["s"], g["h"], g["a"], g["l"], g["V"]
        return l * (34 * b * s * h + 5 * b * s * s * a) + 5 * b * s * h + 8 * b * s + 8 * s + 4 * b * s * V
    assert data.parts["activations"] == [acts(1), acts(2), acts(4)]
    fig = plots.memory_figure(data, "GiB")
    ax = fig.axes[0]
    bars = _bars(ax)
    assert list(bars) == ["weights", "gradients", "optimizer states", "activations"]
    for label, key in zip(bars, ("weights", "gradients", "optimizer", "activations")):
        # a stacked segment's height comes back as top − bottom in floating point: equal to 12 digits
        assert [p.get_height() for p in bars[label]] == pytest.approx([n / 2**30 for n in data.parts[key]], rel=1e-12)
    tops = [p.get_y() + p.get_height() for p in bars["activations"]]
    assert tops == pytest.approx([(16 * N + acts(b)) / 2**30 for b in (1, 2, 4)], rel=1e-12)
    assert ax.get_ylabel() == "memory per device (GiB = 2³⁰ bytes)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4"]


def test_inference_memory_kv_cache_of_llama_2_70b():
    from costgraph.inference import Inference, load

    llama = load("llama")
    values = llama.values("llama-2-70b", s=4096)
    data = plots.memory_sweep_infer(Inference(llama), values, "b", [1, 2, 8], capacity=141 * 10**9)
    assert data.parts["kv_cache"] == [b * 1280 * 2**20 for b in (1, 2, 8)]
    assert data.parts["weights"] == [2 * 68_976_648_192] * 3
    fig = plots.memory_figure(data, "GB")
    ax = fig.axes[0]
    # a stacked segment's height comes back as top − bottom in floating point: equal to 12 digits
    assert [p.get_height() for p in _bars(ax)["KV cache"]] == pytest.approx([b * 1280 * 2**20 / 1e9 for b in (1, 2, 8)],
                                                                            rel=1e-12)
    capacity = [ln for ln in ax.get_lines() if ln.get_label().startswith("device memory")]
    assert capacity[0].get_ydata()[0] == 141.0


def test_flops_bars_equal_published_formulas():
    gpt = costgraph.load("gpt")
    data = plots.flops_share(gpt.costs(), gpt.values("gpt2"))
    b, s, h, l, V = (GPT2[k] for k in ("b", "s", "h", "l", "V"))
    expected = [("layers/attn", l * (8 * b * s * h * h + 4 * b * s * s * h)), ("layers/mlp", l * 16 * b * s * h * h),
                ("lm_head", 2 * b * s * h * V)]
    assert data.parts == expected
    assert data.total == sum(n for _, n in expected) == 291_648_307_200
    fig = plots.flops_figure(data)
    ax = fig.axes[0]
    assert [p.get_width() for p in ax.patches] == [n / 1e9 for _, n in expected]   # GFLOP
    assert [t.get_text() for t in ax.get_yticklabels()] == ["layers/attn", "layers/mlp", "lm_head"]
    assert ax.get_xlabel() == "forward FLOPs (GFLOP)"
    shares = [t.get_text() for t in ax.texts]
    assert shares == [f"{n / data.total:.1%}" for _, n in expected]


@pytest.mark.parametrize("model, parts", [
    ("mixtral", ["layers/layer/self_attn", "layers/layer/mlp", "lm_head"]),        # through the 'layer' wrapper
    ("deepseek_v3", ["dense_layers/self_attn", "dense_layers/mlp", "moe_layers/self_attn", "moe_layers/mlp",
                     "lm_head"]),
])
def test_flops_buckets_add_up(model, parts):
    import sympy

    costs = costgraph.load(model).costs()
    buckets = plots.flops_buckets(costs)
    assert [k for k, e in buckets if e != 0] == parts
    assert sympy.expand(sum(e for _, e in buckets) - costs.flops_forward) == 0


def test_roofline_points_and_roof():
    from costgraph.hardware import preset
    from costgraph.inference import infer, load

    llama = load("llama")
    values = {k: v for k, v in llama.values("llama-3-8b").items() if str(k) not in ("b", "s")}
    rep = infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=values)
    data = plots.roofline(rep)
    hw = preset("h100-sxm")
    assert data.peak == hw.peak_flops_bf16 and data.bandwidth == hw.memory_bandwidth   # the vendor's dense figures
    (_, x_pre, y_pre), (_, x_dec, y_dec) = data.points
    assert x_pre == rep.values["prefill.intensity"] and x_dec == rep.values["decode.intensity"]
    # decode at b = 1 reads every weight for one token: memory-bound; a 512-token prefill is compute-bound
    assert x_dec < data.ridge < x_pre
    assert y_dec <= x_dec * data.bandwidth and y_pre <= data.peak   # on or under the roof
    fig = plots.roofline_figure(data)
    ax = fig.axes[0]
    roof = next(ln for ln in ax.get_lines() if ln.get_gid() == "roof")
    assert max(roof.get_ydata()) == hw.peak_flops_bf16 / 1e12
    pts = [ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("point-")]
    assert [ln.get_xdata()[0] for ln in pts] == [float(x_pre), float(x_dec)]
    assert ax.get_xscale() == ax.get_yscale() == "log"


def test_cli_svg_text_is_searchable(tmp_path):
    out = tmp_path / "mem.svg"
    assert main(["plot", "gpt", "--config", "gpt2", "--kind", "memory", "--over", "s=256:1024:x2",
                 "--memory", "2GB", "-o", str(out)]) == 0
    texts = _svg_texts(out)
    for label in ("weights", "gradients", "optimizer states", "activations", "device memory 2.0 GB",
                  "sequence length s (tokens)", "memory per device (GB = 10⁹ bytes)", "256", "512", "1,024"):
        assert label in texts, label
    assert any(t.startswith("gpt (gpt2): training memory per device (1 GPUs, tp 1, pp 1, ZeRO 0") for t in texts)
    out = tmp_path / "flops.svg"
    assert main(["plot", "gpt", "--config", "gpt2", "--kind", "flops", "-o", str(out)]) == 0
    texts = _svg_texts(out)
    assert {"layers/attn", "layers/mlp", "lm_head", "forward FLOPs (GFLOP)"} <= set(texts)


def test_cli_png(tmp_path):
    out = tmp_path / "roof.png"
    assert main(["plot", "llama", "--config", "llama-3-8b", "--kind", "roofline", "--hardware", "h100-sxm",
                 "--prompt", "512", "--generate", "16", "-o", str(out)]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


@pytest.mark.parametrize("args", [
    ["gpt", "--config", "gpt2", "--kind", "flops", "-o", "x.pdf"],                  # not .png/.svg
    ["gpt", "--kind", "flops", "-o", "x.svg"],                                       # no values
    ["gpt", "--config", "gpt2", "--kind", "memory", "--over", "q=1,2", "-o", "x.svg"],   # no such dimension
    ["gpt", "--config", "gpt2", "--kind", "memory", "--over", "s=1:9:x1", "-o", "x.svg"],
    ["gpt", "--config", "gpt2", "--kind", "roofline", "-o", "x.svg"],               # no inference setting
    ["gpt", "--config", "gpt2", "--kind", "flops", "--over", "s=1,2", "-o", "x.svg"],
])
def test_cli_mistakes_exit_2(tmp_path, args, capsys):
    args = [a if not a.startswith("x.") else str(tmp_path / a) for a in args]
    assert main(["plot", *args]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_plot_refuses_the_reserve_it_never_draws(tmp_path, capsys):
    # trial6: `plot --kind memory --reserve nan` wrote a plot (exit 0), and --reserve 0.5 drew the same bytes as
    # none: the memory plot's line is the whole device memory; the reserve is train's and fit's verdict
    out = tmp_path / "x.svg"
    assert main(["plot", "gpt", "--config", "gpt2", "--kind", "memory", "--hardware", "h100-sxm", "--reserve", "0.5",
                 "-o", str(out)]) == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        "error: --reserve is the fit verdict's: no plot reads it (memory's line is the whole device memory)")
    assert not out.exists()


def test_parse_over():
    from costgraph.commands._analysis import parse_over

    assert parse_over("s=512:8192:x2") == ("s", [512, 1024, 2048, 4096, 8192])
    assert parse_over("b=1:4:+1") == ("b", [1, 2, 3, 4])
    assert parse_over("b=1,2,8") == ("b", [1, 2, 8])
    for bad in ("s=0,1", "s", "s=1:2:x0", "s=1:10000:+1", "s=a"):
        with pytest.raises(CostgraphValueError):
            parse_over(bad)


# --- no sizes: the missing ones named, no file written (issue 18) ----------------------------------------------------

HINT = "--config NAME or --set NAME=VALUE"


def _refused(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "this is a bug" not in p.stderr, p.stderr
    return p.stderr


def test_plot_memory_without_sizes_names_them(cg, tmp_path):
    err = _refused(cg("plot", "gpt", "--set", "s=16", "--kind", "memory", "-o", str(tmp_path / "m.svg")))
    assert "error: no value for V, a, b, h, l, s_max\n" in err and HINT in err
    assert not (tmp_path / "m.svg").exists()


def test_plot_flops_without_sizes_names_them(cg, tmp_path):
    err = _refused(cg("plot", "gpt", "--set", "s=16", "--kind", "flops", "-o", str(tmp_path / "f.svg")))
    assert "error: no value for b, h, l\n" in err and HINT in err


# --- a plot over s warns past the position table (new-user trial) ----------------------------------------------------

S_WARNING = ("warning: s = 4,096 is longer than s_max = 1,024: the learned position table has s_max rows, "
             "so the model cannot read that many tokens as built\n")


@pytest.mark.parametrize("phase", ["train", "infer"])
def test_plot_over_s_warns_past_the_position_table(capsys, tmp_path, phase):
    assert main(["plot", "gpt", "--config", "gpt2", "--kind", "memory", "--over", "s=512:4096:x2",
                 "--phase", phase, "-o", str(tmp_path / "m.svg")]) == 0
    assert capsys.readouterr().err == S_WARNING
