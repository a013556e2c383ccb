"""Fuzzing as a test (issue 6, item 8): every mutated input ends in a result
or costgraph's own error (a :class:`~costgraph.CostgraphError`), never
another exception, and within a time limit.

Hypothesis mutates (the mutations: ``tests/fuzz_inputs.py``, shared with
``tests/commands/test_property_inputs.py`` and ``bench/bench_fuzz.py``)

* the bundled model files (``models/*.cg``, and the library ``models/std/*.cg``
  through a model that imports it): lines deleted, duplicated or swapped,
  tokens replaced by other tokens of the language or by numbers (up to
  thousands of digits), random characters (any Unicode, control characters)
  or invalid UTF-8 bytes inserted (here), spans cut out, the text truncated;
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

import os
import shutil
import signal
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, event, given
from hypothesis import strategies as st

import property_run
from property_run import _seeded
from fuzz_inputs import CONFIGS, MODELS, SOURCES, TEXTS, USERS, mutate_config, mutate_model_text, to_json_text

import costgraph
from costgraph import CostgraphError
from costgraph.export.text_report import to_text_doc

LIMIT = float(os.environ.get("COSTGRAPH_FUZZ_LIMIT", "5"))

_COMMON = dict(deadline=None, database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.function_scoped_fixture])


def _settings(fast: int, long: int):
    return property_run._settings(fast, long, common=_COMMON)   # the profiles (COSTGRAPH_FUZZ) read once, there


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


# --- config.json files ---

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
