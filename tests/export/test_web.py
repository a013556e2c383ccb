"""``costgraph web``: the offline calculator page (:mod:`costgraph.export.web`).

The page is checked the way a user meets it: written by the CLI, opened in
headless Chromium with inputs set from the address's fragment (the page
applies them as typed input events), and every number it shows compared with
what ``costgraph derive`` and ``costgraph train`` print for the same inputs
(exact integers; the compute time as the exact fraction
``FLOPs per device / (peak × MFU)`` rounded down to six significant digits,
the value ``costgraph train``'s ``step.compute`` gives as a float).

Published values these comparisons rest on: GPT-2 small 124,439,808 parameters
(Radford et al. 2019; DOMAIN.md §1); the H100 SXM's 80 GB and dense BF16 peak
989.4 TFLOP/s (NVIDIA H100 datasheet; costgraph/hardware.toml).
"""

from __future__ import annotations

import html.parser
import json
import re
import shutil
import subprocess
from fractions import Fraction

import pytest

from costgraph.cli import main
from costgraph.choices import DEFAULT_RESERVE

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package chromium)")


class _Cells(html.parser.HTMLParser):
    """The page's output cells: id → (data-value, text)."""

    def __init__(self):
        super().__init__()
        self.cells, self._open = {}, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("id") == "link":
            self.cells["link"] = a["href"].removeprefix("#")
        if tag == "td" and (a.get("id") or "").startswith("v-"):
            self._open = a["id"][2:]
            self.cells[self._open] = [a.get("data-value"), ""]

    def handle_endtag(self, tag):
        if tag == "td":
            self._open = None

    def handle_data(self, data):
        if self._open:
            self.cells[self._open][1] += data


def _page(tmp_path, *args) -> str:
    out = tmp_path / "calc.html"
    assert main(["web", *args, "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def gpt2_page(tmp_path_factory):
    """``costgraph web gpt --config gpt2``, written once for the tests that only read it."""
    return _page(tmp_path_factory.mktemp("web"), "gpt", "--config", "gpt2")


def _open(tmp_path, page, fragment: str) -> dict:
    """The page's cells after Chromium applied ``fragment``."""
    run = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
                          page.as_uri() + "#" + fragment], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    parser = _Cells()
    parser.feed(run.stdout)
    assert parser.cells, run.stdout[:2000]
    return parser.cells


#: the printer of a closed form in ``costgraph train --format json`` (export/printing.printed: ``expr``, ``tree``,
#: ``latex`` beside each ``value``), as export/training_report.py calls it
_UNPRINTED = {"expr": None, "tree": None, "latex": None}


def _json(capsys, *args) -> dict:
    """``costgraph ARGS --format json``, run by ``main`` in this process, as a dict. For ``train`` the closed
    forms are not printed (``expr``, ``tree`` and ``latex`` are None; every ``value`` is written by the same
    code from the same expression): the page is compared with the values only, and printing the forms of a
    ZeRO-3 or 8-bit-Adam step took 5 of its 6 s of CPU (adam-8bit: a Piecewise per weight).
    tests/test_api_parity.py and tests/export/test_schemas.py check train's whole document."""
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as mp:
        if args[0] == "train":
            from costgraph.export import training_report

            # raising=True: a renamed printer fails here, not silently
            mp.setattr(training_report, "printed", lambda expr, order: dict(_UNPRINTED))
        assert main([*args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _six_digits(x: Fraction) -> str:
    """``x`` rounded down to six significant digits, as the page writes it."""
    k = 0
    while x * 10**k >= 10**6:
        k -= 1
    while x * 10**k < 10**5:
        k += 1
    n = int(x * 10**k)          # x > 0: int() rounds down
    if k <= 0:
        return str(n * 10 ** (-k))
    s = str(n).rjust(k + 1, "0")
    return (s[:-k] + "." + s[-k:]).rstrip("0").rstrip(".")


def _memory_cells(cells, trained):
    for part in ("weights", "gradients", "optimizer", "activations", "total"):
        assert cells[f"mem-{part}"][0] == str(trained["memory"][part]["value"]), part
    # an FP8 policy's buffers (train: one row per buffer under "fp8", beside the FP8 saved inputs, which
    # are inside the activations), 0 under another policy; the total is the parts' sum
    buffers = ("fp8 weight copy", "fp8 weight transpose", "fp8 scales", "fp8 amax history")
    fp8 = sum(part["value"] for name, part in trained["memory"].get("fp8", {}).items() if name in buffers)
    assert cells["mem-fp8"][0] == str(fp8)
    assert fp8 == trained["memory"]["total"]["value"] - sum(trained["memory"][p]["value"] for p in (
        "weights", "gradients", "optimizer", "activations"))


def _check_memory(capsys, cells, model_args, sets, layout_args):
    _memory_cells(cells, _json(capsys, "train", *model_args, "--set", *sets, *layout_args, "--hardware", "h100-sxm"))


def _verdict_cells(cells, trained):
    """The page's fit verdict is train's: the capacity (CUDA's under the runtime reserve), the reserve, the verdict."""
    for cell, key in (("capacity", "capacity_bytes"), ("reserve", "reserve_bytes")):
        assert cells[cell][0] == str(trained["fits"][key]), cell
    assert cells["fits"][0] == ("1" if trained["fits"]["fits"] else "0")


def _check_step(capsys, cells, model_args, sets, layout_args, hardware, reserve=None):
    """The page's step time, memory and verdict are ``costgraph train --hardware``'s for the same layout and
    choices; ``reserve``: the page's ``web --reserve`` (None: train's default, runtime, on both)."""
    given = [] if reserve is None else ["--reserve", reserve]
    trained = _json(capsys, "train", *model_args, "--set", *sets, *layout_args, "--hardware", hardware, *given)
    step = Fraction(cells["step"][0])
    assert float(step) == pytest.approx(trained["step"]["total"]["value"], rel=1e-12), (hardware, layout_args)
    assert cells["step"][1] == _six_digits(step)
    _memory_cells(cells, trained)
    _verdict_cells(cells, trained)
    return trained


def _check_against_cli(capsys, cells, model_args, sets, layout_args, peak, mfu=False, reserve=None):
    for scope in ("model", "layer"):
        derived = _json(capsys, "derive", *model_args, "--set", *sets, "--scope", scope)
        for q, item in derived["quantities"].items():
            assert cells[f"{scope}_{q}"][0] == str(item["value"]), (scope, q)
    # train's default rate on h100-sxm (the per-kernel model of kernels.toml, Megatron's overlap): the
    # page's step time (issue 32 item 3: the page showed the MFU time, 0.947 s, beside train's 0.910 s)
    given = [] if reserve is None else ["--reserve", reserve]   # the page's web --reserve (default runtime, train's)
    trained = _json(capsys, "train", *model_args, "--set", *sets, *layout_args, "--hardware", "h100-sxm", *given)
    step = Fraction(cells["step"][0])
    assert float(step) == pytest.approx(trained["step"]["total"]["value"], rel=1e-12)
    assert cells["step"][1] == _six_digits(step)
    _memory_cells(cells, trained)
    _verdict_cells(cells, trained)
    flops = trained["flops"]["model_per_device"]["value"]
    assert cells["flops"][0] == str(flops)
    exact = Fraction(flops) / (Fraction(peak) * Fraction(45, 100))
    assert cells["time"][1] == _six_digits(exact)
    if mfu:   # the MFU row is train --mfu's step time (the rate covers whole steps)
        at_mfu = _json(capsys, "train", *model_args, "--set", *sets, *layout_args, "--hardware", "h100-sxm",
                       "--mfu", "0.45")
        assert float(exact) == pytest.approx(at_mfu["step"]["total"]["value"], rel=1e-12)
    return trained


@needs_chromium
def test_gpt2_pipeline_page_matches_the_cli(tmp_path, capsys, gpt2_page):
    cells = _open(tmp_path, gpt2_page, "b=2&s=512&TP=2&PP=2&DP=4&zero=1")
    assert cells["model_params"][0] == "124439808"                       # Radford et al. 2019
    trained = _check_against_cli(capsys, cells, ["gpt", "--config", "gpt2"], ["b=2", "s=512"],
                                 ["--tp", "2", "--pp", "2", "--gpus", "16", "--zero", "1"], 989_400_000_000_000,
                                 mfu=True)
    # the last stage the most loaded: its loss under Megatron-LM's default cross-entropy (6 B a logit, 154,389,504
    # bytes) puts it 46,487,040 bytes above the first (the first was the most loaded under the 4 B count before issue 31)
    assert trained["most_loaded_stage"] == 1 and cells["stage"][0] == "last"
    # the step with the links at NCCL's busbw (hardware.toml scale_up_busbw: NCCL src/graph/topo.h, 370.8 of 450 GB/s;
    # 0.00521108 at the line rates; 0.00534209 before NCCL's 14 us network step, hardware.toml latency_scale_out_ns;
    # 0.00535969 at --gemm-rate isolated, before the sustained GEMM rate became the default: kernel_table.rated)
    assert cells["time"][1] == "0.000917461" and cells["step"][1] == "0.00539221"
    # the state is in the address: the link the page writes reproduces every cell
    link = cells["link"]
    assert link.startswith("b=2&s=512&h=768&") and "&TP=2&PP=2&DP=4&zero=1&recompute=none&precision=mixed&optimizer=adam&hardware=h100-sxm&" in link
    assert _open(tmp_path, gpt2_page, link) == cells
    # the other kernel-table presets, other precisions (FP8 on a preset with an FP8 peak) and optimizers:
    # train's step time and memory for the same layout (the page adds the optimizer step to the rest)
    gpt2, layout = ["gpt", "--config", "gpt2"], ["--tp", "2", "--pp", "2", "--gpus", "16", "--zero", "1"]
    for hw, pol, opt in (("h200", "fp8-blockwise", "muon"), ("b200", "fp8-mxfp8", "adam-8bit"), ("gb200", "bf16", "sgd")):
        cells = _open(tmp_path, gpt2_page, link.replace("hardware=h100-sxm", f"hardware={hw}")
                      .replace("precision=mixed", f"precision={pol}").replace("optimizer=adam", f"optimizer={opt}"))
        _check_step(capsys, cells, gpt2, ["b=2", "s=512"], [*layout, "--precision", pol, "--optimizer", opt], hw)
    # flat-efficiency presets (no kernel table; not the page's --hardware): train's step time from the
    # flat trees their peaks and links fill (export.web_steps), its memory with the FP8 transpose train
    # resolves there; h100-pcie's scale-up domain of 2 sends the data-parallel traffic out of the node
    for hw, pol, opt in (("a100-80gb-sxm", "bf16", "adam"), ("mi300x", "fp8-delayed", "lion"),
                         ("h100-pcie", "mixed", "muon")):
        cells = _open(tmp_path, gpt2_page, link.replace("hardware=h100-sxm", f"hardware={hw}")
                      .replace("precision=mixed", f"precision={pol}").replace("optimizer=adam", f"optimizer={opt}"))
        _check_step(capsys, cells, gpt2, ["b=2", "s=512"], [*layout, "--precision", pol, "--optimizer", opt], hw)
    # FP8 on a preset without an FP8 peak: named, as train refuses it
    a100 = _open(tmp_path, gpt2_page, link.replace("hardware=h100-sxm", "hardware=a100-80gb-sxm")
                 .replace("precision=mixed", "precision=fp8-current"))
    assert a100["step"][0] is None and "no FP8 peak" in a100["step"][1]
    # MXFP8 on Hopper: train refuses it (fp8.toml: compute capability 10.0 or higher), so does the page
    h100 = _open(tmp_path, gpt2_page, link.replace("precision=mixed", "precision=fp8-mxfp8"))
    assert h100["step"][0] is None and h100["step"][1] == "costgraph train refuses --precision fp8-mxfp8 on h100-sxm"
    assert main(["train", *gpt2, "--set", "b=2", "s=512", *layout, "--precision", "fp8-mxfp8",
                 "--hardware", "h100-sxm"]) == 2


@needs_chromium
def test_llama_zero3_selective_page_matches_the_cli(tmp_path, capsys):
    page = _page(tmp_path, "llama", "--config", "llama-3-8b", "--tp", "4", "--zero", "3",
                 "--recompute", "selective", "--precision", "bf16", "--optimizer", "adam-8bit", "--reserve", "8GB")
    # TP, ZeRO, recompute, precision and optimizer from the command line (the step time's: the optimizer
    # step reads the states), the optimizer in the address too: bitsandbytes' 8-bit Adam keeps 8-bit states
    # only for tensors of 4096 elements or more (a size choice the page writes)
    cells = _open(tmp_path, page, "b=1&s=8192&DP=2&optimizer=adam-8bit")
    _check_against_cli(capsys, cells, ["llama", "--config", "llama-3-8b"], ["b=1", "s=8192"],
                       ["--tp", "4", "--gpus", "8", "--zero", "3", "--recompute", "selective", "--precision", "bf16",
                        "--optimizer", "adam-8bit"], 989_400_000_000_000, reserve="8GB")
    assert cells["stage"][0] == "single" and cells["reserve"][0] == "8000000000"   # web --reserve 8GB, as train's
    # another precision and optimizer than the page's first: memory and step time as train's
    fp32 = _open(tmp_path, page, "b=1&s=8192&DP=2&optimizer=adafactor&precision=fp32")
    _check_step(capsys, fp32, ["llama", "--config", "llama-3-8b"], ["b=1", "s=8192"],
                ["--tp", "4", "--gpus", "8", "--zero", "3", "--recompute", "selective", "--precision", "fp32",
                 "--optimizer", "adafactor"], "h100-sxm", "8GB")
    # FP8 (Transformer Engine's current scaling): its own activations (FP8 copies of the GEMMs' inputs)
    fp8 = _open(tmp_path, page, "b=1&s=8192&DP=2&optimizer=adam&precision=fp8-current&hardware=h200")
    _check_step(capsys, fp8, ["llama", "--config", "llama-3-8b"], ["b=1", "s=8192"],
                ["--tp", "4", "--gpus", "8", "--zero", "3", "--recompute", "selective", "--precision", "fp8-current",
                 "--optimizer", "adam"], "h200", "8GB")


@needs_chromium
def test_flat_preset_step_time_matches_train(tmp_path, capsys):
    """The page's own preset without a kernel table (mi300x: train's flat model, 1/2 of the peaks, no
    optimizer step of its own) and a kernel-table preset on the same page: train's step time and memory."""
    src = tmp_path / "tiny.cg"
    src.write_text('model tiny {\n  dim b "batch"\n  dim h "width"\n  input x[b, h]: act\n'
                   '  return linear(x, h, name = proj)\n}\n', encoding="utf-8")
    page = _page(tmp_path, str(src), "--set", "b=8", "h=1024", "--hardware", "mi300x", "--reserve", DEFAULT_RESERVE)
    for hw, pol, opt in (("mi300x", "fp32", "muon"), ("mi300x", "fp8-current", "adam"), ("h200", "bf16", "lion")):
        cells = _open(tmp_path, page, f"DP=2&zero=2&precision={pol}&optimizer={opt}&hardware={hw}")
        _check_step(capsys, cells, [str(src)], ["b=8", "h=1024"],
                    ["--gpus", "2", "--zero", "2", "--precision", pol, "--optimizer", opt], hw, DEFAULT_RESERVE)
    # a flat preset other than the page's (the same flat trees, its own peaks and links), and a Blackwell
    # one without a kernel table (b300: no FP8 weight transpose, as train resolves it on the preset)
    for hw, pol, opt in (("mi325x", "mixed", "adam"), ("b300", "fp8-delayed", "adam")):
        cells = _open(tmp_path, page, f"DP=2&zero=2&precision={pol}&optimizer={opt}&hardware={hw}")
        trained = _check_step(capsys, cells, [str(src)], ["b=8", "h=1024"],
                              ["--gpus", "2", "--zero", "2", "--precision", pol, "--optimizer", opt], hw,
                              DEFAULT_RESERVE)
    assert "fp8 weight transpose" not in {k for k, v in trained["memory"]["fp8"].items() if v["value"]}


@needs_chromium
def test_serving_side_matches_infer(tmp_path, capsys, gpt2_page):
    """The serving inputs (prompt, generate, batch, KV dtype, weight dtype, TP degree) and the preset give
    what `costgraph infer --tp --weights --kv` prints for them: the KV cache, the weights, the memory at the
    batch, the usable memory, the verdict and the largest batch (issue 32 item 3)."""
    for kv, hw, tp, weights in (("bf16", "h100-sxm", "1", "bf16"), ("fp8", "h200", "2", "int8"),
                                ("int8", "b200", "4", "int4"), ("fp16", "mi300x", "1", "fp8")):
        cells = _open(tmp_path, gpt2_page, f"prompt=512&generate=128&batch=8&kv_dtype={kv}&hardware={hw}"
                                           f"&serve_tp={tp}&weights={weights}")
        inferred = _json(capsys, "infer", "gpt", "--config", "gpt2", "--hardware", hw, "--prompt", "512",
                         "--generate", "128", "--batch", "8", "--kv", kv, "--tp", tp, "--weights", weights)
        for cell, key in (("kv_per_token", "kv_cache_bytes_per_token"), ("kv", "kv_cache_bytes_paged"),
                          ("weights", "weight_bytes"), ("memory", "memory_bytes")):
            assert cells[f"serve-{cell}"][0] == str(inferred[key]["value"]), (kv, cell)
        assert cells["serve-capacity"][0] == str(inferred["settings"]["capacity_bytes"])
        assert cells["serve-fits"][0] == ("1" if inferred["fits"] else "0")
        assert cells["serve-max_batch"][0] == str(inferred["max_batch"]), kv
    # GPT-2 in bf16: 4hl = 36,864 bytes of KV per token (2 tensors x 2 bytes x h x l); 3,234 sequences of
    # 640 tokens fit 0.9 x 79.22 GiB (the H100's memory as CUDA reports it, infer's default convention:
    # runtime_memory.toml [visible.h100-sxm], vllm PR #10511) beside the 248,879,616 bytes of weights
    assert _open(tmp_path, gpt2_page, "prompt=512&generate=128&batch=8")["serve-max_batch"][0] == "3234"


@needs_chromium
def test_bad_inputs_are_named_not_computed(tmp_path, gpt2_page):
    page = gpt2_page
    cells = _open(tmp_path, page, "h=12x&TP=5&mfu=1.5")
    assert cells["model_params"][0] is None and cells["model_params"][1] == "h: not a whole number"
    assert cells["layer_kv_cache_bytes_per_token"][1] == "h: not a whole number"   # never gpt2's h = 768
    assert cells["time"][1] == ""                      # no FLOPs to time
    cells = _open(tmp_path, page, "s=")                # an emptied field is not the configuration's value
    assert cells["model_params"][0] == "124439808" and cells["model_flops_forward"][1] == "s: not a whole number"
    cells = _open(tmp_path, page, "TP=5&mfu=1.5")      # a = 12 heads do not split over 5 devices
    assert cells["model_params"][0] == "124439808"     # no layout in a parameter count
    assert cells["mem-total"][0] is None and "not a whole number" in cells["mem-total"][1]
    # train's runtime reserve (the page's default): the memory CUDA reports on an H100 SXM, 79.22 GiB
    # (runtime_memory.toml [visible]), GB = 10^9 bytes, two decimals as train prints
    assert cells["capacity"][1].startswith("85,061,827,297  (85.06 GB, as CUDA reports it")
    cells = _open(tmp_path, page, "mfu=1.5")
    assert cells["time"][1] == "MFU must be in (0, 1]"


@needs_chromium
def test_runtime_reserve_per_vendor_is_trains(tmp_path, capsys, gpt2_page):
    """The page's default reserve counts each parallel group's buffers as train does on the preset's vendor:
    RCCL's on AMD (mi300x), none on a TPU (runtime_memory.training_parts: no source for Google's runtime)."""
    for hw in ("mi300x", "tpu-v5p"):
        cells = _open(tmp_path, gpt2_page, f"TP=2&DP=4&hardware={hw}")
        trained = _json(capsys, "train", "gpt", "--config", "gpt2", "--gpus", "8", "--tp", "2", "--hardware", hw)
        _verdict_cells(cells, trained)
    assert cells["reserve"][0] == "0"


@needs_chromium
def test_model_text_stays_text(tmp_path):
    """A dimension's description that looks like markup reaches the page as text."""
    evil = '</script><script>document.title="pwned"</script><!--'
    src = tmp_path / "evil.cg"
    src.write_text('model evil {\n  dim b "batch"\n  dim s "seq"\n  dim h "' + evil.replace('"', "'") + '"\n'
                   "  input x[b, s, h]: act\n  return linear(x, h, name = proj)\n}\n", encoding="utf-8")
    page = _page(tmp_path, str(src), "--set", "h=8", "b=1", "s=4")
    text = page.read_text(encoding="utf-8")
    assert text.count("</script>") == 3 and "<!--" not in text
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                          "--no-first-run", "--disable-background-networking", "--disable-component-update",
                          "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
                          "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert "pwned" not in re.sub(r"<script.*?</script>", "", dom, flags=re.S).split("<title>")[1].split("</title>")[0]
    assert "&lt;/script&gt;&lt;script&gt;document.title='pwned'" in dom
    assert 'data-value="64"' in dom                    # the linear layer's 8·8 weights (no bias: 64)


@needs_chromium
def test_page_prints(tmp_path, gpt2_page):
    """The page prints cleanly: a print stylesheet (black on white, inputs as their values, rows kept whole,
    the link hidden) and Chromium's own PDF of it, a few pages of A4/Letter."""
    text = gpt2_page.read_text(encoding="utf-8")
    css = text.split("@media print {", 1)[1].split("\n}\n", 1)[0]
    assert "break-inside: avoid" in css and "p.link { display: none; }" in css and "color: #000" in css
    pdf = tmp_path / "calc.pdf"
    run = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
                          "--no-pdf-header-footer", f"--print-to-pdf={pdf}", gpt2_page.as_uri() + "#b=2&TP=2"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0 and pdf.read_bytes().startswith(b"%PDF"), run.stderr[-2000:]
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf.read_bytes()))
    assert 1 <= pages <= 6, pages


def test_page_is_self_contained(gpt2_page):
    text = gpt2_page.read_text(encoding="utf-8")
    # 557 kB (the bound 575 kB; 550 before the overlap contention's terms, 517 kB then; 500 before gb300's kernel
    # table joined the page's four FP8 policies): the step time's pool (22 step-time models: 5 kernel tables, 17
    # shapes of flat preset, h800's own for its contention.toml entry; x 7 precisions x 4 ZeRO x 3 recompute x 2
    # stage sets, every part written once), memory per precision and optimizer (each closed form's text once:
    # DATA.formulas), serving per TP and dtype
    assert len(text.encode()) < 575_000
    low = text.lower()
    assert not re.search(r"https?://|\bwww\.|\bfile:", low)   # no URL at all
    assert " src=" not in low and "<link" not in low and "@import" not in low and "url(" not in low
    assert "content-security-policy" in low and "default-src 'none'" in low
    data = json.loads(re.search(r'<script type="application/json" id="cg-data">(.*?)</script>', text, re.S).group(1))
    assert [d["name"] for d in data["dims"]] == ["b", "s", "h", "a", "l", "V", "s_max"]
    assert [d["value"] for d in data["dims"]] == [1, 1024, 768, 12, 12, 50257, 1024]    # config gpt2
    fp8 = {"fp8-delayed", "fp8-current", "fp8-blockwise", "fp8-mxfp8"}   # Transformer Engine's four recipes
    assert set(data["training"]["states"]) == {"mixed", "bf16", "fp32"} | fp8 == set(data["precision"])
    step = data["training"]["step"]
    assert step["presets"] == [h["key"] for h in data["hardware"]]        # a step time on every preset of the menu
    tables = [k for k, model in step["model"].items() if model == k]
    assert tables == ["h100-sxm", "h200", "b200", "gb200", "gb300"]              # kernels.toml's tables: their own trees
    # fp8.toml's capability bounds, as train checks them: blockwise from 9.0 (Hopper), MXFP8 on 10.x (Blackwell)
    assert set(step["rest"]["h200"]) == set(data["precision"]) - {"fp8-mxfp8"} and set(step["bandwidth"]) == set(tables)
    assert set(step["rest"]["b200"]) == set(data["precision"])
    # the flat presets share trees by shape: both A100s one (no FP8 peak: no FP8 policy), their peaks filled in
    a40, a80 = step["model"]["a100-40gb-sxm"], step["model"]["a100-80gb-sxm"]
    assert a40 == a80 and set(step["rest"][a40]) == {"mixed", "bf16", "fp32"} and not step["failed"]
    assert step["numbers"]["a100-80gb-sxm"]["HW_PEAK_BF16"] == "312000000000000"   # NVIDIA A100 datasheet
    # the step time reads no master copy: mixed's and bf16's rest are one part of the pool, fp32's another
    rest = step["rest"]["b200"]   # [ZeRO][recompute][stage set]: ZeRO-1, full recompute, PP > 1
    full = data["recompute"].index("full")
    assert rest["mixed"][1][full][1] == rest["bf16"][1][full][1] != rest["fp32"][1][full][1]
    assert set(data["training"]["states"]["mixed"]) == {"0", "1", "2", "3"}
    assert set(data["training"]["optimizer"]["mixed"]) == {"adam", "adam-8bit", "adafactor", "lion", "muon", "sgd"}
    assert set(data["training"]["activations"]["bf16"]) == {"none", "selective", "full"}
    # bf16 weights under Megatron-style TP (2 bytes each): replicated per layer the two LayerNorms
    # (4h) and the row-parallel biases (2h) -> 12hl; the position table 2h s_max; the final
    # LayerNorm 4h; sharded: the vocabulary-parallel embedding 2Vh/TP, 12h^2 weights and 7h
    # column-parallel biases per layer -> (24h^2 + 14h) l/TP
    assert data["formulas"][data["training"]["states"]["mixed"]["1"]["single"]["weights"]["fn"]] == (
        "4 h + 2 h s_max + 12 h l + 2 V h/TP + 14 h l/TP + 24 l h^2/TP")


def test_cli_refuses_and_prints(tmp_path, capsys):
    out = tmp_path / "calc.html"
    out.write_text("mine", encoding="utf-8")
    assert main(["web", "gpt", "--config", "gpt2", "-o", str(out)]) == 2        # no silent overwrite
    assert out.read_text(encoding="utf-8") == "mine"
    assert "--force" in capsys.readouterr().err
    assert main(["web", "gpt", "--config", "gpt2", "--tp", "0", "-o", str(tmp_path / "x.html")]) == 2
    assert "TP must be a whole number from 1 to 1,000,000, got 0" in capsys.readouterr().err
    assert main(["web", "gpt", "--config", "gpt2", "--pp", "9" * 30, "-o", str(tmp_path / "x.html")]) == 2
    assert "PP must be a whole number from 1 to 1,000,000" in capsys.readouterr().err
    assert main(["web", "gpt", "--config", "gpt2", "--mfu", "2", "-o", str(tmp_path / "x.html")]) == 2
    for reserve, said in (("2", "--reserve 2: a number without a unit"), ("1", "--reserve 1 keeps the whole device"),
                          ("runtim", "cannot read --reserve 'runtim'")):   # as train refuses them
        capsys.readouterr()
        assert main(["web", "gpt", "--config", "gpt2", "--reserve", reserve, "-o", str(tmp_path / "x.html")]) == 2
        assert said in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()
    capsys.readouterr()
    tiny = tmp_path / "tiny.cg"
    tiny.write_text('model tiny {\n  dim b "batch"\n  dim h "width"\n  input x[b, h]: act\n'
                    '  return linear(x, h, name = proj)\n}\n', encoding="utf-8")
    assert main(["web", str(tiny), "-o", "-"]) == 0                             # - is standard output
    printed = capsys.readouterr().out
    assert printed.startswith("<!DOCTYPE html>") and printed.rstrip().endswith("</html>")


# --- the hint for a missing -o is whole (issue 20 trial) -------------------------------------------------------------

def test_web_required_output_hint_is_whole(capsys):
    # `costgraph web gpt` without -o: the hint quoted -o's help up to its first ';', which cut the
    # help's parenthesis ("(required; costgraph web --help ..."), and --help said "- for standard
    # output" twice.
    assert main(["web", "gpt"]) == 2
    err = capsys.readouterr().err
    assert "hint: give --output FILE — the page to write (required); costgraph web --help lists its arguments" in err


def test_pipeline_stages_only_where_top_level_layers_split(monkeypatch):
    # CLIP's towers repeat inside vision_model and text_model: no top-level layers for pipeline stages to split
    # (train refuses --pp 2: tests/training/test_training_memory.py), so the page derives no stage formulas and
    # its script says "PP must be 1" (was: a first stage holding the whole model beside an empty last one)
    import costgraph
    from costgraph.export import web

    seen = {}

    class Stop(Exception):
        pass

    def spy(model, add, pipeline):
        seen[model.name] = pipeline
        raise Stop   # the table's derivations are not needed to see what it was asked for

    monkeypatch.setattr(web, "training_table", spy)
    for name in ("clip", "gpt"):
        with pytest.raises(Stop):
            web.page(costgraph.load(name))
    assert seen == {"clip": False, "gpt": True}
