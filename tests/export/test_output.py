"""costgraph.commands._output (-o FILE): outputs that never replace an input, follow a symbolic link or overwrite
without --force, written atomically with the umask's mode (issue 18)."""

import os

import pytest

from costgraph.cli import main
from cli_checks import EVIL_MD, run


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
    rc, _, err = run(capsys, command, "gpt", *extra, "-o", str(out))
    assert rc == 2 and "exists" in err and "--force" in err
    assert out.read_text() == "OLD"
    rc, stdout, err = run(capsys, command, "gpt", *extra, "-o", str(out), "--force")
    assert rc == 0, err
    assert out.read_text(encoding="utf-8") != "OLD" and str(out) in stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]   # no temporary file left


@pytest.mark.parametrize("command, extra, name", WRITERS)
def test_output_through_a_symlink_is_refused(tmp_path, capsys, command, extra, name):
    target = tmp_path / "target.txt"
    target.write_text("KEEP")
    os.symlink(target, tmp_path / name)
    rc, _, err = run(capsys, command, "gpt", *extra, "-o", str(tmp_path / name), "--force")
    assert rc == 2 and "symbolic link" in err
    assert target.read_text() == "KEEP" and (tmp_path / name).is_symlink()


def test_output_over_the_model_file_is_refused_even_with_force(tmp_path, capsys):
    model = tmp_path / "m.cg"
    model.write_text(EVIL_MD)
    for args in (["report", str(model), "--format", "md"], ["graph", str(model)],
                 ["codegen", str(model), "--lang", "c"]):
        rc, _, err = run(capsys, *args, "-o", str(model), "--force")
        assert rc == 2 and "is an input of this command" in err
        assert model.read_text() == EVIL_MD
    os.symlink(model, tmp_path / "alias.cg")   # the same file by another name, and by a relative path
    rc, _, err = run(capsys, "report", str(tmp_path / "alias.cg"), "--format", "md", "-o", str(model), "--force")
    assert rc == 2 and "is an input of this command" in err and model.read_text() == EVIL_MD


def test_output_over_a_config_json_is_refused(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    text = ('{"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 100, '
            '"n_positions": 32}')
    cfg.write_text(text)
    rc, _, err = run(capsys, "report", str(cfg), "--format", "md", "-o", str(cfg), "--force")
    assert rc == 2 and "is an input of this command" in err
    assert cfg.read_text() == text


def test_output_that_is_not_a_regular_file_is_refused(tmp_path, capsys):
    rc, _, err = run(capsys, "report", "gpt", "--format", "md", "-o", str(tmp_path), "--force")
    assert rc == 2 and "not a regular file" in err


@pytest.mark.parametrize("where", ["", "/dev/null"])
def test_a_refused_output_hints_the_stdout_spelling_every_writer_takes(capsys, where):
    # trial6: `web gpt -o ''` hinted "leave out -o to print to standard output", but web's -o is required;
    # every writer takes `-o -` (output_arguments)
    rc, _, err = run(capsys, "web", "gpt", "-o", where)
    assert rc == 2 and err.splitlines()[-1] == "hint: name a file" + (" (-o FILE)" if not where else "") + \
        ", or -o - for standard output"


def test_new_file_is_written_without_force(tmp_path, capsys):
    out = tmp_path / "new.md"
    rc, stdout, err = run(capsys, "report", "gpt", "--format", "md", "-o", str(out))
    assert rc == 0, err
    assert stdout.startswith(f"wrote {out} (md, ") and out.read_text(encoding="utf-8").startswith("# gpt")
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ------------------------------------------------------------------ issue 30 item 1: every file the run read

BLOCKS = "block mlp2(x, h) {\n  y = linear(x, 4*h)\n  return linear(y, h)\n}\n"
IMPORTING = 'import "blocks.cg"\nmodel m {\n  dim b default 2\n  dim h default 4\n  input x[b, h]\n  y = mlp2(x, h)\n  return y\n}\n'


@pytest.mark.parametrize("args", [["codegen", "--lang", "python"], ["report", "--format", "md"], ["graph"]])
def test_output_over_an_imported_file_is_refused(tmp_path, capsys, args):
    """``codegen m.cg ... -o blocks.cg --force`` replaced the file m.cg imports: the writer refuses
    every file the run read (costgraph/opened.py), not only the file arguments."""
    (tmp_path / "blocks.cg").write_text(BLOCKS)
    (tmp_path / "m.cg").write_text(IMPORTING)
    rc, _, err = run(capsys, args[0], str(tmp_path / "m.cg"), *args[1:], "-o", str(tmp_path / "blocks.cg"), "--force")
    assert rc == 2 and "is an input of this command" in err, err
    assert (tmp_path / "blocks.cg").read_text() == BLOCKS


def test_output_over_a_user_data_table_is_refused(tmp_path, capsys, monkeypatch):
    """A COSTGRAPH_DATA hardware table read for --hardware is an input too (read through datafiles.read_text)."""
    import re
    from importlib.resources import files

    bundled = (files("costgraph") / "hardware.toml").read_text(encoding="utf-8")
    table = "[myh100]\n" + re.search(r"^\[h100-sxm\]\n(.*?)(?=^\[)", bundled, re.S | re.M).group(1)
    (tmp_path / "hardware.toml").write_text(table)
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    rc, _, err = run(capsys, "report", "gpt", "--config", "gpt2", "--format", "md", "--train", "--hardware", "myh100",
                      "--gpus", "8", "-o", str(tmp_path / "hardware.toml"), "--force")
    assert rc == 2 and "is an input of this command" in err, err
    assert (tmp_path / "hardware.toml").read_text() == table


def test_output_naming_a_folder_is_refused(tmp_path, capsys):
    """``-o newdir/`` wrote a file named newdir (Path drops the trailing slash)."""
    rc, _, err = run(capsys, "report", "gpt", "--format", "md", "-o", str(tmp_path / "newdir") + "/")
    assert rc == 2 and "names a folder" in err and "hint: name a file inside it" in err
    assert list(tmp_path.iterdir()) == []


def test_sigterm_during_a_streamed_write_leaves_no_temporary_file(tmp_path):
    """SIGTERM (a timeout, kill, a cancelled job) while -o is written ended the process at once and left
    the hidden temporary file; now it exits 143 (128 + SIGTERM, as shells say) after the cleanup."""
    import subprocess
    import sys

    code = ("import argparse, os, signal\n"
            "from costgraph.commands._output import write_output\n"
            "def write(tmp):\n"
            "    with open(tmp, 'w') as f:\n"
            "        f.write('x' * 100000); f.flush()\n"
            "        os.kill(os.getpid(), signal.SIGTERM)\n"
            "        f.write('never')\n"
            f"write_output(argparse.Namespace(output={str(tmp_path / 'out.csv')!r}, force=False), write)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 143, proc.stderr
    assert list(tmp_path.iterdir()) == [] and "Traceback" not in proc.stderr
