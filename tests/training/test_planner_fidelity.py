"""The planner's answers are `costgraph train`'s (issue 16, items 12 and 13): every reported
row equals Model.train on that layout (step time and peak memory, exactly), the memory reserve,
no duplicate rows, 'no layout divides evenly' told apart from 'none fits', ZeRO/FSDP offered at
DP = 1 over the CP ranks, interleaved virtual stages, the pasteable check command; and the fit
verdict's 'what would make it fit'."""

import json
import shlex

import pytest
import sympy

import costgraph
from costgraph import hardware, runtime_memory
from costgraph.cli import main
from costgraph.parallel.layout import Layout
from tests.device_memory import H100_SXM_CUDA

H100 = 80_000_000_000   # h100-sxm's device memory, bytes (hardware.toml)
#: what CUDA reports on an H100 SXM, the capacity train and plan read (memory convention cuda): 79.22 GiB
#: (vllm PR #10511's total_gpu_memory, runtime_memory.toml [visible.h100-sxm]), floored to whole bytes
CUDA = H100_SXM_CUDA   # tests/device_memory.py: runtime_memory.toml [visible.h100-sxm]


def _train_row(m, values, row, *, gpus, attention, reserve=None, efficiency=None):
    """Model.train on a reported row, as `costgraph train` runs it: (peak bytes, step seconds, fits)."""
    layout = Layout(t=row["tp"], p=row["pp"], c=row["cp"], e=row["ep"], gpus=gpus, sp=row["sp"], zero=row["zero"],
                    m=row["micro_batches"], recompute=row["recompute"], attention=attention,
                    schedule=row["schedule"], v=row["virtual_stages"],
                    pipeline_layout=(row.get("options") or {}).get("pipeline_layout"))   # options.chunk_layouts
    vals = {**values, m.graph.dims["b"].symbol: sympy.Integer(row["micro_batch"])}
    r = m.train(layout, values=vals, hardware="h100-sxm", reserve=reserve, efficiency=efficiency)
    peak = int(sympy.ceiling(r.most_loaded().memory["total"].xreplace(vals)))
    return peak, float(r.step["total"].xreplace(vals)), r.fits["fits"]


@pytest.mark.parametrize("name, config, sets, gpus, batch, attention", [
    ("llama", "llama-3-8b", {}, 8, 512, "flash"),
    ("llama", "llama-3-8b", {}, 8, 64, "eager"),
    ("gpt", "gpt2", {}, 4, 64, "flash"),
    ("mixtral", "mixtral-8x7b", {"s": 4096}, 16, 32, "flash"),
])
def test_reported_rows_equal_train(name, config, sets, gpus, batch, attention):
    m = costgraph.load(name)
    values = m.values(config, **sets)
    res = m.plan(values, gpus=gpus, hardware="h100-sxm", global_batch=batch, attention=attention, top=3)
    assert res.layouts
    for row in res.layouts:
        peak, step, fits = _train_row(m, values, row, gpus=gpus, attention=attention)
        assert peak == row["memory_bytes"]          # exact: the same functions on the same layout
        assert step == row["step_seconds"]
        assert fits and peak <= res.capacity_bytes - res.reserve_bytes
    assert [r["step_seconds"] for r in res.layouts] == sorted(r["step_seconds"] for r in res.layouts)


def test_interleaved_stages_are_searched_and_equal_train():
    m = costgraph.load("llama")
    values = m.values("llama-3-70b")
    res = m.plan(values, gpus=64, hardware="h100-sxm", global_batch=64, attention="flash", top=10)
    inter = [r for r in res.layouts if r["virtual_stages"] > 1 and not (r.get("options") or {}).get("pipeline_layout")]
    assert inter
    row = inter[0]
    assert 80 % (row["pp"] * row["virtual_stages"]) == 0 and row["micro_batches"] % row["pp"] == 0
    peak, step, _ = _train_row(m, values, row, gpus=64, attention="flash")
    assert (peak, step) == (row["memory_bytes"], row["step_seconds"])


@pytest.fixture(scope="module")
def llama_8b_top40():
    """Llama-3-8B on 8 x h100-sxm, global batch 64, flash: the top 40 rows (one plan, about 4 s of CPU,
    shared by the two tests that read it)."""
    m = costgraph.load("llama")
    values = m.values("llama-3-8b")
    return m, values, m.plan(values, gpus=8, hardware="h100-sxm", global_batch=64, attention="flash", top=40)


def test_reserve_default_and_option(llama_8b_top40):
    m, values, res = llama_8b_top40
    # the default is train's: --reserve runtime, on the capacity CUDA reports (runtime_memory.toml: 79.22 GiB,
    # vLLM's total_gpu_memory on an H100), less the CUDA context and cuBLAS workspaces; each row also keeps its
    # NCCL buffers, so every row shown is one train's verdict accepts (plan = train)
    least = runtime_memory.training_reserve(hardware.preset("h100-sxm"), {}, H100, False)
    assert (res.capacity_bytes, res.reserve_bytes) == (least.capacity, least.bytes)
    for row in sorted(res.layouts, key=lambda r: -r["memory_bytes"])[:4]:   # the fullest rows: train accepts each
        peak, _, fits = _train_row(m, values, row, gpus=8, attention="flash")
        assert fits and peak == row["memory_bytes"]
    flat = m.plan(values, gpus=8, hardware="h100-sxm", global_batch=64, attention="flash", top=40, reserve=0.1)
    # --reserve 0.1 of the device memory train reads: the 79.22 GiB CUDA reports (memory convention cuda,
    # runtime_memory.toml [visible.h100-sxm], vllm PR #10511), 85,061,827,297 B: 8,506,182,730 B rounded up
    assert (flat.capacity_bytes, flat.reserve_bytes) == (CUDA, 8_506_182_730)
    assert max(r["memory_bytes"] for r in flat.layouts) <= CUDA - 8_506_182_730
    none = m.plan(values, gpus=8, hardware="h100-sxm", global_batch=64, attention="flash", top=40, reserve=0)
    assert none.reserve_bytes == 0
    sized = m.plan(values, gpus=8, hardware="h100-sxm", global_batch=64, attention="flash", top=1, reserve="10GiB")
    assert sized.reserve_bytes == 10 * 2**30
    assert max(r["memory_bytes"] for r in none.layouts) > CUDA - 10 * 2**30   # a layout the 10 GiB reserve turns away
    # train's verdict: headroom against the capacity less the reserve
    vals = values
    r = m.train(gpus=8, zero=3, attention="flash", values=vals, hardware="h100-sxm", reserve=0.1)
    used = int(r.most_loaded().memory["total"].xreplace(vals))
    assert r.fits["reserve_bytes"] == 8_506_182_730
    assert r.fits["headroom_bytes"] == CUDA - 8_506_182_730 - used
    r0 = m.train(gpus=8, zero=3, attention="flash", values=vals, hardware="h100-sxm", reserve=0)
    assert r0.fits["headroom_bytes"] == CUDA - used and r0.fits["reserve_bytes"] == 0


def test_no_duplicate_rows_and_no_selective_under_flash(llama_8b_top40):
    _, _, res = llama_8b_top40
    keys = [tuple(sorted((k, repr(v)) for k, v in r.items())) for r in res.layouts]   # "options" is a dict
    assert len(keys) == len(set(keys)) == 40
    figures = [(r["tp"], r["pp"], r["cp"], r["micro_batch"], r["virtual_stages"], r["memory_bytes"],
                r["step_seconds"]) for r in res.layouts]
    assert len(figures) == len(set(figures))
    assert all(r["recompute"] != "selective" for r in res.layouts)   # flash recomputes the same core
    assert all(r["zero"] == 0 for r in res.layouts if r["dp"] * r["cp"] == 1)   # nothing to shard over


def test_fsdp_over_cp_at_dp_1():
    """FSDP 1 x CP 8 at 256k tokens (torchtitan's dp_shard_cp mesh) is tried, and ranks in the top 3 under
    the flat model (behind ZeRO-2 on the same degrees by its exposed first-unit gathers:
    costgraph.training.overlap)."""
    m = costgraph.load("llama")
    values = m.values("llama-3-8b", s=262144)
    # the flat model (one efficiency for every kernel): the compute is the same, the communication decides
    flat = m.plan(values, gpus=8, hardware="h100-sxm", global_batch=1, attention="flash", top=3, efficiency="0.5")
    top = next(r for r in flat.layouts if r["zero"] == 3)
    assert (top["tp"], top["pp"], top["cp"], top["dp"], top["zero"]) == (1, 1, 8, 1, 3)
    # the per-kernel model (the default on h100-sxm): CP 8 ranks first, torchtitan's own layout: cuDNN's
    # attention curve (kernels.toml, the default --attention-kernel) has saturated by s/8 = 32,768 keys a ring
    # step (s0 = 387), so CP 4's longer steps gain little, and TP 2 x SP pays userbuffers' SM margin on its
    # overlapped GEMMs (132/116: kernel_time.userbuffers_margin)
    res = m.plan(values, gpus=8, hardware="h100-sxm", global_batch=1, attention="flash", top=10)
    first = res.layouts[0]
    assert (first["tp"], first["cp"], first["dp"], first["sp"]) == (1, 8, 1, False)
    # TP 2 x CP 4 x SP is still listed
    assert any((r["tp"], r["cp"], r["sp"]) == (2, 4, True) for r in res.layouts)
    for row, kw in ((top, {"efficiency": "0.5"}), (first, {})):
        peak, step, _ = _train_row(m, values, row, gpus=8, attention="flash", **kw)
        assert (peak, step) == (row["memory_bytes"], row["step_seconds"])


def test_divides_told_apart_from_fits(capsys):
    gpt = costgraph.load("gpt", config="gpt2")   # its sizes with no values= (trial finding: .plan asked for them)
    # 11 devices: t = c = 1 (others leave d fractional); p = 11 splits 12 layers in none of Megatron's ways
    # (12, 13 or 14 with the embedding/loss counted are not multiples of 11; first + last + 9 middle stages of
    # q layers need q ≤ 12/9); p = 1 leaves d = 11 and B = 3 is not a multiple of 11.
    # (7 devices no longer serve: 12 + embedding + loss = 14 layers split into 7 stages, as Megatron allows.)
    res = gpt.plan(gpus=11, hardware="h100-sxm", global_batch=3, attention="flash")
    assert res.layouts == [] and res.divisible == 0 and res.verdict == "no layout divides evenly"
    assert "no layout divides evenly" in res.to_text() and res.to_dict()["check"] is None
    llama = costgraph.load("llama")
    res = llama.plan(llama.values("llama-3-8b"), gpus=8, hardware="h100-sxm", global_batch=8, memory="4GB",
                     attention="flash")
    assert res.layouts == [] and res.divisible > 0 and res.verdict == "none fits"
    text = res.to_text()
    assert "none fits" in text and "the least memory" in text
    assert res.to_dict()["least_memory"]["memory_bytes"] > 4_000_000_000 - res.reserve_bytes


def test_check_command_gives_the_same_numbers(capsys, train_check):
    argv = ["plan", "llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm",
            "--global-batch", "64", "--attention", "eager", "--format", "json", "--top", "2"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    row, check = doc["layouts"][0], doc["check"]
    words = shlex.split(check)
    assert words[:2] == ["costgraph", "train"] and "--attention" in words and "eager" in words
    # run as `costgraph train` runs it, without printing its JSON (84 s of CPU on this PP 2 x CP 4 interleaved
    # row: the step's closed forms expanded in field order); test_api_parity holds that JSON to to_dict()
    peak, step, fits = train_check(check)
    assert peak == row["memory_bytes"]
    assert step == row["step_seconds"]
    assert fits is True


def test_fit_changes_llama_3_8b_zero3_eager():
    """Llama-3-8B on 8 x H100, ZeRO-3, b = 1, s = 8192: eager attention does not fit; the changes
    are each derived as `train` derives the changed layout; the fused kernel (the default) fits."""
    m = costgraph.load("llama")
    values = m.values("llama-3-8b")
    r = m.train(gpus=8, zero=3, attention="eager", values=values, hardware="h100-sxm")
    assert r.fits["fits"] is False
    changes = {c["change"]: c for c in r.fits["changes"]}
    assert set(changes) >= {"recompute selective", "recompute full", "TP 2"}
    for change, kw in (("recompute selective", dict(recompute="selective")), ("recompute full", dict(recompute="full")),
                       ("TP 2", dict(t=2))):
        again = m.train(gpus=8, zero=3, attention="eager", values=values, **kw)
        peak = int(sympy.ceiling(again.most_loaded(values).memory["total"].xreplace(values)))
        assert changes[change]["peak_bytes"] == peak
        assert changes[change]["fits"] == (peak <= H100 - 8_000_000_000)
    assert changes["recompute selective"]["fits"] and changes["recompute full"]["fits"]
    assert changes["recompute full"]["options"] == "--recompute full"
    assert "ZeRO 4" not in changes   # ZeRO 3 is the last stage
    flash = m.train(gpus=8, zero=3, values=values, hardware="h100-sxm")   # the default kernel
    assert flash.layout.attention == "flash" and flash.fits["fits"] is True and "changes" not in flash.fits
    text = r.to_text()
    assert "what would make it fit" in text and "--recompute full" in text
    doc = r.to_dict()
    assert doc["fits"]["changes"][0]["options"].startswith("--")


def test_header_names_the_default_kernel(capsys):
    assert main(["train", "llama", "--config", "llama-3-8b", "--gpus", "8", "--zero", "3"]) == 0
    assert "attention flash (default)" in capsys.readouterr().out
    assert main(["train", "llama", "--config", "llama-3-8b", "--gpus", "8", "--zero", "3", "--attention", "eager"]) == 0
    out = capsys.readouterr().out
    assert "attention eager, cross-entropy megatron (default);" in out   # not "(default)" after eager


def test_derive_keeps_korthikanti_and_offers_the_kernel(capsys):
    """derive's default stays Korthikanti et al. 2022 Table 2 (34bsh + 5bs^2a per layer, eager);
    --attention flash keeps no s x s tensor, and an fp32 log-sum-exp per query row and head."""
    b, s, h, a = sympy.symbols("b s h a", positive=True, integer=True)
    out = {}
    for kernel in ("eager", "flash"):
        assert main(["derive", "gpt", "--scope", "layer", "--format", "json", "--attention", kernel]) == 0
        expr = json.loads(capsys.readouterr().out)["quantities"]["activation_bytes"]["expr"]
        out[kernel] = sympy.sympify(expr, locals=dict(b=b, s=s, h=h, a=a))   # our own JSON, not user text
    assert sympy.expand(out["eager"] - (34 * b * s * h + 5 * b * s**2 * a)) == 0
    assert sympy.expand(out["flash"] - (34 * b * s * h + 4 * b * s * a)) == 0
    assert main(["derive", "gpt", "--scope", "layer", "--format", "json"]) == 0
    default = json.loads(capsys.readouterr().out)["quantities"]["activation_bytes"]["expr"]
    assert sympy.sympify(default, locals=dict(b=b, s=s, h=h, a=a)) == out["eager"]
