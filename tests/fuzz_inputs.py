"""The input mutations of the fuzz tests (``tests/commands/test_fuzz.py``,
``tests/commands/test_property_inputs.py``) and of the campaign (``bench/bench_fuzz.py``):
Hypothesis draws that mutate the bundled model files and the example ``config.json`` files.

* model files (``models/*.cg``, ``models/std/*.cg``): lines deleted, duplicated or swapped,
  tokens replaced by other tokens of the language or by numbers (up to thousands of digits),
  random characters inserted, spans cut out, the text truncated (:func:`mutate_model_text`);
* configs (``examples/hf/*.json``): values made huge, negative, fractional,
  ``NaN``/``Infinity``/``1e400``, null, strings, lists or objects (nested up to 100,000 deep),
  keys deleted or added, ``model_type`` changed (:func:`mutate_config`, :func:`to_json_text`).

Not a test module (no ``test_`` prefix): pytest does not collect it. Imported as ``fuzz_inputs``
by the tests (``tests/`` is on pytest's path) and as ``tests.fuzz_inputs`` by the bench (run as
``python -m bench.bench_fuzz`` from the checkout's root).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
HF = ROOT / "examples" / "hf"


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
