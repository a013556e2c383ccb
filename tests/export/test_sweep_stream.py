"""`costgraph sweep` streams (issue 18, "Hangs and memory"): memory independent of
the row count, output byte for byte what the in-memory sweep wrote before
(tests/sweep_fixtures/, written by costgraph before streaming, commit "sweep
output fixtures"; the llama and gemma2 files' activation_bytes column rewritten when the korthikanti
profile took Megatron's fused gated MLP, 2·b·s·i·l bytes less, every other byte unchanged), strict JSON across chunk boundaries, an arithmetic axis never
listed, and ``--max-rows`` a cap on output only."""

from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path

import pytest

import costgraph
from costgraph.cli import _parser, main
from costgraph.commands import sweep as sweep_command
from costgraph.export import sweep as sweep_mod
from costgraph.export.sweep import csv_pieces, parse_axes, plan

FIXTURES = Path(__file__).parent / "sweep_fixtures"

CASES = [
    ("llama_int64.csv", ["llama", "--config", "llama-2-7b", "--over", "s=512:2048:x2", "--over", "b=1,3"]),
    ("llama_int64.json", ["llama", "--config", "llama-2-7b", "--over", "s=512:2048:x2", "--over", "b=1,3",
                          "--format", "json"]),
    ("gpt_float64.csv", ["gpt", "--config", "gpt2", "--over", "a=1,2,3,4", "--over", "b=1:7:+3",
                         "--dtype", "float64"]),
    ("gpt_exact.json", ["gpt", "--config", "gpt2", "--over", "s=1:9000000000000000000000:x1000", "--dtype", "exact",
                        "--quantity", "params", "flops_forward", "kv_cache_bytes", "--format", "json"]),
    ("gemma2_float64.json", ["gemma2", "--config", "gemma-2-9b", "--over", "s=1024:16384:x2", "--causal", "half",
                             "--dtype", "float64", "--format", "json"]),
    # float64 values past 2^53 written as floats (repr), the others as exact integers
    ("llama70_float64.csv", ["llama", "--config", "llama-2-70b", "--over", "b=1,4096", "--over", "s=1024:131072:x8",
                             "--dtype", "float64", "--quantity", "flops_backward", "params"]),
]


@pytest.mark.parametrize("chunk,write_chunk", [(1 << 17, 1 << 14), (2, 1), (4, 3)])
@pytest.mark.parametrize("name,argv", CASES, ids=[c[0] for c in CASES])
def test_stdout_byte_identical_to_the_in_memory_sweep(name, argv, chunk, write_chunk, monkeypatch, capsys):
    monkeypatch.setattr(sweep_mod, "CHUNK", chunk)          # chunk boundaries inside the rows and the axes
    monkeypatch.setattr(sweep_mod, "WRITE_CHUNK", write_chunk)
    assert main(["sweep", *argv, "--no-progress"]) == 0
    assert capsys.readouterr().out.encode() == (FIXTURES / name).read_bytes()


@pytest.mark.parametrize("chunk", [1 << 17, 2])
def test_file_byte_identical_to_the_in_memory_sweep(chunk, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sweep_mod, "CHUNK", chunk)
    out = tmp_path / "s.json"
    assert main(["sweep", *CASES[1][1], "--no-progress", "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote 6 rows × 11 columns (json) to {out}\n"
    assert out.read_bytes() == (FIXTURES / "llama_int64_file.json").read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]      # no temporary file left


def test_refusal_after_the_first_chunk(monkeypatch, capsys, tmp_path):
    """h/a = 768/5 is no head size: row 5 fails in the third chunk of 2 rows. On stdout the four
    good rows are already out (streaming), then exit 2 with the row named; with -o nothing is
    written (the temporary file is removed)."""
    monkeypatch.setattr(sweep_mod, "CHUNK", 2)
    argv = ["sweep", "gpt", "--config", "gpt2", "--over", "a=1:8:+1", "--quantity", "params", "--no-progress"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["a,params"] + [f"{a},124439808" for a in range(1, 5)]
    assert "row 5 (a=5)" in captured.err
    assert main(argv + ["-o", str(tmp_path / "x.csv")]) == 2
    assert "row 5 (a=5)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_first_chunk_refused_before_any_output(capsys):
    assert main(["sweep", "gpt", "--config", "gpt2", "--over", "a=7,12", "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "row 1 (a=7)" in captured.err


def _json_doc(monkeypatch, capsys, chunk):
    monkeypatch.setattr(sweep_mod, "CHUNK", chunk)
    monkeypatch.setattr(sweep_mod, "WRITE_CHUNK", min(chunk, 1 << 14))
    assert main(["sweep", "gpt", "--config", "gpt2", "--over", "b=1:5:+1", "--over", "s=1:7:+3",
                 "--quantity", "params", "kv_cache_bytes", "--format", "json", "--no-progress"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("chunk", [1, 2, 3, 1 << 17])
def test_json_strict_across_chunks(chunk, monkeypatch, capsys):
    text = _json_doc(monkeypatch, capsys, chunk)
    doc = json.loads(text)         # strict: one document, brackets and commas in place
    assert doc["over"] == {"b": [1, 2, 3, 4, 5], "s": [1, 4, 7]}
    # GPT-2 small: 124,439,808 parameters; KV cache 2·l·h·s·b·2 bytes = 36,864·s·b (DOMAIN.md §1)
    assert doc["rows"] == [[b, s, 124439808, 36864 * s * b] for b in range(1, 6) for s in (1, 4, 7)]
    assert text == json.dumps(doc, separators=(",", ":")) + "\n"


def test_arithmetic_axis_never_listed():
    """10^11 rows (the brief's --max-rows 1e11, a MemoryError before): the axis is a range, the plan
    counts the rows without listing them, and the first chunk comes out at once."""
    (axis,) = parse_axes(["s=1:100000000000:+1"], max_rows=10 ** 11)
    assert isinstance(axis.values, range) and len(axis.values) == 10 ** 11
    model = costgraph.load("gpt")
    fixed = {str(k): int(v) for k, v in model.values("gpt2").items()}
    p = plan(model, model.costs(), [axis], fixed, ["kv_cache_bytes"])
    assert p.rows == 10 ** 11
    s, kv = next(p.chunks())
    assert s.tolist() == list(range(1, sweep_mod.CHUNK + 1))
    assert kv[-1] == 36864 * sweep_mod.CHUNK        # 2·l·h·s·b·2 bytes, GPT-2 small, b = 1
    pieces = sweep_mod._json_ints(axis.values)
    assert next(pieces) == "[" + ",".join(map(str, range(1, sweep_mod.CHUNK + 1)))


def test_command_streams_past_the_memory_of_the_old_cap(monkeypatch):
    """``--max-rows 100000000000``: the command returns an iterator; its first pieces are the header
    and the first rows (nothing of the 10^11 rows is held)."""
    args = _parser().parse_args(["sweep", "gpt", "--config", "gpt2", "--over", "s=1:100000000000:+1",
                                 "--max-rows", "100000000000", "--quantity", "params", "--no-progress"])
    out = sweep_command.run(args)
    assert not isinstance(out, str)
    assert next(out) == "s,params\n"
    assert next(out).splitlines()[:2] == ["1,124439808", "2,124439808"]
    out.close()


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_independent_of_rows(monkeypatch):
    """tracemalloc's peak while streaming 10,000 and 100,000 rows (GPT-2 small, KV cache bytes) to a
    sink: within 2× of each other (chunks of 4,096 rows), whereas the in-memory sweep (every row
    kept, as before streaming) of 100,000 rows peaks at more than 5× the streamed one."""
    monkeypatch.setattr(sweep_mod, "CHUNK", 1 << 12)
    monkeypatch.setattr(sweep_mod, "WRITE_CHUNK", 1 << 11)
    model = costgraph.load("gpt")
    costs = model.costs()
    fixed = {str(k): int(v) for k, v in model.values("gpt2").items()}
    quantities = ["kv_cache_bytes"]
    written = {}

    def stream(n):
        p = plan(model, costs, parse_axes(["b=1:10:+1", f"s=1:{n // 10}:+1"]), fixed, quantities)

        def run():
            size = 0
            for piece in csv_pieces(p.columns, p.chunks(), p.dtype):
                size += len(piece)
            written[n] = size
        return _peak(run)

    small, large = stream(10_000), stream(100_000)
    assert written[100_000] > 10 * written[10_000] > 0
    assert large < 2 * small, (small, large)
    in_memory = _peak(lambda: sweep_mod.to_csv(
        sweep_mod.sweep(model, costs, parse_axes(["b=1:10:+1", "s=1:10000:+1"]), fixed, quantities), io.StringIO()))
    assert in_memory > 5 * large, (in_memory, large)
