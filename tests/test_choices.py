"""One list of choices (issue 15 item 4): every reader of a named setting takes its values and
default from costgraph.choices — the Layout, argparse of every subcommand, the JSON Schemas'
enums, the analyses' own checks."""

import argparse
import json
from importlib.resources import files

import pytest

from costgraph import choices
from costgraph.choices import CHOICES
from costgraph.errors import CostgraphValueError


def _schema_enums():
    """(schema file, property name, enum) for every property named after a choice."""
    out = []

    def walk(node, name, where):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "properties" and isinstance(v, dict):
                    for prop, sub in v.items():
                        if isinstance(sub, dict) and "enum" in sub and prop in CHOICES:
                            out.append((name, prop, sub["enum"]))
                        walk(sub, name, where)
                else:
                    walk(v, name, where)
        elif isinstance(node, list):
            for v in node:
                walk(v, name, where)

    for f in files("costgraph.export").joinpath("schemas").iterdir():
        if f.name.endswith(".json"):
            walk(json.loads(f.read_text(encoding="utf-8")), f.name, "")
    return out


def test_schema_enums_equal_the_choices():
    found = _schema_enums()
    # the schemas name at least these (a schema losing its enum would silently pass otherwise)
    assert {p for _, p, _ in found} >= {"convention", "causal", "zero", "schedule", "recompute", "attention"}
    for name, prop, enum in found:
        assert enum == list(CHOICES[prop].values), (name, prop)


def _options(argv_prefix):
    """Every option of a subcommand parser with choices: dest → (choices, default)."""
    from costgraph.cli import _parser

    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    p = sub.choices[argv_prefix]
    return {a.dest: (tuple(a.choices) if a.choices else None, a.default) for a in p._actions}


@pytest.mark.parametrize("command", ["derive", "train", "plan", "infer", "solve", "graph", "report", "plot", "sweep",
                                     "codegen"])
def test_argparse_options_read_the_choices(command):
    opts = _options(command)
    checked = 0
    for dest, (allowed, default) in opts.items():
        choice = CHOICES.get(dest)
        if choice is None or allowed is None:
            continue
        if dest == "precision" and allowed != choice.values:   # train/plan: --precision is a policy (data table)
            continue
        assert allowed == choice.values, (command, dest)
        # derive's activation closed form has its own declared kernel default (Korthikanti's: eager)
        expected = choices.DERIVE_ATTENTION if (command, dest) == ("derive", "attention") else choice.default
        # --memory-convention not given is None, read as its default (cuda): one given beside --memory is refused,
        # cuda as nominal (runtime_memory.device_memory)
        expected = None if dest == "memory_convention" else expected
        assert default == expected, (command, dest)
        checked += 1
    assert checked >= 1, command


def test_layout_defaults_are_the_choices():
    from costgraph.parallel.layout import Layout

    L = Layout()
    assert (L.schedule, L.recompute, L.attention, L.zero) == (
        choices.SCHEDULE.default, choices.RECOMPUTE.default, choices.ATTENTION.default, choices.ZERO_STAGE.default)
    # the activation precision follows the policy (choices.activation_precision), decided when the layout is filled
    assert L.precision is None and L.filled().precision == choices.activation_precision(L.policy) == \
        choices.PRECISION.default
    assert Layout(policy="fp32").filled().precision == "fp32"
    assert (L.policy, L.optimizer, tuple(L.lora_targets)) == (choices.DEFAULT_POLICY, choices.DEFAULT_OPTIMIZER,
                                                           choices.DEFAULT_LORA_TARGETS)


def test_engine_tables_have_exactly_the_choices_names():
    from costgraph.engine.builder import PROFILES
    from costgraph.engine.conventions import FLOP_CONVENTIONS
    from costgraph.engine.precision import PRECISIONS

    assert tuple(FLOP_CONVENTIONS) == choices.CONVENTION.values
    assert tuple(PRECISIONS) == choices.PRECISION.values
    assert tuple(PROFILES) == choices.PROFILE.values


def test_layout_refuses_a_name_outside_the_choices():
    from costgraph.errors import CostgraphValueError
    from costgraph.parallel.layout import Layout

    with pytest.raises(CostgraphValueError, match="unknown schedule 'zb-v'") as e:   # zb-h1 is a schedule now (issue 16)
        Layout(schedule="zb-v").filled()
    assert e.value.hint == choices.SCHEDULE.hint()


def test_choices_module_imports_nothing_heavy():
    import subprocess
    import sys

    code = "import sys, costgraph.choices; print(any(m in sys.modules for m in ('sympy', 'networkx', 'lark')))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_help_names_each_value_and_marks_the_default():
    assert choices.RECOMPUTE.help().count("; default") == 1
    assert "selective (recompute the attention core" in choices.RECOMPUTE.help()
    with pytest.raises(ValueError, match="one of: none, selective, full"):
        choices.RECOMPUTE.check("some")


@pytest.mark.parametrize("field, value, message", [
    ("link_rate", "fast", "unknown link_rate 'fast' (link bandwidth convention)"),
    ("ep_dispatcher", "nccl", "unknown ep_dispatcher 'nccl' (EP token dispatcher)"),
    ("cross_entropy", "fused", "unknown cross_entropy 'fused' (cross-entropy implementation)"),
])
def test_train_and_plan_refuse_a_bad_value_with_one_message(field, value, message):
    # issue 27: train's layout check said "unknown link_rate 'fast'", plan's option check "unknown link bandwidth
    # convention 'fast'"; both are costgraph.arguments.named_choice now, the same text and hint
    import costgraph
    from costgraph.choices import CHOICES

    m = costgraph.load("gpt")
    v = m.values("gpt2")
    got = []
    for call in (lambda: m.train(values=v, gpus=8, hardware="h100-sxm", **{field: value}),
                 lambda: m.plan(v, gpus=8, hardware="h100-sxm", global_batch=8, **{field: value})):
        with pytest.raises(CostgraphValueError) as e:
            call()
        got.append((e.value.message, e.value.hint))
    assert got == [(message, CHOICES[field].hint())] * 2
