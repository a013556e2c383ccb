"""``costgraph list``: the bundled models and the configurations each file defines,
read from its syntax tree (parsing needs no SymPy; building would). Parsing them all
takes longer than the rest of the command, so the answer is kept in the user's cache
folder, keyed by a hash of the grammar and the files."""

from __future__ import annotations

from .. import __version__
from ..user_cache import cache_file


def add_parser(sub) -> None:
    sub.add_parser("list", help="bundled models and their configurations")


def run(args=None) -> str:
    """One line per bundled model: ``name: configurations a, b, ...`` (from the cache when there)."""
    import hashlib

    from ..language.resources import MODEL_SUFFIX, bundled_model, bundled_model_names, grammar_text

    texts = {name: bundled_model(name).read_text(encoding="utf-8") for name in bundled_model_names()}
    key = hashlib.sha256("\0".join([__version__, grammar_text(), *(f"{n}\0{t}" for n, t in texts.items())])
                         .encode("utf-8", "surrogatepass")).hexdigest()
    cache = cache_file("list", key)
    if cache is not None:
        try:
            return cache.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):   # not there yet, or unreadable: parse
            pass
    return _list_parsed(texts, MODEL_SUFFIX, cache)


def _list_parsed(texts: dict[str, str], suffix: str, cache) -> str:
    from ..language.parser import parse

    lines = []
    for name, text in texts.items():
        tree = parse(text, f"{name}{suffix}")
        lines.append(f"{name}: configurations {', '.join(c.name for c in tree.configs) or '(none)'}")
    out = "\n".join(lines)
    if cache is not None:
        import os

        try:   # write whole or not at all: another process may read it meanwhile
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
            tmp.write_text(out, encoding="utf-8")
            os.replace(tmp, cache)
        except OSError:
            pass
    return out
