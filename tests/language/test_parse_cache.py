"""The cache of the bundled files' syntax trees (costgraph/language/parse_cache.py): a cached tree
is the parsed tree, a broken cache file is passed over, a warm start imports no lark."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from costgraph.language import parse_cache
from costgraph.language.parser import parse
from costgraph.language.resources import models_root


def _bundled():
    root = models_root()
    return [(f"{p.name}", p.read_text(encoding="utf-8")) for p in [*root.iterdir(), *(root / "std").iterdir()]
            if p.name.endswith(".cg")]


def test_cached_trees_equal_parsed_trees(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    files = _bundled()
    assert len(files) > 40
    for name, text in files:
        first = parse_cache.parsed_bundled(text, name)     # parsed and stored
        again = parse_cache.parsed_bundled(text, name)     # read back
        assert again == first == parse(text, name) and again is not first, name
    assert len(list((tmp_path / "costgraph").glob("parse-*"))) == len(files)


def test_a_broken_or_foreign_cache_file_is_passed_over(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    name, text = _bundled()[0]
    parse_cache.parsed_bundled(text, name)
    (cached,) = (tmp_path / "costgraph").glob("parse-*")
    for junk in (b"", b"\x80\x04not a pickle", __import__("pickle").dumps({"not": "a tree"})):
        cached.write_bytes(junk)
        assert parse_cache.parsed_bundled(text, name) == parse(text, name)


def test_another_text_is_another_key(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    name, text = _bundled()[0]
    parse_cache.parsed_bundled(text, name)
    parse_cache.parsed_bundled(text + "\n# edited\n", name)
    assert len(list((tmp_path / "costgraph").glob("parse-*"))) == 2


def test_off_and_an_unwritable_folder(tmp_path, monkeypatch):
    name, text = _bundled()[0]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("COSTGRAPH_NO_CACHE", "1")
    assert parse_cache.parsed_bundled(text, name) == parse(text, name)
    assert not (tmp_path / "costgraph").exists()
    monkeypatch.delenv("COSTGRAPH_NO_CACHE")
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder should be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert parse_cache.parsed_bundled(text, name) == parse(text, name)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX environment")
def test_a_warm_start_imports_no_lark(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    code = "import sys, costgraph; costgraph.load('gpt').costs(); print('lark' in sys.modules)"
    cold = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    warm = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert (cold.stdout.strip(), warm.stdout.strip()) == ("True", "False")
