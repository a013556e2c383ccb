"""costgraph.commands._output (-o FILE): outputs that never replace an input, follow a symbolic link or overwrite
without --force, written atomically with the umask's mode (issue 18)."""

import os

import pytest

from costgraph.cli import main


def _cli(capsys, *args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


EVIL_MD = ('model evil {\n'
           '  dim b "<script>alert(1)</script> | *x* [l](javascript:x) `c`" default 2\n'
           '  dim h "<img src=x onerror=alert(1)> a_b _e_ & c" default 4\n'
           '  input x[b, h]\n  param w[h, h]\n  y = matmul(x, w)\n  return y\n}\n')


WRITERS = [  # every command that writes -o FILE, with arguments that make it quick
    ("report", ["--format", "md"], "out.md"),
    ("graph", [], "out.dot"),
    ("codegen", ["--lang", "python"], "out.py"),
    ("sweep", ["--config", "gpt2", "--over", "s=1,2"], "out.csv"),
    ("plot", ["--config", "gpt2", "--kind", "flops"], "out.svg"),
]


@pytest.mark.parametrize("command, extra, name", WRITERS)
def test_existing_file_needs_force_and_is_replaced_atomically(tmp_path, capsys, command, extra, name):
    out = tmp_path / name
    out.write_text("OLD")
    rc, _, err = _cli(capsys, command, "gpt", *extra, "-o", str(out))
    assert rc == 2 and "exists" in err and "--force" in err
    assert out.read_text() == "OLD"
    rc, stdout, err = _cli(capsys, command, "gpt", *extra, "-o", str(out), "--force")
    assert rc == 0, err
    assert out.read_text(encoding="utf-8") != "OLD" and str(out) in stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]   # no temporary file left


@pytest.mark.parametrize("command, extra, name", WRITERS)
def test_output_through_a_symlink_is_refused(tmp_path, capsys, command, extra, name):
    target = tmp_path / "target.txt"
    target.write_text("KEEP")
    os.symlink(target, tmp_path / name)
    rc, _, err = _cli(capsys, command, "gpt", *extra, "-o", str(tmp_path / name), "--force")
    assert rc == 2 and "symbolic link" in err
    assert target.read_text() == "KEEP" and (tmp_path / name).is_symlink()


def test_output_over_the_model_file_is_refused_even_with_force(tmp_path, capsys):
    model = tmp_path / "m.cg"
    model.write_text(EVIL_MD)
    for args in (["report", str(model), "--format", "md"], ["graph", str(model)],
                 ["codegen", str(model), "--lang", "c"]):
        rc, _, err = _cli(capsys, *args, "-o", str(model), "--force")
        assert rc == 2 and "is an input of this command" in err
        assert model.read_text() == EVIL_MD
    os.symlink(model, tmp_path / "alias.cg")   # the same file by another name, and by a relative path
    rc, _, err = _cli(capsys, "report", str(tmp_path / "alias.cg"), "--format", "md", "-o", str(model), "--force")
    assert rc == 2 and "is an input of this command" in err and model.read_text() == EVIL_MD


def test_output_over_a_config_json_is_refused(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    text = ('{"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 100, '
            '"n_positions": 32}')
    cfg.write_text(text)
    rc, _, err = _cli(capsys, "report", str(cfg), "--format", "md", "-o", str(cfg), "--force")
    assert rc == 2 and "is an input of this command" in err
    assert cfg.read_text() == text


def test_output_that_is_not_a_regular_file_is_refused(tmp_path, capsys):
    rc, _, err = _cli(capsys, "report", "gpt", "--format", "md", "-o", str(tmp_path), "--force")
    assert rc == 2 and "not a regular file" in err


def test_new_file_is_written_without_force(tmp_path, capsys):
    out = tmp_path / "new.md"
    rc, stdout, err = _cli(capsys, "report", "gpt", "--format", "md", "-o", str(out))
    assert rc == 0, err
    assert stdout.startswith(f"wrote {out} (md, ") and out.read_text(encoding="utf-8").startswith("# gpt")
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
