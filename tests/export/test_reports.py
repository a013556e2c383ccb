"""``costgraph report``: LaTeX compiled by pdflatex, HTML rendered by headless
Chromium, Markdown parsed back — each checked for content, not just existence.

Published values used (with sources):

* GPT-2 small has exactly 124,439,808 parameters (Radford et al. 2019's 124M
  model; DOMAIN.md §1: ``l(12h² + 13h) + Vh + s_max·h + 2h``);
* one GPT layer: attention ``4h² + 4h`` parameters, MLP ``8h² + 5h``
  (DOMAIN.md §1); forward FLOPs ``24bsh² + 4bs²h`` (Korthikanti et al. 2022,
  Narayanan et al. 2021), of which the MLP ``16bsh²``;
* Mixtral-8x7B: 46,702,792,704 parameters in all, 12,879,925,248 active
  (the released checkpoint's count; Jiang et al. 2024 round them to 47B and 13B).
"""

from __future__ import annotations

import html.parser
import re
import shutil
import struct
import subprocess

import pytest

from costgraph.cli import main
from cli_checks import EVIL_MD, refused, run

PDFLATEX = shutil.which("pdflatex")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_tex = pytest.mark.skipif(PDFLATEX is None, reason="pdflatex (Debian texlive-latex-base) is not installed")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

GPT2 = dict(b=1, s=1024, h=768, a=12, l=12, V=50257, s_max=1024)   # models/gpt.cg, config gpt2
LAYER_FLOPS_TEX = "24 b s h^{2} + 4 b s^{2} h"                      # printing.field_order, SymPy's latex()


def _report(tmp_path, name: str, *args: str) -> str:
    out = tmp_path / name
    assert main(["report", *args, "-o", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def test_report_refuses_a_reserve_without_device_memory(tmp_path, capsys):
    # trial6: `report --train --reserve nan` without --memory or --hardware wrote the page (exit 0), the reserve read
    # by no verdict (costgraph.training.api.check_reserve, as train)
    out = tmp_path / "r.md"
    assert main(["report", "gpt", "--config", "gpt2", "--format", "md", "--train", "--gpus", "8", "--reserve", "nan",
                 "-o", str(out)]) == 2
    assert "--reserve nan keeps memory free for the fit verdict, which needs the device memory" in \
        capsys.readouterr().err
    assert not out.exists()


# ------------------------------------------------------------------ Markdown

def _md_tables(text: str) -> dict[str, list[list[str]]]:
    """Pipe tables by the heading above them: rows of cells (header and separator dropped)."""
    tables, heading, rows = {}, None, None
    for line in text.splitlines() + [""]:
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if rows is None:
                rows = []
            rows.append(cells)
        elif rows is not None:
            tables[heading] = rows[2:]   # header, separator
            rows = None
    return tables


def test_markdown_tables_per_block_and_numbers(tmp_path, capsys):
    # no --format: -o gpt2.md names Markdown, and the output says so (the same Markdown as --format md:
    # test_markdown_training_section gives the flag)
    text = _report(tmp_path, "gpt2.md", "gpt", "--config", "gpt2")
    assert re.search(r"\(md, from the suffix \.md, [\d,]+ bytes\)$", capsys.readouterr().out.strip())
    tables = _md_tables(text)
    blocks = tables["Per block"]
    # every block and group of models/gpt.cg, and the top-level nodes that hold something, in program order
    assert [r[0] for r in blocks] == ["`wte`", "`wpe`", "`drop`", "`layers`", "`layers/attn`", "`layers/mlp`",
                                      "`ln_f`", "`lm_head`"]
    by_path = {r[0].strip("`"): r for r in blocks}
    h = GPT2["h"]
    assert by_path["layers/attn"][3] == f"$4 h^{{2}} + 4 h$ = {4 * h * h + 4 * h:,} (2.362 M)"
    assert by_path["layers/mlp"][3].endswith(f"= {8 * h * h + 5 * h:,} (4.722 M)")
    b, s = GPT2["b"], GPT2["s"]
    assert by_path["layers/mlp"][4] == f"$16 b s h^{{2}}$ = {16 * b * s * h * h:,} FLOP (9.664 GFLOP)"
    assert by_path["layers"][2] == "$l$"
    totals = {r[0]: r for r in tables["whole model"]}
    assert totals["parameters"][2] == "124,439,808 (124.4 M)"
    layer = {r[0]: r for r in tables["one layer of 'layers' (repeated l times)"]}
    assert layer["forward FLOPs"][1] == f"${LAYER_FLOPS_TEX}$"
    assert layer["forward FLOPs"][2].startswith(f"{24 * b * s * h * h + 4 * b * s * s * h:,} FLOP")
    legend = {r[0]: r for r in tables["Symbols"]}
    assert legend["$s_{max}$"][1:] == ["maximum sequence length (rows of the position table)", "1,024"]
    assert set(legend) == {f"${k}$" for k in ("b", "s", "h", "a", "l", "V")} | {"$s_{max}$"}
    assert "- **FLOPs**: 'matmul'" in text and "GiB = 2³⁰ bytes" in text


@pytest.mark.parametrize("argv, fragment", [
    (["-o", "gpt2.txt"], "cannot tell the report's format from 'gpt2.txt' ('.txt')"),
    (["-o", "gpt2"], "(no suffix)"),
    ([], "report needs a format"),
    (["-o", "-"], "report needs a format"),
])
def test_report_format_unnamed_is_refused(tmp_path, capsys, monkeypatch, argv, fragment):
    monkeypatch.chdir(tmp_path)   # refused before the model is read: nothing written
    err = refused(capsys, ["report", "gpt", *argv], fragment, "--format tex, html or md")
    assert "usage:" not in err and not list(tmp_path.iterdir())


def test_markdown_training_section(tmp_path):
    # mixed-precision Adam: 2 + 2 + 12 bytes per parameter (ZeRO paper, Rajbhandari et al. 2020, Sec. 3.1)
    text = _report(tmp_path, "train.md", "gpt", "--config", "gpt2", "--train", "--memory", "2GB", "--reserve", "0", "--format", "md")
    N = 124_439_808
    stage = {r[0]: r for r in _md_tables(text)["stage 0 (the whole model)"]}
    assert stage["weights"][2].startswith(f"{2 * N:,} bytes")
    assert stage["gradients"][2].startswith(f"{2 * N:,} bytes")
    assert stage["optimizer states"][2].startswith(f"{12 * N:,} bytes")
    assert "- layout: 1 GPUs = tp 1 × pp 1 × cp 1 × dp 1; ep 1; ZeRO 0" in text
    assert "**device memory 2,000,000,000 bytes (2.00 GB, 1.86 GiB): the most-loaded device does NOT fit**" in text


def test_markdown_without_values_has_formulas_only(tmp_path):
    text = _report(tmp_path, "mixtral.md", "mixtral", "--format", "md")
    tables = _md_tables(text)
    assert all(len(r) == 2 for r in tables["whole model"])          # quantity, formula: no value column
    paths = [r[0].strip("`") for r in tables["Per block"]]
    assert "layers/layer/mlp/experts" in paths                      # the experts' repeat group, E copies
    experts = next(r for r in tables["Per block"] if r[0] == "`layers/layer/mlp/experts`")
    assert experts[2] == "$l E$"


# ------------------------------------------------------------------ LaTeX

def _pdflatex(folder, name: str) -> str:
    run = subprocess.run([PDFLATEX, "-halt-on-error", "-interaction=nonstopmode", name], cwd=folder,
                         capture_output=True, text=True, timeout=120)
    log = (folder / name.replace(".tex", ".log")).read_text(encoding="latin-1")
    assert run.returncode == 0, log[-3000:]
    assert not re.search(r"^! ", log, re.M), log[-3000:]
    pdf = folder / name.replace(".tex", ".pdf")
    assert pdf.read_bytes()[:5] == b"%PDF-"
    # only the Type 1 fonts texlive-latex-base ships: no bitmap font made by METAFONT
    assert "mktexpk" not in log and ".600pk" not in log and ".pk>" not in log
    return log


@needs_tex
@pytest.mark.parametrize("args, expected", [
    (["gpt", "--config", "gpt2"], [LAYER_FLOPS_TEX, "124,439,808 (124.4 M)", r"\texttt{layers/\allowbreak{}attn}"]),
    (["llama", "--config", "llama-3-8b", "--gpus", "8", "--tp", "2", "--pp", "2", "--zero", "1",
      "--hardware", "h100-sxm", "--prompt", "512", "--generate", "128"],
     [r"\subsection*{Training memory per device}", "stage 0 (first)", "stage 1 (last)", r"\subsection*{Inference}",
      "prefill FLOPs", r"\mathrm{kv}"]),
    (["mixtral", "--config", "mixtral-8x7b"], ["46,702,792,704", "12,879,925,248", r"mlp/\allowbreak{}experts}"]),
    (["gemma2", "--config", "gemma-2-9b"], [r"\texttt{layers/\allowbreak{}local}", r"\texttt{layers/\allowbreak{}global}",
                                             r"\min(s, w)"]),
])
def test_latex_document_compiles(tmp_path, args, expected):
    text = _report(tmp_path, "report.tex", *args, "--format", "tex")
    assert text.startswith("% costgraph report") and r"\documentclass" in text and text.rstrip().endswith(r"\end{document}")
    for piece in expected:
        assert piece in text, piece
    uses = set(re.findall(r"\\usepackage(?:\[[^\]]*\])?\{([^}]*)\}", text))
    assert uses <= {"inputenc", "geometry", "amsmath", "array", "longtable"}   # all in texlive-latex-base
    _pdflatex(tmp_path, "report.tex")


@needs_tex
def test_latex_fragment_inputs_into_a_paper(tmp_path):
    text = _report(tmp_path, "costs.tex", "gpt", "--config", "gpt2", "--format", "tex", "--fragment")
    assert r"\documentclass" not in text and r"\begin{document}" not in text
    assert LAYER_FLOPS_TEX in text
    (tmp_path / "paper.tex").write_text("\\documentclass{article}\n\\usepackage{amsmath}\n\\usepackage{array}\n"
                                        "\\usepackage{longtable}\n\\begin{document}\nOur model:\n\n"
                                        "\\input{costs}\n\\end{document}\n", encoding="utf-8")
    log = _pdflatex(tmp_path, "paper.tex")
    assert "costs.tex" in log   # it was read


def test_fragment_only_for_tex():
    assert main(["report", "gpt", "--format", "md", "--fragment"]) == 2


def test_tex_text_escapes():
    from costgraph.export.reports.tex import text

    assert text("a_b & 5% {x} #1 $ ~ ^") == r"a\_b \& 5\% $\{$x$\}$ \#1 \$ \texttt{\char126} \texttt{\char94}"
    assert text("8 × 2 ≤ 2³⁰") == r"8 $\times$ 2 $\leq$ 2\textsuperscript{3}\textsuperscript{0}"


# ------------------------------------------------------------------ HTML

class _Doc(html.parser.HTMLParser):
    """Tag counts, and the rows of every table: each cell's text and its MathML tokens (``mi=b``)."""

    def __init__(self):
        super().__init__()
        self.tags: dict[str, int] = {}
        self.rows: list[list[tuple[str, list[str]]]] = []
        self._row = self._cell = self._token = None

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = ["", []]
        elif tag in ("mi", "mn", "mo"):
            self._token = tag

    def handle_endtag(self, tag):
        if tag in ("mi", "mn", "mo"):
            self._token = None
        elif tag in ("td", "th") and self._cell is not None:
            self._row.append((self._cell[0].strip(), self._cell[1]))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is None:
            return
        if self._token is not None:
            self._cell[1].append(f"{self._token}={data}")
        else:
            self._cell[0] += data


def _parse(text: str) -> _Doc:
    d = _Doc()
    d.feed(text)
    return d


def _chromium(tmp_path, page, *flags) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'profile'}", *flags, page.as_uri()],
                          capture_output=True, text=True, timeout=120)


def _self_contained(text: str) -> None:
    low = text.lower()
    assert "http" not in low                      # no URL at all: no resource can come from the network
    for tag in ("<script", "<link", "<img", "<iframe", "<object", "<embed", "@import", " src="):
        assert tag not in low, tag
    assert not re.search(r"url\((?!#)", low) and not re.search(r"href=\"(?!#)", low)   # only references inside
    ids = re.findall(r'\bid="([^"]+)"', text)
    for ref in set(re.findall(r'(?:url\(#|href="#)([^)"]+)', text)):
        assert ids.count(ref) == 1, ref          # each reference names one element of the page


def test_html_page_is_self_contained_with_mathml(tmp_path):
    text = _report(tmp_path, "gpt2.html", "gpt", "--config", "gpt2", "--format", "html")
    _self_contained(text)
    doc = _parse(text)
    assert doc.tags["math"] >= 30 and doc.tags["svg"] == 1                     # the plot of FLOPs by block
    assert doc.tags["style"] == 2 and "<style type=\"text/css\">svg *{" in text   # the page's; the plot's, kept to SVG
    model_row, layer_row = [r for r in doc.rows if r and r[0][0] == "forward FLOPs"][:2]
    assert model_row[1][1][:2] == ["mi=l", "mo=\u2062"]            # l (24 b s h^2 + ...) + 2 b s h V
    # one layer's forward FLOPs as MathML, factors in the field's order: 24 b s h^2 + 4 b s^2 h
    tokens = [t for t in layer_row[1][1] if t != "mo=\u2062"]      # invisible times
    assert tokens == ["mn=24", "mi=b", "mi=s", "mi=h", "mn=2", "mo=+", "mn=4", "mi=b", "mi=s", "mn=2", "mi=h"]
    assert layer_row[2][0].startswith(f"{24 * 1024 * 768 ** 2 + 4 * 1024 ** 2 * 768:,} FLOP")


@needs_chromium
def test_html_renders_in_chromium_with_plots(tmp_path):
    page = tmp_path / "llama.html"
    text = _report(tmp_path, "llama.html", "llama", "--config", "llama-3-8b", "--gpus", "8", "--tp", "2",
                   "--zero", "1", "--hardware", "h100-sxm", "--prompt", "512", "--generate", "128",
                   "--over", "s=2048:8192:x2", "--format", "html")
    _self_contained(text)
    dom = _chromium(tmp_path, page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = _parse(dom.stdout)
    assert rendered.tags.get("math", 0) == text.count("<math ")      # every formula reached the DOM
    assert rendered.tags.get("msup", 0) > 10 and rendered.tags.get("svg", 0) == 3   # FLOPs, memory, roofline
    for piece in ("Training memory per device", "Inference", "time per output token (mean)",
                  "memory per device (GB = 10⁹ bytes)", "arithmetic intensity (FLOP/byte of HBM traffic)",
                  "layers/layer/self_attn"):
        assert piece in dom.stdout, piece
    shot = tmp_path / "shot.png"
    run = _chromium(tmp_path, page, f"--screenshot={shot}", "--window-size=1200,2000")
    assert run.returncode == 0, run.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    width, height = struct.unpack(">II", data[16:24])   # IHDR
    assert (width, height) == (1200, 2000)


def test_infer_options_need_hardware():
    assert main(["report", "llama", "--config", "llama-3-8b", "--prompt", "512", "--generate", "8",
                 "--format", "md"]) == 2
    assert main(["report", "llama", "--config", "llama-3-8b", "--prompt", "512", "--hardware", "h100-sxm",
                 "--format", "md"]) == 2


# --- Markdown reports escape the model's strings (issue 18) ----------------------------------------------------------


def test_markdown_report_escapes_model_strings(tmp_path, capsys):
    model = tmp_path / "evil.cg"
    model.write_text(EVIL_MD)
    out = tmp_path / "evil.md"
    rc, _, err = run(capsys, "report", str(model), "--format", "md", "-o", str(out))
    assert rc == 0, err
    text = out.read_text(encoding="utf-8")
    assert "<script" not in text and "<img" not in text
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| $")}
    # CommonMark 0.31 §2.4: a backslash before punctuation is the literal character
    assert rows["| $b$"] == (r"| $b$ | &lt;script&gt;alert(1)&lt;/script&gt; \| \*x\* \[l\](javascript:x) \`c\` |")
    assert rows["| $h$"] == r"| $h$ | &lt;img src=x onerror=alert(1)&gt; a_b \_e\_ &amp; c |"


# --- a report's average layer worded as derive's (issue 18) ----------------------------------------------------------

def test_report_average_layer_uses_derive_wording(capsys):
    """gemma-3-1b: 26 layers, one global in 6 (floor(26/6) = 4): the per-layer forward FLOPs are
    32416265666560/13 = 2,493,558,897,427 9/13."""
    code, out, err = run(capsys, "report", "gemma3_text", "--config", "gemma-3-1b", "--format", "md")
    assert code == 0, err
    assert "/13 FLOP |" not in out
    assert "| 2,493,558,897,427 9/13 FLOP (average; ≈ 2,493,558,897,427.7) |" in out
    code, derived, err = run(capsys, "derive", "gemma3_text", "--config", "gemma-3-1b", "--scope", "layers")
    assert "forward FLOPs                2,493,558,897,427 9/13 FLOP (average; ≈ 2,493,558,897,427.7)" in derived


# --- a report repeats the inference warnings (new-user trial) --------------------------------------------------------

def test_report_repeats_the_inference_warnings(capsys):
    # GPT-2's learned position table has s_max = 1,024 rows: a 2,000 + 100 token request is past it
    from costgraph.cli import main

    assert main(["report", "gpt", "--config", "gpt2", "--format", "md", "--hardware", "h100-sxm",
                 "--prompt", "2000", "--generate", "100"]) == 0
    assert "P + G = 2,100 positions is longer than s_max = 1,024" in capsys.readouterr().out
