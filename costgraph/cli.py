"""The ``costgraph`` command (argparse, from the standard library).

``costgraph derive MODEL`` prints the closed-form costs of a bundled model
(``gpt``) or a ``.cg`` file, and numbers with units when given values::

    costgraph derive gpt --scope layer --format latex
    costgraph derive gpt --config gpt2
    costgraph derive gpt --scope model --set h=768 l=12 a=12 V=50257 s=1024 s_max=1024 b=1 --format json

``costgraph list`` names the bundled models and their configurations;
``costgraph ops`` lists the operators a model file can call.

A mistake in the input prints a located message and exits with status 2,
with no traceback.

``--help``, ``--version``, ``list`` and ``ops`` do not import SymPy (nor
NetworkX): this module imports only light modules at the top, and ``derive``
imports the engine when it runs.
"""

from __future__ import annotations

import argparse
import re
import sys

from . import __version__
from .conventions import FLOP_CONVENTIONS
from .errors import CostgraphError, CostgraphValueError
from .precision import PRECISIONS

_SETTING = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=([0-9][0-9_]*|true|false)$")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="costgraph", description="Symbolic cost models of Transformer architectures.")
    p.add_argument("--version", action="version", version=f"costgraph {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("derive", help="closed-form parameters, FLOPs and activation memory of a model")
    d.add_argument("model", help="a bundled model name (gpt), a path to a .cg file, "
                                 "or a Hugging Face config.json")
    d.add_argument("--scope", default="model",
                   help="model (default), layer, or the path of a repeat group, block or node")
    d.add_argument("--format", choices=("text", "latex", "json"), default="text")
    d.add_argument("--set", nargs="+", action="extend", default=[], metavar="NAME=VALUE",
                   help="dimension values (h=768) or model options (bias=false)")
    d.add_argument("--config", help="a named configuration of the model file (gpt2, gpt3-175b, ...)")
    d.add_argument("--convention", choices=tuple(FLOP_CONVENTIONS), default="matmul",
                   help="FLOP convention: matmul (matrix products only; default) or all")
    d.add_argument("--precision", choices=tuple(PRECISIONS), default="bf16",
                   help="bytes per element of activations (bf16: 2; masks 1 byte)")
    d.add_argument("--causal", choices=("full", "half"), default="full",
                   help="attention FLOPs over the full s×s square (default) or halved for the causal mask")
    d.add_argument("--no-dropout", action="store_true", help="train without dropout: no dropout masks")
    d.add_argument("--profile", choices=("korthikanti", "pytorch"), default="korthikanti",
                   help="what is kept for backward: Korthikanti et al. 2022 (default) or what PyTorch "
                        "autograd keeps in Hugging Face's eager bf16 code")
    d.add_argument("--breakdown", action="store_true", help="text format: also print the per-node breakdown")
    sub.add_parser("list", help="bundled models and their configurations")
    sub.add_parser("ops", help="operators a model file can call")
    return p


def _settings(pairs: list[str]) -> tuple[dict[str, int], dict[str, bool]]:
    from .parser import check_number

    dims, options = {}, {}
    for pair in pairs:
        m = _SETTING.match(pair)
        if not m:
            raise CostgraphValueError(f"cannot read --set {pair!r}",
                                      hint="write NAME=VALUE with a whole number (h=768) or true/false (bias=false)")
        name, value = m.groups()
        if name in dims or name in options:
            raise CostgraphValueError(f"--set gives '{name}' twice", hint="give each name once")
        if value in ("true", "false"):
            options[name] = value == "true"
        else:
            dims[name] = check_number(value, error=_set_error(pair))
    return dims, options


def _set_error(pair: str):
    shown = pair if len(pair) <= 40 else pair[:36] + "..."
    def error(message: str, loc=None):
        return CostgraphValueError(f"cannot read --set {shown!r}: {message}")
    return error


def _derive(args) -> str:
    from .model import load
    from .report import to_json, to_latex_doc, to_text_doc

    dims, options = _settings(args.set)
    note = None
    if args.model.endswith(".json"):
        from .hf_config import load_hf_config

        if options:
            raise CostgraphValueError("options come from the config.json; --set takes dimensions here",
                                      hint="e.g. --set s=2048 b=8")
        if args.config:
            raise CostgraphValueError("--config names a configuration of a model file; a config.json is one already")
        hf = load_hf_config(args.model, profile=args.profile)
        model = hf.model
        values = model.values(args.config, **{**hf.values, **dims})
        on = [k for k, v in model.graph.options.items() if v is True]
        note = (f"from {args.model}: model_type {hf.model_type} → model '{model.name}'"
                + (f" with {', '.join(on)}" if on else ""))
    else:
        model = load(args.model, dropout=not args.no_dropout, options=options, profile=args.profile)
        values = model.values(args.config, **dims) if (dims or args.config is not None) else None
    costs = model.costs(args.scope, convention=args.convention, precision=args.precision, causal=args.causal)
    if args.format == "json":
        return to_json(costs, values)
    if args.format == "latex":
        return to_latex_doc(costs)
    return to_text_doc(costs, values, breakdown=args.breakdown, note=note)


def _list() -> str:
    """The bundled models and the configurations each file defines, read from
    its syntax tree (parsing needs no SymPy; building would). Parsing them all
    takes longer than the rest of the command, so the answer is kept in the
    user's cache folder, keyed by a hash of the grammar and the files."""
    import hashlib

    from .resources import MODEL_SUFFIX, bundled_model, bundled_model_names, grammar_text

    texts = {name: bundled_model(name).read_text(encoding="utf-8") for name in bundled_model_names()}
    key = hashlib.sha256("\0".join([__version__, grammar_text(), *(f"{n}\0{t}" for n, t in texts.items())])
                         .encode("utf-8", "surrogatepass")).hexdigest()
    cache = _cache_file("list", key)
    if cache is not None:
        try:
            return cache.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):   # not there yet, or unreadable: parse
            pass
    return _list_parsed(texts, MODEL_SUFFIX, cache)


def _list_parsed(texts: dict[str, str], suffix: str, cache) -> str:
    from .parser import parse

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


def _cache_file(kind: str, key: str):
    """``$XDG_CACHE_HOME/costgraph/<kind>-<key>`` (default ``~/.cache``), or None
    when there is no such folder to use (``COSTGRAPH_NO_CACHE=1`` turns it off)."""
    import os
    from pathlib import Path

    if os.environ.get("COSTGRAPH_NO_CACHE"):
        return None
    home = os.path.expanduser("~")
    base = os.environ.get("XDG_CACHE_HOME") or (os.path.join(home, ".cache") if home != "~" else "")
    if not os.path.isabs(base):
        return None
    return Path(base) / "costgraph" / f"{kind}-{key}"


def _ops() -> str:
    from .ops import catalogue
    from .ops.registry import REQUIRED

    lines = []
    for spec in catalogue():
        params = ", ".join(p.name if p.default is REQUIRED else f"{p.name}={str(p.default).lower()}"
                           for p in spec.params)
        lines.append(f"{spec.name}({params})\n    {spec.summary}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``costgraph`` console script; returns the exit status:
    0, or 2 for a mistake in the input (the located message is on stderr; no
    traceback), 3 for a bug in costgraph itself, 130 when interrupted."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:   # argparse has printed usage (status 2), --help or --version (0)
        return e.code if isinstance(e.code, int) else 2
    try:
        if args.command == "derive":
            out = _derive(args)
        elif args.command == "list":
            out = _list()
        else:
            out = _ops()
    except CostgraphError as e:
        print(e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:   # a bug, not the user's mistake: say so, without a traceback
        print(f"costgraph: internal error: {type(e).__name__}: {e}\n"
              "this is a bug in costgraph; please report it with the command that caused it", file=sys.stderr)
        return 3
    try:
        print(out)
    except BrokenPipeError:
        pass
    return 0


def run() -> None:
    """Console-script wrapper: exit with :func:`main`'s status."""
    sys.exit(main())


if __name__ == "__main__":
    run()
