"""Fuzzing as a test (issue 6, item 8): every mutated input ends in a result
or costgraph's own error (a :class:`~costgraph.CostgraphError`), never
another exception, and within a time limit.

Hypothesis mutates

* the bundled model files (``models/*.cg``, and the library ``models/std/*.cg``
  through a model that imports it): lines deleted, duplicated or swapped,
  tokens replaced by other tokens of the language or by numbers (up to
  thousands of digits), random characters (any Unicode, control characters)
  or invalid UTF-8 bytes inserted, spans cut out, the text truncated;
* the example configs (``examples/hf/*.json``): values made huge, negative,
  fractional, ``NaN``/``Infinity``/``1e400``, null, strings, lists or objects
  (nested up to 100,000 deep), keys deleted or added, ``model_type`` changed.

Each mutated input is written to a temporary copy of ``models/`` (or a
``config.json``), loaded, its costs derived, its first configuration
evaluated and the text report rendered. A case that takes more than
``COSTGRAPH_FUZZ_LIMIT`` seconds of CPU time (default 5; a SIGPROF timer, so
a busy machine does not make it fail) fails with its input.

Profiles, chosen by the environment variable ``COSTGRAPH_FUZZ``:

``fast`` (default, part of the suite)
    derandomized (the same cases on every run): 370 cases, about 30 s;
``long`` (by hand)
    ``COSTGRAPH_FUZZ=long nice python -m pytest tests/commands/test_fuzz.py -q
    --hypothesis-show-statistics``: 12,000 cases from a random seed
    (``COSTGRAPH_FUZZ_SEED=N`` repeats one run), tens of minutes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, seed, settings
from hypothesis import strategies as st

import costgraph
from costgraph import CostgraphError
from costgraph.export.text_report import to_text_doc

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"
HF = ROOT / "examples" / "hf"

PROFILE = os.environ.get("COSTGRAPH_FUZZ", "fast")
LIMIT = float(os.environ.get("COSTGRAPH_FUZZ_LIMIT", "5"))
if PROFILE not in ("fast", "long"):
    raise ValueError(f"COSTGRAPH_FUZZ must be fast or long, not {PROFILE!r}")

_COMMON = dict(deadline=None, database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.function_scoped_fixture])


def _settings(fast: int, long: int):
    if PROFILE == "long":
        return settings(max_examples=long, **_COMMON)
    return settings(max_examples=fast, derandomize=True, **_COMMON)


def _seeded(f):
    s = os.environ.get("COSTGRAPH_FUZZ_SEED")
    return seed(int(s))(f) if s and PROFILE == "long" else f


# --- the time limit -------------------------------------------------------------

class CaseTooSlow(Exception):
    pass


def _too_slow(signum, frame):
    raise CaseTooSlow(f"a case took more than {LIMIT} s of CPU time")


@contextmanager
def time_limit():
    """CPU-time limit (SIGPROF), with a wall-clock backstop (SIGALRM) ten times longer."""
    old_prof = signal.signal(signal.SIGPROF, _too_slow)
    old_alrm = signal.signal(signal.SIGALRM, _too_slow)
    signal.setitimer(signal.ITIMER_PROF, LIMIT)
    signal.setitimer(signal.ITIMER_REAL, 10 * LIMIT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, old_prof)
        signal.signal(signal.SIGALRM, old_alrm)


def outcome(run, note=event):
    """Run one case: a result or a CostgraphError pass; anything else fails the test."""
    with time_limit():
        try:
            run()
        except CostgraphError as e:
            str(e)   # the message itself must render
            note(type(e).__name__)
            return "error"
    note("result")
    return "result"


def exercise(model: costgraph.Model) -> None:
    """What a user does with a model: costs, the first configuration's numbers, the report."""
    costs = model.costs()
    values = None
    if model.configs:
        name = next(iter(model.configs))
        costs.evaluate(config=name)
        values = model.values(name)
    to_text_doc(costs, values)


# --- model files ----------------------------------------------------------------

SOURCES = sorted(p.relative_to(MODELS).as_posix() for p in [*MODELS.glob("*.cg"), *MODELS.glob("std/*.cg")])
TEXTS = {rel: (MODELS / rel).read_text(encoding="utf-8") for rel in SOURCES}
# a library file is loaded through the models that import it
USERS = {rel: [m for m in SOURCES if "/" not in m and f'"{rel}"' in TEXTS[m]] or ["gpt.cg"] for rel in SOURCES}
TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9][0-9_]*|\"[^\"\n]*\"|\S")
POOL = sorted({t for text in TEXTS.values() for t in TOKEN.findall(text)})

numbers = st.one_of(
    st.integers(0, 100), st.integers(-10**6, 10**6), st.integers(10**6, 10**120),
    st.sampled_from([0, 1, 2, 10**99, 10**100, 10**4000]),
).map(str) | st.sampled_from(["1" + "0" * 5000, "1_000", "1.5", "1e3", "-0"])
replacement = st.one_of(st.sampled_from(POOL), numbers, st.text(max_size=4))


def mutate_model_text(data, text: str) -> str:
    for _ in range(data.draw(st.integers(1, 4), label="how many mutations")):
        lines = text.split("\n")
        kind = data.draw(st.sampled_from(
            ["delete line", "duplicate line", "swap lines", "replace token", "replace token",
             "insert characters", "cut span", "truncate"]), label="mutation")
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        if kind == "delete line":
            del lines[i]
        elif kind == "duplicate line":
            lines.insert(data.draw(st.integers(0, len(lines)), label="to"), lines[i])
        elif kind == "swap lines":
            j = data.draw(st.integers(0, len(lines) - 1), label="with")
            lines[i], lines[j] = lines[j], lines[i]
        if kind in ("delete line", "duplicate line", "swap lines"):
            text = "\n".join(lines)
            continue
        if kind == "replace token":
            spans = [m.span() for m in TOKEN.finditer(text)]
            if spans:
                a, b = spans[data.draw(st.integers(0, len(spans) - 1), label="token")]
                text = text[:a] + data.draw(replacement, label="new token") + text[b:]
            continue
        pos = data.draw(st.integers(0, len(text)), label="position")
        if kind == "insert characters":
            text = text[:pos] + data.draw(st.text(min_size=1, max_size=8), label="characters") + text[pos:]
        elif kind == "cut span":
            text = text[:pos] + text[pos + data.draw(st.integers(1, 40), label="length"):]
        else:
            text = text[:pos]
    return text


@pytest.fixture(scope="module")
def models_copy(tmp_path_factory):
    """A copy of models/: mutated files are written into it (not bundled, so
    they are read from disk and their imports resolve inside the copy)."""
    root = tmp_path_factory.mktemp("fuzz") / "models"
    shutil.copytree(MODELS, root, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    return root


@_seeded
@_settings(fast=250, long=8000)
@given(data=st.data())
def test_mutated_model_files(models_copy, data):
    rel = data.draw(st.sampled_from(SOURCES), label="file")
    text = mutate_model_text(data, TEXTS[rel])
    raw = text.encode("utf-8")
    if data.draw(st.integers(0, 9), label="bad bytes?") == 0:
        at = data.draw(st.integers(0, len(raw)), label="byte position")
        raw = raw[:at] + data.draw(st.sampled_from([b"\xff", b"\xc3", b"\x00", b"\xed\xa0\x80"])) + raw[at:]
    loaded = data.draw(st.sampled_from(USERS[rel]), label="model") if "/" in rel else rel
    target = models_copy / rel
    target.write_bytes(raw)
    try:
        outcome(lambda: exercise(costgraph.load(str(models_copy / loaded))))
    finally:
        target.write_text(TEXTS[rel], encoding="utf-8")


def test_model_copy_loads_unmutated(models_copy):
    for rel in SOURCES:
        if "/" not in rel:
            assert outcome(lambda: exercise(costgraph.load(str(models_copy / rel))), note=print) == "result", rel


# --- config.json files ----------------------------------------------------------

CONFIGS = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(HF.glob("*.json"))}
KEYS = sorted({k for c in CONFIGS.values() for k in c})
MODEL_TYPES = sorted({c["model_type"] for c in CONFIGS.values() if "model_type" in c})   # diffusers: _class_name
# JSON text that json.dumps does not write: spliced in for a placeholder string
RAW = ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "9" * 5000, "9" * 4000, "1" + "0" * 101,
       "1.0e2", "-0", "0.5", "[" * 101 + "]" * 101, "[" * 100_000 + "]" * 100_000, '{"a": ' * 200 + "1" + "}" * 200]

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.integers(10**9, 10**90),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
              st.sampled_from(MODEL_TYPES), st.sampled_from(range(len(RAW))).map(lambda i: f"@@RAW{i}@@")),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=5),
                                                                inner, max_size=3),
    max_leaves=6)


def mutate_config(data, config: dict) -> dict:
    config = dict(config)
    for _ in range(data.draw(st.integers(1, 4), label="how many mutations")):
        kind = data.draw(st.sampled_from(["set", "set", "delete", "add", "model_type"]), label="mutation")
        keys = sorted(config)
        if kind == "model_type":
            config["model_type"] = data.draw(st.sampled_from(MODEL_TYPES), label="model_type")
        elif kind == "delete" and keys:
            del config[data.draw(st.sampled_from(keys), label="key")]
        elif kind == "add":
            config[data.draw(st.sampled_from(KEYS), label="key")] = data.draw(json_values, label="value")
        elif keys:
            config[data.draw(st.sampled_from(keys), label="key")] = data.draw(json_values, label="value")
    return config


def to_json_text(config: dict) -> str:
    text = json.dumps(config, indent=2)
    return re.sub(r'"@@RAW(\d+)@@"', lambda m: RAW[int(m.group(1))], text)


def exercise_hf(hf) -> None:
    costs = hf.costs()
    costs.evaluate(**hf.values)
    to_text_doc(costs, hf.model.values(**hf.values))


@_seeded
@_settings(fast=120, long=4000)
@given(data=st.data())
def test_mutated_configs(tmp_path_factory, data):
    name = data.draw(st.sampled_from(sorted(CONFIGS)), label="config")
    text = to_json_text(mutate_config(data, CONFIGS[name]))
    path = tmp_path_factory.getbasetemp() / "fuzz-config.json"
    path.write_text(text, encoding="utf-8")
    outcome(lambda: exercise_hf(costgraph.load_hf_config(str(path))))
