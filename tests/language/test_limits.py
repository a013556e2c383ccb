"""Resource limits: inputs that would hang costgraph end in a located error.

Each reproducer of issue 6 (a block ladder that doubles at every level, a
product of sums multiplied out, a file of 40,000 statements) must give a
:class:`~costgraph.errors.CostgraphError` with file:line:col and a caret, and
the CLI must exit with status 2. Timings are not asserted here (they are
measured in ``bench/``); the limits must sit far above every bundled model.
"""

from __future__ import annotations

import pytest
import sympy

import costgraph
from costgraph.language import limits, parser
from costgraph.engine.builder import MAX_GRAPH_SIZE, Builder, Settings
from costgraph.cli import main
from costgraph.engine.context import MAX_DEGREE, MAX_TERMS, expanded_size
from costgraph.errors import CostgraphError
from costgraph.language.loader import load_program
from costgraph.language.resources import bundled_model_names, models_root

HEAD = "model m {\n  dim b\n  dim s\n  dim h\n  input x[b, s, h]\n"


def derive_fails(tmp_path, capsys, text: str, name: str = "m.cg") -> str:
    """stderr of ``costgraph derive`` on ``text``, which must fail with status 2."""
    path = tmp_path / name
    path.write_text(text)
    assert main(["derive", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return err


def ladder(levels: int) -> str:
    """Block f{i} calls f{i-1} twice: 2**levels nodes once every call is built."""
    lines = ["block f0(x[B, S, H]) { return gelu(x) }"]
    lines += [f"block f{i}(x[B, S, H]) {{ return f{i - 1}(x) + f{i - 1}(x) }}" for i in range(1, levels + 1)]
    lines.append(f"model m {{ dim b; dim s; dim h; input x[b, s, h]; return f{levels}(x) }}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [12, 18])
def test_block_ladder_stops_at_the_graph_size_limit(tmp_path, capsys, levels):
    err = derive_fails(tmp_path, capsys, ladder(levels))
    assert f"more than {MAX_GRAPH_SIZE:,} operator nodes and block instances" in err
    # located at the call that crosses the limit, with a caret under it
    head, source, caret, hint = err.splitlines()[:4]
    assert head.startswith(f"{tmp_path / 'm.cg'}:") and source.strip().startswith("block f")
    assert caret.strip() == "^" and source[len(caret) - 1:].startswith("f1(x)")
    assert hint.startswith("hint: ") and "repeat" in hint


@pytest.mark.parametrize("factors", [12, 14])
def test_product_of_sums_is_not_multiplied_out(tmp_path, capsys, factors):
    sums = " * ".join(["(a+b+c+d+e+f)"] * factors)
    text = "model m {\n dim a; dim b; dim c; dim d; dim e; dim f\n input x[a, b]\n return linear(x, " + sums + ")\n}\n"
    err = derive_fails(tmp_path, capsys, text)
    assert f"m.cg:4:20: error: this dimension expression is too large: multiplied out, it has more than " \
           f"{MAX_TERMS} terms" in err
    assert "hint: a size is a short formula" in err


def test_degree_is_limited():
    text = HEAD + "  return linear(x, " + " * ".join(["h"] * (MAX_DEGREE + 1)) + ")\n}\n"
    with pytest.raises(CostgraphError) as info:
        costgraph.loads(text, path="m.cg")
    assert f"degree {MAX_DEGREE + 1} (at most {MAX_TERMS} terms of degree {MAX_DEGREE})" in str(info.value)
    assert (info.value.loc.line, info.value.loc.column) == (6, 20)


def test_sizes_made_by_operators_are_limited():
    # repeat_kv multiplies the head count by `groups`: chained, the product grows
    body = "".join(f"  x = repeat_kv(x, a{i} + b{i})\n" for i in range(6))
    dims = "".join(f"  dim a{i}\n  dim b{i}\n" for i in range(6))
    text = "model m {\n  dim b\n  dim k\n  dim s\n  dim d\n" + dims + "  input x[b, k, s, d]\n" + body + "  return x\n}\n"
    with pytest.raises(CostgraphError) as info:
        costgraph.loads(text, path="m.cg")
    err = info.value
    assert "a size repeat_kv makes is too large" in str(err)
    assert err.loc.line == 6 + 12 + 6   # the sixth repeat_kv: 2**6 = 64 terms


def test_nested_repeat_counts_are_limited():
    dims = "".join(f"  dim a{i}\n  dim b{i}\n" for i in range(6))
    opens = "".join(f"  repeat a{i} + b{i} as r{i} {{\n" for i in range(6))
    text = HEAD + dims + opens + "  x = gelu(x)\n" + "  }\n" * 6 + "  return x\n}\n"
    with pytest.raises(CostgraphError) as info:
        costgraph.loads(text, path="m.cg")
    assert "the number of copies (this count times those of the repeats around it) is too large" in str(info.value)
    assert info.value.loc.line == 6 + 12 + 5


def test_many_statements_stop_before_parsing(tmp_path, capsys):
    text = HEAD + "  x = gelu(x)\n" * 40_000 + "  return x\n}\n"
    err = derive_fails(tmp_path, capsys, text)
    # 18 tokens before the statements, 6 a statement: token 50,001 is in statement 8,331
    assert f"m.cg:{5 + 8331}:7: syntax error: the file is too long: more than {parser.MAX_TOKENS:,} tokens" in err
    assert "\n          ^\n" in err


def test_comments_do_not_count_as_tokens():
    text = HEAD + "  # a long comment with many words in it, and more words\n" * 10_000 + "  return x\n}\n"
    costgraph.loads(text, path="m.cg")


def test_huge_file_is_refused_before_reading_it_all(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(limits, "MAX_SOURCE_CHARS", 1000)
    monkeypatch.setattr(costgraph.language.loader, "MAX_SOURCE_CHARS", 1000)
    err = derive_fails(tmp_path, capsys, HEAD + "  # é\n" * 2000 + "  return x\n}\n")
    assert "syntax error: the file is too large: more than 1,000 characters" in err


def test_huge_text_is_refused():
    with pytest.raises(CostgraphError) as info:
        costgraph.loads(" " * (parser.MAX_SOURCE_CHARS + 1), path="m.cg")
    assert "more than 1,000,000 characters" in str(info.value)


def test_expanded_size_estimates():
    a, b, c, h = sympy.symbols("a b c h", positive=True)
    assert expanded_size(a) == (1, 1)
    assert expanded_size(sympy.Integer(7)) == (1, 0)
    assert expanded_size(a + b + c) == (3, 1)
    assert expanded_size((a + b) * (a + c)) == (4, 2)
    assert expanded_size((a + b) ** 3) == (8, 3)
    assert expanded_size(h / (a + b)) == (2, 2)
    t, d = expanded_size((a + b + c) ** 1000)
    assert t > MAX_TERMS and d > MAX_DEGREE


@pytest.mark.parametrize("name", bundled_model_names())
def test_limits_are_far_above_the_bundled_models(name):
    builder = Builder(load_program(name), Settings())
    cg = builder.build()
    assert builder.size * 50 < MAX_GRAPH_SIZE
    for t in cg.tensors.values():
        for d in t.shape:
            terms, degree = expanded_size(d)
            assert terms * 8 <= MAX_TERMS and degree * 4 <= MAX_DEGREE


def test_bundled_files_are_far_below_the_file_limits():
    files = [*models_root().iterdir(), *(models_root() / "std").iterdir()]
    for f in files:
        if f.name.endswith(".cg"):
            text = f.read_text(encoding="utf-8")
            tokens = [t for t in limits._TOKEN.findall(text) if t[0] != "#"]
            assert len(tokens) * 50 < parser.MAX_TOKENS and len(text) * 100 < parser.MAX_SOURCE_CHARS, f.name
