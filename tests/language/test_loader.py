"""costgraph.language.loader: model files by name or by path (a bundled one, a copied folder with its std/), model
options, imports confined to the model's folder (symbolic links out of it refused), a path that is not a regular file,
and no text of a non-model file echoed in an error (issue 18)."""

import os
import shutil
from pathlib import Path

import pytest

import costgraph
from costgraph.cli import main
from costgraph.language.resources import models_root


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


# --- a model path that is not a regular file, or none (issue 18) -----------------------------------------------------

def test_derive_dev_zero_is_not_a_regular_file(capsys):
    code, out, err = _cli(capsys, "derive", "/dev/zero")
    assert code == 2 and err.startswith("error: /dev/zero is not a regular file\n") and "no such" not in err
    code, out, err = _cli(capsys, "derive", "no/such/model.cg")
    assert code == 2 and err.startswith("error: no such model file: no/such/model.cg\n")


# --- bundled models by path, a copied model folder, an option off (a new user's README run) --------------------------

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["llama", "mixtral", "deepseek_v3", "qwen3_moe"])
def test_bundled_model_given_by_path(name):
    # models/llama.cg by path used to load std/mlp.cg twice (once by path, once bundled)
    path = Path(str(models_root())) / f"{name}.cg"
    assert costgraph.load(str(path)).costs().params == costgraph.load(name).costs().params


def test_copied_model_folder_loads(tmp_path):
    shutil.copy(ROOT / "models" / "llama.cg", tmp_path)
    shutil.copytree(ROOT / "models" / "std", tmp_path / "std")
    # Llama-2-7B: 6,738,415,616 parameters (config.json)
    assert costgraph.load(str(tmp_path / "llama.cg")).costs().evaluate(config="llama-2-7b")["params"] == 6_738_415_616


def test_option_off_keeps_the_bundled_configuration():
    # mistral-7b sets w, which exists only with sliding_window on
    m = costgraph.load("mistral", options={"sliding_window": False})
    assert m.costs().evaluate(config="mistral-7b")["params"] == 7_241_732_096
