"""Semantics a new user's trial found lax (issue 6, item 5), and messages that
show what the user gave: control characters escaped, numbers of more than 100
digits cut short.

Each case asserts the message, its location and, through the CLI, exit
status 2 with no traceback.
"""

from __future__ import annotations

import pytest

import costgraph
from costgraph.cli import main
from costgraph.errors import SHOWN_DIGITS, CostgraphError, CostgraphSyntaxError, tidy
from costgraph.language.parser import MAX_DEPTH

# A model head: statements written after it start on line 6.
M = "model m {\n  dim b\n  dim s\n  dim h\n  input x[b, s, h]\n"


def error_of(text: str, path: str = "m.cg") -> CostgraphError:
    with pytest.raises(CostgraphError) as info:
        costgraph.loads(text, path=path)
    return info.value


def check(err: CostgraphError, fragments, line: int, column: int, path: str = "m.cg"):
    text = str(err)
    for fragment in ([fragments] if isinstance(fragments, str) else fragments):
        assert fragment in text, f"{fragment!r} not in:\n{text}"
    assert err.loc is not None and (err.loc.file, err.loc.line, err.loc.column) == (path, line, column), text


def cli_error(capsys, *args) -> str:
    assert main(["derive", *args]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return err


# --- a part of a dimension cannot exceed it ---------------------------------------

@pytest.mark.parametrize("call, fragment", [
    ("slice(x, 2 * h)", "slice takes 2*h entries of a last dimension of h: more than it has"),
    ("slice(x, h + 1)", "slice takes h + 1 entries of a last dimension of h"),
    ("rope(x, dims = 2 * h)", "rope rotates 2*h entries of a last dimension of h: more than it has"),
])
def test_part_larger_than_the_dimension_is_refused(call, fragment):
    err = error_of(M + f"  y = {call}\n  return y\n}}\n")
    check(err, [fragment, "hint: give at most h"], 6, 7)


@pytest.mark.parametrize("call", ["slice(x, h)", "slice(x, h / 2)", "slice(x, k)", "rope(x, dims = h / 2)",
                                  "rope(x, dims = k)", "rope(x)"])
def test_part_that_fits_or_is_undecided_is_accepted(call):
    costgraph.loads(M + f"  dim k\n  y = {call}\n  return y\n}}\n", path="m.cg")


def test_slice_of_numbers():
    err = error_of("model m {\n  dim b\n  input x[b, 4]\n  return slice(x, 5)\n}\n")
    check(err, "slice takes 5 entries of a last dimension of 4", 4, 10)


# --- repeat ... active ------------------------------------------------------------

@pytest.mark.parametrize("head, active, column", [
    ("repeat 2 as L active 3", "3", 24),
    ("repeat e as L active e + 1", "e + 1", 24),
    ("repeat e as L active 2 * e", "2*e", 24),
])
def test_more_active_copies_than_copies_is_refused(head, active, column):
    err = error_of(M + f"  dim e\n  {head} {{\n    x = gelu(x)\n  }}\n  return x\n}}\n")
    check(err, [f"the active count {active} is more than the count", "hint: repeat "], 7, column)


def test_active_count_that_may_fit_is_accepted():
    costgraph.loads(M + "  dim e\n  dim k\n  repeat e as L active k {\n    x = gelu(x)\n  }\n  return x\n}\n",
                    path="m.cg")


def test_active_count_cli(tmp_path, capsys):
    f = tmp_path / "m.cg"
    f.write_text(M + "  repeat 2 as L active 3 {\n    x = gelu(x)\n  }\n  return x\n}\n")
    assert f"{f}:6:24: error: the active count 3 is more than the count 2" in cli_error(capsys, str(f))


# --- the KV cache counts a storage once -------------------------------------------

def _kv(body: str) -> int:
    text = M + body + "}\n"
    return costgraph.loads(text, path="m.cg").costs().evaluate(b=2, s=16, h=8)["kv_cache_bytes"]


def test_cache_of_a_cached_tensor_counts_once():
    once = _kv("  return cache(x)\n")
    assert once == 2 * 16 * 8 * 2
    assert _kv("  return cache(cache(x))\n") == once
    assert _kv("  y = cache(x)\n  z = cache(y)\n  return z\n") == once
    assert _kv("  return cache(x) + cache(gelu(x))\n") == 2 * once   # two storages: both counted


# --- tying to a tie ---------------------------------------------------------------

def test_tie_to_a_tied_node_names_the_owner():
    err = error_of(M + "  p = linear(x, h, name = q1)\n  y = linear(p, h, tied = q1, name = q2)\n"
                       "  z = linear(y, h, tied = q2)\n  return z\n}\n")
    check(err, ["'q2' has no weight of its own: it is tied to the weight of 'q1'", "hint: tie to the owner: tied = q1"],
          8, 7)
    assert "did you mean" not in str(err)


def test_tie_to_a_tied_node_inside_a_block():
    text = ("block f(x[B, S, H]) {\n  p = linear(x, H, name = q1)\n  y = linear(p, H, tied = q1, name = q2)\n"
            "  return linear(y, H, tied = q2)\n}\n" + M + "  return f(x)\n}\n")
    check(error_of(text), ["tied to the weight of 'f/q1'", "tied = q1"], 4, 10)


# --- flat chains are not nesting --------------------------------------------------

def test_flat_sum_of_many_terms_is_not_nesting():
    terms = " + ".join(["h"] * (MAX_DEPTH + 1))
    costgraph.loads(M + f"  k = {terms}\n  return linear(x, k)\n}}\n", path="m.cg")
    products = " * ".join(["2"] * (MAX_DEPTH + 1)) + " / " + " / ".join(["2"] * MAX_DEPTH)
    costgraph.loads(M + f"  return linear(x, {products} * h - h)\n}}\n", path="m.cg")
    tensors = " + ".join(["x"] * (MAX_DEPTH + 1))
    m = costgraph.loads(M + f"  return {tensors}\n}}\n", path="m.cg")
    assert sum(1 for _, d in m.graph.ops() if d["kind"] == "add") == MAX_DEPTH


def test_very_long_flat_sum_does_not_recurse():
    terms = " + ".join(["h"] * 5000)
    costgraph.loads(M + f"  return linear(x, {terms})\n}}\n", path="m.cg")


def test_parentheses_still_nest():
    text = M + "  return linear(x, " + "(h + " * (MAX_DEPTH + 1) + "h" + ")" * (MAX_DEPTH + 1) + ")\n}\n"
    err = error_of(text)
    assert isinstance(err, CostgraphSyntaxError) and "nested too deeply" in str(err)


def test_flat_sum_of_many_distinct_sizes_is_too_large_not_too_deep():
    dims = "".join(f"  dim d{i}\n" for i in range(MAX_DEPTH + 1))
    terms = " + ".join(f"d{i}" for i in range(MAX_DEPTH + 1))
    err = error_of(M + dims + f"  return linear(x, {terms})\n}}\n")
    assert "too large: multiplied out" in str(err) and "nested" not in str(err)


# --- what follows an input line ---------------------------------------------------

@pytest.mark.parametrize("stmt, fragments, column", [
    ("retrun x", ["unexpected 'x': expected ',' or '='", "hint: did you mean 'return'?"], 10),
    ("optoin bias = true", ["unexpected 'bias'", "hint: did you mean 'option'?"], 10),
    ("else { }", ["unexpected '{'", "hint: an else follows the '}' of an if"], 8),
])
def test_after_an_input_a_misspelling_is_not_a_missing_role_colon(stmt, fragments, column):
    err = error_of(M + f"  input y[b, s, h]\n  {stmt}\n}}\n")
    check(err, fragments, 7, column)
    assert "role" not in str(err) and "':' before it" not in str(err)


def test_a_role_without_its_colon_is_still_explained():
    err = error_of(M + "  input y[b, s] ids\n  return x\n}\n")
    check(err, ["unexpected 'ids' after an input: expected ':' before it", "input NAME[...]: ids"], 6, 17)


# --- imports stay inside the importing file's folder, and name .cg files -----------

@pytest.mark.parametrize("path, fragment", [
    ("/proc/self/environ", "an import cannot name an absolute path: '/proc/self/environ'"),
    ("/etc/passwd.cg", "an import cannot name an absolute path"),
    ("C:/models/x.cg", "an import cannot name an absolute path"),
    ("~/x.cg", "an import cannot name an absolute path"),
    ("../../../../etc/passwd", "an import cannot leave the importing file's folder: '../../../../etc/passwd'"),
    ("sub/../../x.cg", "an import cannot leave the importing file's folder"),
    ("..", "an import cannot leave the importing file's folder"),
    ("notes.txt", "an import names a model file ending in .cg: 'notes.txt'"),
    (".cg", "an import names a model file ending in .cg"),
    ("sub\\\\x.cg", "an import path uses '/', not '\\'"),
])
def test_import_paths_are_checked_before_reading(tmp_path, capsys, path, fragment):
    f = tmp_path / "m.cg"
    f.write_text(f'import "{path}"\n' + M + "  return x\n}\n")
    err = cli_error(capsys, str(f))
    assert err.startswith(f"{f}:1:1: error: {fragment}"), err
    assert "SHELL=" not in err and "root:" not in err


def test_import_inside_the_folder_tree_works(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "blocks.cg").write_text("block g(x) { return gelu(x) }\n")
    (tmp_path / "lib" / "more.cg").write_text('import "blocks.cg"\nblock g2(x) { return g(g(x)) }\n')
    f = tmp_path / "m.cg"
    f.write_text('import "lib/./more.cg"\n' + M + "  return g2(x)\n}\n")
    costgraph.load(str(f))


# --- names with control characters --------------------------------------------------

def test_control_characters_in_names_are_escaped(capsys):
    err = cli_error(capsys, "gp\x01t\x1b[31m")
    assert "unknown model 'gp\\x01t\\x1b[31m'" in err
    assert "\x01" not in err and "\x1b" not in err
    err = cli_error(capsys, "gpt", "--config", "x\x07\u200by")
    assert "'x\\x07\\u200by'" in err and "\x07" not in err


def test_control_characters_in_strings_are_escaped():
    err = error_of(M + '  return linear(x, "a\x01b")\n}\n')
    assert 'the string "a\\x01b"' in str(err) and "\x01" not in str(err)
    assert err.loc.line == 6


# --- derive a configuration or a library file ----------------------------------------

def test_derive_a_configuration_name(capsys):
    err = cli_error(capsys, "llama-2-7b")
    assert "error: 'llama-2-7b' is a configuration of the model 'llama', not a model" in err
    assert "hint: costgraph derive llama --config llama-2-7b" in err
    assert "configuration of the model 'gpt'" in cli_error(capsys, "gpt2")


def test_derive_a_library_file_by_either_name(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # no std/ folder here: both name the bundled file
    plain = cli_error(capsys, "std/attention")
    with_suffix = cli_error(capsys, "std/attention.cg")
    assert plain == with_suffix
    assert plain.startswith("std/attention.cg:1:1: error: 'std/attention.cg' is a library of blocks (attention")
    assert 'import it in a model file: import "std/attention.cg"' in plain


def test_own_library_file(tmp_path):
    f = tmp_path / "lib.cg"
    f.write_text("block f(x) { return x }\nblock g(x) { return x }\n")
    with pytest.raises(CostgraphError) as info:
        costgraph.load(str(f))
    check(info.value, ["'lib.cg' is a library of blocks (f, g) with no model to derive", 'import "lib.cg"'],
          1, 1, path=str(f))


# --- long numbers ---------------------------------------------------------------------

def test_long_numbers_are_cut_short_in_messages():
    n = "123456" + "0" * 1191 + "789"
    assert tidy(f"is {n}/3") == "is 123456…(1200 digits)…789/3"
    assert tidy("9" * SHOWN_DIGITS) == "9" * SHOWN_DIGITS
    err = CostgraphError(f"value {n}", hint=f"not {n}")
    assert str(err) == "error: value 123456…(1200 digits)…789\nhint: not 123456…(1200 digits)…789"


def test_long_values_found_with_numbers_are_cut_short(tmp_path, capsys):
    f = tmp_path / "m.cg"
    f.write_text(M + "  dim k = " + " * ".join(["h"] * 12) + " / 3\n  return linear(x, k)\n}\n")
    err = cli_error(capsys, str(f), "--set", f"h={10 ** 99 + 1}")
    assert "100000…(1189 digits)…001/3" in err
    assert max(len(line) for line in err.splitlines()) < 400


# --- a block cannot take an operator's name (a new user's README run) ------------------------------------------------

def test_block_cannot_take_an_operator_name():
    with pytest.raises(costgraph.CostgraphSemanticError, match="has the name of an operator"):
        costgraph.loads("block linear(x[H], o) { return x }\nmodel m { dim h\n input x[h]\n return linear(x, h) }")
