"""Issue 18, leaks and injection: imports confined to the model's folder, no
text of a non-model file echoed, Markdown reports escaped, outputs that never
replace an input, follow a link or overwrite without --force."""

import os

import pytest

from costgraph.cli import main

SECRET = "TOPSECRET_r18_hunter2"
MODEL = 'import "{imp}"\nmodel m {{\n  dim b default 2\n  dim h default 4\n  input x[b, h]\n  return x\n}}\n'


def _cli(capsys, *args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def outside(tmp_path):
    """A folder holding a model, and a secret file outside it."""
    (tmp_path / "out").mkdir()
    secret = tmp_path / "out" / "secret.txt"
    secret.write_text(f"{SECRET}=1 and more text\n")
    (tmp_path / "m").mkdir()
    return tmp_path / "m", secret


def test_import_symlink_out_of_the_folder_is_refused_without_its_text(outside, capsys):
    folder, secret = outside
    os.symlink(secret, folder / "evil.cg")
    (folder / "a.cg").write_text(MODEL.format(imp="evil.cg"))
    rc, out, err = _cli(capsys, "derive", str(folder / "a.cg"))
    assert rc == 2
    assert "symbolic link out of the model's folder" in err
    assert SECRET not in err + out and "Traceback" not in err


def test_import_symlink_to_proc_environ_is_refused(outside, capsys, monkeypatch):
    folder, _ = outside
    monkeypatch.setenv("R18_ENV_SECRET", SECRET)
    os.symlink("/proc/self/environ", folder / "env.cg")
    (folder / "a.cg").write_text(MODEL.format(imp="env.cg"))
    rc, out, err = _cli(capsys, "derive", str(folder / "a.cg"))
    assert rc == 2
    assert SECRET not in err + out and "R18_ENV_SECRET" not in err


def test_import_symlink_inside_the_folder_to_a_non_model_file_is_refused(outside, capsys):
    folder, _ = outside
    (folder / "notes.txt").write_text(f"{SECRET}\n")
    os.symlink(folder / "notes.txt", folder / "n.cg")
    (folder / "a.cg").write_text(MODEL.format(imp="n.cg"))
    rc, out, err = _cli(capsys, "derive", str(folder / "a.cg"))
    assert rc == 2 and "is not a model file" in err
    assert SECRET not in err + out


def test_import_symlink_inside_the_folder_to_a_model_file_still_works(outside, capsys):
    folder, _ = outside
    (folder / "sub").mkdir()
    (folder / "sub" / "blocks.cg").write_text("block ident(x) {\n  return x\n}\n")
    os.symlink(folder / "sub" / "blocks.cg", folder / "link.cg")
    (folder / "a.cg").write_text(MODEL.format(imp="link.cg"))
    rc, out, err = _cli(capsys, "derive", str(folder / "a.cg"), "--format", "json")
    assert rc == 0, err


def test_a_non_model_file_given_as_the_model_is_not_quoted(outside, capsys):
    folder, secret = outside
    os.symlink(secret, folder / "direct.cg")
    rc, out, err = _cli(capsys, "derive", str(folder / "direct.cg"))
    assert rc == 2
    assert "its text is not shown" in err
    assert SECRET not in err + out
    rc, out, err = _cli(capsys, "derive", str(secret))
    assert rc == 2 and SECRET not in err + out


# ------------------------------------------------------------------ Markdown report

EVIL_MD = ('model evil {\n'
           '  dim b "<script>alert(1)</script> | *x* [l](javascript:x) `c`" default 2\n'
           '  dim h "<img src=x onerror=alert(1)> a_b _e_ & c" default 4\n'
           '  input x[b, h]\n  param w[h, h]\n  y = matmul(x, w)\n  return y\n}\n')


def test_markdown_report_escapes_model_strings(tmp_path, capsys):
    model = tmp_path / "evil.cg"
    model.write_text(EVIL_MD)
    out = tmp_path / "evil.md"
    rc, _, err = _cli(capsys, "report", str(model), "--format", "md", "-o", str(out))
    assert rc == 0, err
    text = out.read_text(encoding="utf-8")
    assert "<script" not in text and "<img" not in text
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| $")}
    # CommonMark 0.31 §2.4: a backslash before punctuation is the literal character
    assert rows["| $b$"] == (r"| $b$ | &lt;script&gt;alert(1)&lt;/script&gt; \| \*x\* \[l\](javascript:x) \`c\` |")
    assert rows["| $h$"] == r"| $h$ | &lt;img src=x onerror=alert(1)&gt; a_b \_e\_ &amp; c |"
