"""Helpers of ``tests/commands/test_property_*.py`` (their harness: ``tests/property_run.py``): the
subcommands and flags read from the real argparse parser, Hypothesis strategies for their values (valid,
plausible and hostile), an in-process run of ``costgraph.cli.main`` under a
CPU-time limit, and the checks on what a run printed or wrote.

Not a test module (no ``test_`` prefix): pytest does not collect it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from hypothesis import strategies as st

from costgraph import cli

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
HF = ROOT / "examples" / "hf"

LIMIT = float(os.environ.get("COSTGRAPH_FUZZ_LIMIT", "5"))
#: commands with a CPU bound of their own, seconds, with the reason: `verify` builds the transformers
#: class on the meta device (a 30B MoE such as qwen3-30b-a3b: over 20 s of CPU on a loaded 2-core machine,
#: bounded by the config's sizes, not by anything the arguments can grow)
#: `web` derives the page's closed forms for every precision × optimizer × ZeRO stage × recompute policy ×
#: stage set (about 200 derivations, about 10 s of CPU for OLMo 3: bounded by the model, not by the arguments)
#: `plan --exhaustive` searches every variant of a hybrid MoE (`plan qwen3_next_chunked --config
#: qwen3-next-80b-a3b --exhaustive --gpus 64 --global-batch 256 --hardware h100-sxm`: 36 s of CPU in its own
#: process on the loaded machine, 38 s on main before the planner's rows were kept as arrays; in this module's
#: run_cli 34 s cold and 33 s after four other commands in the same process): within issue 30's minute, bounded
#: by the model's variants, not by the arguments
COMMAND_LIMITS = {"verify": 120.0, "import": 120.0, "web": 60.0, "plan": 60.0}   # import: as verify, twice
#: the process's peak resident memory after any case (ru_maxrss), bytes
MEMORY = int(float(os.environ.get("COSTGRAPH_FUZZ_MEMORY", str(4 * 2**30))))
#: an environment variable whose value must never appear in any output (a leak check)
SECRET_NAME, SECRET = "COSTGRAPH_PROP_SECRET", "s3cr3t-7f1c2a9e-never-printed"


# --- the parser: every subcommand and its arguments ---------------------------------

@dataclass(frozen=True)
class Arg:
    """One argparse action of a subcommand: ``flag`` is its first option string
    (``None`` for a positional, named by ``dest``)."""
    command: str
    flag: str | None
    dest: str
    nargs: object
    choices: tuple | None
    type: object
    required: bool


def subcommands() -> dict[str, list[Arg]]:
    """Every subcommand of the real parser (:func:`costgraph.cli._parser`) and its
    arguments (``--help`` left out), in parser order: a new flag is covered without
    touching the tests."""
    parser = cli._parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for name, sp in sub.choices.items():
        out[name] = [Arg(name, a.option_strings[0] if a.option_strings else None, a.dest, a.nargs,
                         tuple(a.choices) if a.choices else None, a.type, bool(a.required))
                     for a in sp._actions if not isinstance(a, argparse._HelpAction)]
    return out


# --- names the values are drawn from (read from the bundled files) ------------------

def _texts():
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(MODELS.glob("*.cg"))}


TEXTS = _texts()
MODEL_NAMES = sorted(TEXTS)
CONFIGS = {m: re.findall(r"^config\s+([\w.\-]+)", t, re.M) for m, t in TEXTS.items()}
ALL_CONFIGS = sorted({c for cs in CONFIGS.values() for c in cs})
DIMS = sorted({d for t in TEXTS.values() for line in re.findall(r"^config\s+\S+\s*\{([^}]*)\}", t, re.M)
               for d in re.findall(r"(\w+)\s*=", line)})
GROUPS = sorted({g for t in TEXTS.values() for g in re.findall(r"\brepeat\b[^{\n]*\bas\s+(\w+)", t)})
PRESETS = re.findall(r"^\[([\w.\-]+)\]", (ROOT / "src" / "costgraph" / "hardware.toml").read_text(), re.M)
HF_FILES = sorted(str(p) for p in HF.glob("*.json"))
#: the launch files of examples/launch/ (--launch: Megatron-LM, torchtitan, DeepSpeed, vLLM)
LAUNCH_FILES = sorted(str(p) for p in (ROOT / "examples" / "launch").iterdir() if p.suffix != ".md")
QUANTITIES = ["params", "params_active", "flops_forward", "flops_backward", "activation_bytes",
              "kv_cache_bytes", "kv_cache_bytes_per_token", "memory", "step_flops", "nonexistent"]
SCHEMAS = ["derive", "diff", "expression", "graph", "hardware", "infer", "leading", "optimal", "plan",
           "sensitivity", "solve", "sweep", "train", "nonexistent"]

#: hostile text for any value: numbers out of range, fractions, non-finite, empty,
#: Unicode, and paths that are not model files (devices, /proc, missing)
HOSTILE = ["-1", "0", "-0", "1/3", "1e400", "-1e400", "1e-400", "nan", "NaN", "inf", "-inf", "Infinity",
           "", " ", "9" * 400, "1_000", "0x10", "1e3", "0.5", "2.5e0", "\u0661\u0662", "\uff11\uff12",
           "\U0001f4a5", "h\u0301", "\u202e8", "a" * 5000, "/dev/zero", "/dev/null", "/proc/self/environ",
           "/nonexistent/model.cg", "/nonexistent/config.json", ".", "-", "=", "h=", "=1", "h=1=2",
           "h=-1", "h=1e400", "h=nan", "h=1/3", "self=3", "s=" + "9" * 200, "1e18", "123456789012345678901"]

hostile = st.sampled_from(HOSTILE)
small_ints = st.sampled_from([1, 2, 4, 8, 16, 64]) | st.integers(1, 4096)
ints = st.one_of(small_ints, small_ints, st.integers(-10, 10**6), st.sampled_from([0, 2**31, 2**63, 10**30])).map(str)
numbers = st.sampled_from(["0.5", "1", "0.45", "1e9", "300e9", "989.4e12", "2.5", "1e21", "5.76e23", "7e9",
                           "0.1", "1e-3", "100"])
sizes = st.sampled_from(["80GB", "80GiB", "24GB", "1e12", "0.35GiB", "8GB", "1TB", "0.1", "0", "16MiB", "1e30"])
fractions = st.sampled_from(["0", "0.1", "0.5", "0.9", "1", "1.5"])
#: the dimension values of each model's named configurations
CONFIG_VALUES = {m: [dict((k, v) for k, v in re.findall(r"(\w+)\s*=\s*([\w.]+)", body))
                     for body in re.findall(r"^config\s+\S+\s*\{([^}]*)\}", t, re.M)] for m, t in TEXTS.items()}


def _lists(elements, n=3):
    return st.lists(elements, min_size=1, max_size=n)


def set_pairs(model: str | None, rough: bool):
    """``name=value`` items of ``--set``: a dimension of the model with a value one of its
    configurations has, or a power of two; ``rough``: any dimension or option, any number."""
    pairs = [(k, v) for c in CONFIG_VALUES.get(model or "", []) for k, v in c.items()]
    if pairs and not rough:
        return st.sampled_from(pairs).map(lambda kv: f"{kv[0]}={kv[1]}") | st.builds(
            lambda kv, n: f"{kv[0]}={n}", st.sampled_from(pairs), st.sampled_from([1, 2, 4, 16, 64, 128, 1024]))
    name = st.sampled_from(DIMS + ["bias", "tied", "r", "k"])
    value = st.one_of(small_ints.map(str), ints, st.sampled_from(["true", "false", "0.25", "1/2"]))
    return st.builds(lambda n, v: f"{n}={v}", name, value)


def output_names(command: str, rough: bool):
    """``-o`` values: relative names (the run's directory is a temporary one) with the
    extensions the command writes; ``rough``: also mistakes (no extension, a missing
    folder, empty, the input copy ``model.cg``)."""
    ext = {"report": ["html", "md", "tex"], "plot": ["png", "svg", "pdf"], "graph": ["dot", "svg", "graphml", "json"],
           "codegen": ["py", "c", "js"], "sweep": ["csv", "json"]}.get(command, ["txt"])
    bad = ["out", "missing/dir/out.txt", "", "model.cg", "out.txt"] if rough else []
    return st.sampled_from([f"out.{e}" for e in ext] + bad)


def _named_values(model, rough=False):
    configs = CONFIGS.get(model or "", []) or ALL_CONFIGS
    dims = st.sampled_from(sorted({k for c in CONFIG_VALUES.get(model or "", []) for k in c}) or DIMS)
    return {
        "--set": _lists(set_pairs(model, rough)), "--config": st.sampled_from(configs),
        "--hardware": st.sampled_from(PRESETS), "--params": numbers, "--memory": sizes, "--budget": sizes | numbers,
        "--kv-memory": sizes, "--non-torch-memory": sizes, "--reserve": fractions | sizes,
        "--precision": st.sampled_from(["fp32", "bf16", "mixed", "megatron", "mixed-fp32-grads", "fp8", "fp16"]),
        "--optimizer": st.sampled_from(["adam", "adamw", "sgd", "lion", "adam-8bit", "adafactor", "muon"]),
        "--rank-order": st.sampled_from(["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "dp-tp", "pp-dp-ep-cp-tp"]),
        "--recompute-modules": _lists(st.sampled_from(["core_attn", "mlp", "moe", "moe_act", "layernorm",
                                                       "mla_up_proj", "shared_experts"])),
        "--offload-activations": fractions, "--lora-targets": _lists(st.sampled_from(
            ["q_proj", "v_proj", "all-linear", "*.mlp.*", "k_proj", "o_proj"])),
        "--peak": numbers, "--mfu": fractions, "--achieved": numbers, "--tokens": numbers, "--price": numbers,
        "--efficiency": fractions, "--largest-layer-params": numbers, "--flops": numbers,
        "--weights": st.sampled_from(["bf16", "fp16", "fp8", "int8", "int4", "awq", "gptq", "gptq-act-order"]),
        "--kv": st.sampled_from(["bf16", "fp16", "fp8", "int8", "int8-per-token-head", "q8_0", "q4_0"]),
        "--compute-efficiency": fractions, "--bandwidth-efficiency": fractions, "--bandwidth": numbers,
        "--link-bandwidth": numbers, "--not-quantized": st.sampled_from(["lm_head", "model.layers.*.self_attn"]),
        "--gpu-memory-utilization": fractions, "--acceptance": fractions,
        "--draft": st.sampled_from(MODEL_NAMES + ["mtp"]), "--draft-config": st.sampled_from(ALL_CONFIGS),
        "--for": dims, "--wrt": dims, "--scale": dims | st.sampled_from(["kv", "l", "h"]),
        "--large": _lists(dims, 2), "--quantity": st.sampled_from(QUANTITIES),
        "--scope": st.sampled_from(["model", "layer"] + GROUPS + (["nonexistent"] if rough else [])),
        "--over": st.sampled_from(["s=128:1024:x2", "b=1,2,4", "s=1024:8192:x2", "h=64:256:+64", "l=1:4:+1"]
                                  + (["s=1:1e12:x2", "b=1:100000000:+1", "s=", "q=1,2"] if rough else [])),
        "--shape": _lists(st.sampled_from(["1x16", "2x32", "3x8"] + (["0x1", "1x0", "x"] if rough else []))),
        "--hf": st.sampled_from(HF_FILES),
        "--launch": st.sampled_from(LAUNCH_FILES + (["/dev/zero", "/proc/self/environ", "."] if rough else [])),
    }


#: the options whose values the tables above name (others: numbers and hostile text)
NAMED = frozenset(_named_values(None))
#: options a --launch file may give, required without one (commands/_launch_hook.py)
LAUNCH_REQUIRED = {"plan": ("gpus", "global_batch")}
#: options whose one occurrence takes several values (a table strategy is already a list)
LISTED = frozenset({"--set", "--recompute-modules", "--lora-targets", "--large", "--shape"})


def model_argument(model_path: str | None = None):
    """A positional MODEL: a bundled name, a config.json, or the given (generated) file."""
    options = [st.sampled_from(MODEL_NAMES)] * 3 + [st.sampled_from(HF_FILES)]
    if model_path:
        options = [st.just(model_path)] * 4 + options
    return st.one_of(*options)


def positional(arg: Arg, model: str | None, stem: str):
    if arg.dest in ("a", "b"):   # diff: MODEL or MODEL@CONFIG
        return st.one_of(st.sampled_from(MODEL_NAMES),
                         st.builds(lambda m, c: f"{m}@{c}", st.sampled_from(MODEL_NAMES), st.sampled_from(ALL_CONFIGS)),
                         st.just(f"{stem}@{(CONFIGS.get(stem) or ['x'])[0]}"))
    if arg.dest == "name":   # schema, hardware
        return st.sampled_from(SCHEMAS if arg.command == "schema" else PRESETS + ["", "h100"])
    return st.just(model)


def value(arg: Arg, model: str | None, rough: bool = True):
    """The strategy of one option's value(s): a list of strings (empty for a switch);
    ``rough``: hostile text mixed in."""
    if arg.nargs == 0:
        return st.just([])
    if arg.flag in ("-o", "--output"):
        return output_names(arg.command, rough).map(lambda v: [v])
    if arg.choices:
        base = st.sampled_from([str(c) for c in arg.choices])
    elif arg.flag in NAMED:
        base = _named_values(model, rough)[arg.flag]
    elif arg.type is int or callable(arg.type):   # int, or a count parser (infer's --prompt)
        base = ints if rough else small_ints.map(str)
    else:   # a flag the tables do not know yet: numbers and hostile text
        base = numbers | ints | hostile
    if arg.nargs in ("+", "*"):
        many = base if arg.flag in LISTED else _lists(base)
        return st.one_of(many, many, many, _lists(hostile)) if rough else many
    single = base.map(lambda v: [v])
    return st.one_of(*[single] * 2, hostile.map(lambda v: [v])) if rough else single


@st.composite
def argv_for(draw, command: str, args: list[Arg], model_path: str | None = None, max_flags: int = 6):
    """An argument list of ``command``. Three in ten are rough (hostile values mixed in,
    up to ``max_flags`` options); the others use valid values, the model's own
    configuration (mostly) and up to 3 other options. Positionals and required options
    come first (a rough list leaves a required option out one time in ten), then
    the options in any order."""
    rough = draw(st.integers(0, 9), label="rough?") < 3
    model = draw(model_argument(model_path), label="model")
    stem = Path(model).stem if model.endswith(".cg") else model
    argv = [command]
    for a in args:
        # MODEL of plan, fit and infer is optional only for --launch FILE: drawn as before it was
        if a.flag is None and (a.nargs != "?" or (a.dest == "model" and command != "train")
                               or draw(st.booleans(), label=f"{a.dest}?")):
            argv.append(draw(positional(a, model, stem), label=a.dest))
    options = [a for a in args if a.flag]
    required = [a for a in options if a.required or a.dest in LAUNCH_REQUIRED.get(command, ())]
    chosen = [a for a in required if not rough or draw(st.integers(0, 9), label=f"{a.flag}?") > 0]
    config = next((a for a in options if a.flag == "--config"), None)
    if config and not rough and CONFIGS.get(stem) and draw(st.integers(0, 4), label="--config?") > 0:
        chosen.append(config)
    hardware = next((a for a in options if a.flag == "--hardware" and a not in chosen), None)
    if hardware and not rough and draw(st.booleans(), label="--hardware?"):   # infer's times need one
        chosen.append(hardware)
    others = [a for a in options if a not in chosen and not a.required] or [None]
    chosen += draw(st.lists(st.sampled_from(others), max_size=max_flags if rough else 3, unique=True), label="options")
    for a in draw(st.permutations([a for a in chosen if a is not None]), label="order"):
        argv.append(a.flag)
        argv.extend(draw(value(a, stem, rough), label=a.flag))
    return argv


# --- the run ---------------------------------------------------------------------

class CaseTooSlow(BaseException):
    """Raised by the timer; a BaseException so that the CLI's own ``except Exception``
    (exit 3) does not swallow it."""


def _too_slow(limit: float, wall: float):
    """The timer's handler for one :func:`time_limit`: its message names the limits that applied."""
    def handler(signum, frame):
        if signum == signal.SIGPROF:
            raise CaseTooSlow(f"a case took more than {limit:g} s of CPU time")
        raise CaseTooSlow(f"a case ran past the wall-clock backstop ({wall:g} s; a starved process: raise "
                          "COSTGRAPH_FUZZ_WALL)")
    return handler


#: the wall-clock backstop, seconds (a hang that uses no CPU); ``None``: ten times each call's CPU limit
WALL = float(os.environ.get("COSTGRAPH_FUZZ_WALL", "0")) or None


@contextlib.contextmanager
def time_limit(limit: float | None = None):
    """CPU-time limit, seconds (SIGPROF; default :data:`LIMIT`, read when called), with a wall-clock
    backstop (SIGALRM; :data:`WALL` when set, else ten times this call's limit): the approach of
    tests/commands/test_fuzz.py. Over either, :class:`CaseTooSlow` naming the limit that applied."""
    limit = LIMIT if limit is None else limit
    wall = WALL or 10 * limit
    handler = _too_slow(limit, wall)
    old_prof = signal.signal(signal.SIGPROF, handler)
    old_alrm = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_PROF, limit)
    signal.setitimer(signal.ITIMER_REAL, wall)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, old_prof)
        signal.signal(signal.SIGALRM, old_alrm)


@dataclass
class Result:
    argv: list
    status: int
    out: str
    err: str


def run_cli(argv: list[str]) -> Result:
    """``costgraph.cli.main(argv)`` in this process, stdout and stderr captured, under
    the time limit; a case over the limit raises :class:`CaseTooSlow` with its argv."""
    out, err = io.StringIO(), io.StringIO()
    try:
        limit = max(LIMIT, COMMAND_LIMITS.get(argv[0], 0.0)) if argv else None
        with time_limit(limit), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli.main(list(argv))
    except CaseTooSlow as e:
        raise AssertionError(f"{e}: costgraph {' '.join(map(repr, argv))}") from None
    return Result(list(argv), status, out.getvalue(), err.getvalue())


def peak_rss() -> int:
    """This process's peak resident memory so far, bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# --- the checks --------------------------------------------------------------------

def _no_constant(name):
    raise ValueError(f"JSON output has {name}: not strict JSON")


def strict_json(text: str):
    """``json.loads`` refusing NaN, Infinity and -Infinity."""
    return json.loads(text, parse_constant=_no_constant)


#: JSON fields that may be negative, by key, with the reason
SIGNED = {
    "derivative": "sensitivity: d(quantity)/d(dimension) may decrease",
    "elasticity": "sensitivity: a relative change may be negative",
    "difference": "diff: b minus a", "delta": "diff: b minus a", "change": "diff: b minus a",
    "relative": "diff: relative change", "percent": "diff: relative change",
    "coefficient": "leading/expression: a polynomial's coefficients may be negative",
    "exponent": "expression trees: x**-1 is a division",
    "minimum": "schema documents: bounds", "exclusiveMinimum": "schema documents: bounds",
}


def numbers_in(doc, path=()):
    """Every number in a JSON document with its key path."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from numbers_in(v, path + (str(k),))
    elif isinstance(doc, list):
        for v in doc:
            yield from numbers_in(v, path + ("[]",))
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield path, doc


def check_numbers(doc, where: str) -> None:
    """Every number finite; non-negative unless a key on its path is in :data:`SIGNED`;
    a count (a key naming params, FLOPs or bytes, not a rate or time) whole."""
    for path, x in numbers_in(doc):
        assert math.isfinite(x), f"{where}: {'/'.join(path)} = {x}"
        if not any(p in SIGNED for p in path):
            assert x >= 0, f"{where}: {'/'.join(path)} = {x} is negative"
        key = next((p for p in reversed(path) if p not in ("value", "[]")), "")
        if isinstance(x, float) and is_count(key) and not any(p in REAL for p in path):
            assert x.is_integer(), f"{where}: {'/'.join(path)} = {x} is a count, not whole"


#: JSON objects whose counts are real numbers by definition, with the reason
REAL = {
    "chinchilla_6ND": "optimal: Hoffmann et al. 2022's closed-form compute-optimal N and D "
                      "(Eq. 10), continuous, not a model's count",
}

_COUNT = ("params", "flops", "bytes", "tokens", "count", "layers", "rows")
_NOT_COUNT = ("per_second", "rate", "second", "intensity", "fraction", "ratio", "share", "utilization", "efficiency",
              "per_token", "_gb", "_gib", "mfu", "hfu", "per_device", "mean", "average")


def is_count(key: str) -> bool:
    """A JSON key naming a count (parameters, FLOPs, bytes, tokens), not a rate, time or ratio."""
    k = key.lower()
    return any(w in k for w in _COUNT) and not any(w in k for w in _NOT_COUNT)


class _HTML(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = 0

    def handle_starttag(self, tag, attrs):
        self.tags += 1


def check_html(text: str, where: str) -> None:
    p = _HTML()
    p.feed(text)
    p.close()
    assert p.tags > 0, f"{where}: HTML without a tag"


def _tool(argv: list[str], where: str) -> None:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{where}: {' '.join(argv[:2])} failed:\n{r.stderr[-2000:]}"


def check_python(code: str, where: str) -> None:
    """Generated Python compiles and runs: the module executes, and each generated function
    called with every argument 64 returns a non-negative int or raises ValueError (sizes
    that do not divide)."""
    ns: dict = {"__name__": "generated"}
    exec(compile(code, where, "exec"), ns)   # our own generated code, not user text
    functions = ns.get("FUNCTIONS") or {}
    for name, f in list(functions.items())[:20]:
        import inspect

        kwargs = {p: 64 for p in inspect.signature(f).parameters}
        try:
            v = f(**kwargs)
        except ValueError:
            continue
        assert isinstance(v, int) and v >= 0, f"{where}: {name}(64, ...) = {v!r}"


def check_code(lang: str, code: str, where: str) -> None:
    """Generated code compiles: Python (and runs), C (``cc -fsyntax-only -Werror``),
    JavaScript (``node --check``) where those tools exist."""
    if lang in ("python", "numpy"):
        if lang == "numpy" and "import numpy" in code:
            compile(code, where, "exec")
        else:
            check_python(code, where)
        return
    tool = {"c": "cc", "javascript": "node"}[lang]
    if not shutil.which(tool):
        return
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / ("gen.c" if lang == "c" else "gen.js")
        path.write_text(code, encoding="utf-8")
        if lang == "c":
            _tool(["cc", "-fsyntax-only", "-std=c99", "-Wall", "-Werror", str(path)], where)
        else:
            _tool(["node", "--check", str(path)], where)
