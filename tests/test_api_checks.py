"""The API's analyses (Model.train, Model.infer, Model.plan) check their arguments as the commands
do: a wrong type or value is a CostgraphValueError naming the argument, never an error from deep
inside (found by a fresh user's trial of issue 15's API)."""

import pytest

import costgraph
from costgraph.errors import CostgraphValueError


@pytest.fixture(scope="module")
def gpt():
    m = costgraph.load("gpt")
    v = m.values("gpt2")
    return m, v, next(s for s in v if str(s) == "h")


CASES = [
    ("values a list", lambda m, v, h: m.train(gpus=8, values=[1]), "argument 'values' must be a mapping"),
    ("values a config name", lambda m, v, h: m.train(gpus=8, values="gpt2"), "argument 'values' must be a mapping"),
    ("a value as text", lambda m, v, h: m.train(gpus=8, values={**v, h: "abc"}), "'h' must be a positive whole"),
    ("a negative size", lambda m, v, h: m.train(gpus=8, values={**v, h: -768}), "'h' must be a positive whole"),
    ("a fractional size", lambda m, v, h: m.train(gpus=8, values={**v, h: 767.5}), "'h' must be a positive whole"),
    ("a size of no dimension", lambda m, v, h: m.train(gpus=8, values={**v, "zz": 3}), "no dimension of model 'gpt'"),
    ("a layout of the wrong type", lambda m, v, h: m.train(42, values=v), "takes a Layout or keyword settings"),
    ("a dict as the layout", lambda m, v, h: m.train({"t": 2}, values=v), "takes a Layout or keyword settings"),
    ("an unknown causal count", lambda m, v, h: m.train(gpus=8, values=v, causal="zz"), "unknown causal 'zz' (causal count)"),
    ("no causal count", lambda m, v, h: m.train(gpus=8, values=v, causal=None), "unknown causal None (causal count)"),
    ("a convention by number", lambda m, v, h: m.train(gpus=8, values=v, convention=3), "unknown convention 3 (FLOP convention)"),
    ("megatron as text", lambda m, v, h: m.train(gpus=8, values=v, megatron="yes"), "'megatron' must be True or False"),
    ("negative tokens", lambda m, v, h: m.train(gpus=8, values=v, tokens=-1, mfu=0.4), "--tokens must be positive"),
    ("a cluster of 10^400 devices", lambda m, v, h: m.train(gpus=10**400, zero=3, values=v),
     "gpus is over 1,000,000"),
    ("plan: gpus as text", lambda m, v, h: m.plan(v, gpus="x", hardware="h100-sxm", global_batch=64),
     "cannot read --gpus 'x'"),
    ("plan: gpus a fractional float", lambda m, v, h: m.plan(v, gpus=8.5, hardware="h100-sxm", global_batch=64),
     "'--gpus' must be a positive whole number"),
    ("plan: gpus a bool", lambda m, v, h: m.plan(v, gpus=True, hardware="h100-sxm", global_batch=64),
     "'--gpus' must be a positive whole number"),
    ("plan: top as fractional text", lambda m, v, h: m.plan(v, gpus=8, hardware="h100-sxm", global_batch=64,
                                                            top="3.5"), "--top '3.5' is not a positive whole number"),
    # a count as text: the command line's rule for every count keyword ('_' only between groups of three digits)
    ("plan: a batch with a stray '_'", lambda m, v, h: m.plan(v, gpus=8, hardware="h100-sxm", global_batch="1_28"),
     "--global-batch '1_28': '_' in a number only separates groups of three digits"),
    ("train: a degree with a stray '_'", lambda m, v, h: m.train(t="2_0", gpus=2, values=v),
     "--tp '2_0': '_' in a number only separates groups of three digits"),
    ("infer: a prompt with a stray '_'", lambda m, v, h: m.infer(hardware="h100-sxm", prompt="1_00", generate=2,
                                                                values=v), "--prompt '1_00': '_' in a number only"),
    ("plan: negative tokens", lambda m, v, h: m.plan(v, gpus=8, hardware="h100-sxm", global_batch=64, tokens=-1),
     "--tokens must be positive"),
    ("plan: a negative size", lambda m, v, h: m.plan({**v, h: -768}, gpus=8, hardware="h100-sxm", global_batch=64),
     "'h' must be a positive whole"),
    ("infer: values a list", lambda m, v, h: m.infer(hardware="h100-sxm", prompt=8, generate=2, values=[1]),
     "argument 'values' must be a mapping"),
    ("infer: an unknown convention", lambda m, v, h: m.infer(hardware="h100-sxm", prompt=8, generate=2, values=v,
                                                             convention="zz"), "unknown convention 'zz' (FLOP convention)"),
]


@pytest.mark.parametrize("name, call, message", CASES, ids=[c[0] for c in CASES])
def test_api_refuses_with_a_named_argument(gpt, name, call, message):
    with pytest.raises(CostgraphValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(*gpt)


def test_counts_as_text_read_as_the_command_line_reads_them(gpt):
    """Trial 8 leftover: Model.infer(prompt="1_000") was accepted while Model.plan(global_batch="1_280") was refused.
    One rule for every count keyword of the API, the command line's (arguments.token_count: '_' only as a thousands
    separator, e-notation of a whole number, a whole float): each gives what the int gives."""
    m, v, _ = gpt
    assert m.train(t="2", gpus="4", m="4", values=v).to_dict() == m.train(t=2, gpus=4, m=4, values=v).to_dict()
    assert m.train(t=2.0, gpus="4e0", values=v).to_dict() == m.train(t=2, gpus=4, values=v).to_dict()
    # plan's options as Model.plan resolves them (option_fields.resolve, before any derivation)
    from costgraph.option_fields import resolve
    from costgraph.train_options import PlanOptions

    o = resolve(PlanOptions, None, dict(gpus="8", hardware="h100-sxm", global_batch="1_024", top="1e1"), "plan")[0]
    assert (o.gpus, o.global_batch, o.top) == (8, 1024, 10) and all(type(x) is int for x in (o.gpus, o.global_batch, o.top))
    assert m.infer(hardware="h100-sxm", prompt="1_000", generate="16", batch="2", tp="2", values=v).to_dict() == \
        m.infer(hardware="h100-sxm", prompt=1000, generate=16, batch=2, tp=2, values=v).to_dict()


def test_degrees_as_text_with_a_global_batch(gpt):
    """Trial 9: a global batch's micro-batches (training.api.micro_batches) read the degrees as given, so
    train(layout=Layout(t="2"), global_batch=...) was a TypeError from deep inside ('<=' between str and int) and
    train(gpus="8", global_batch=...) refused the text Layout.filled reads."""
    from costgraph.parallel.layout import Layout

    m, v, _ = gpt
    want = m.train(t=2, gpus=4, global_batch=8, values=v).to_dict()
    assert m.train(layout=Layout(t="2", gpus="4"), global_batch="8", values=v).to_dict() == want
    assert m.train(t="2e0", gpus=4.0, global_batch=8, values=v).to_dict() == want
    with pytest.raises(CostgraphValueError, match="--gpus '4.5' is not a positive whole number"):
        m.train(t=2, gpus="4.5", global_batch=8, values=v)


def test_sizes_by_name_equal_sizes_by_symbol(gpt):
    m, v, _ = gpt
    by_name = m.train(gpus=8, values={str(s): int(x) for s, x in v.items()},
                      attention="eager").to_dict()["memory"]["total"]["value"]
    # GPT-2 on one device, its loss Megatron-LM's default cross-entropy (6 B a logit: 3,276,677,120 bytes under the
    # 4 B logits count before issue 31, 2 · 1024 · 50257 less)
    assert by_name == m.train(gpus=8, values=v, attention="eager").to_dict()["memory"]["total"]["value"] == 3_379_603_456


def test_the_step_time_names_its_preset_and_errors_name_the_flag(gpt, capsys):
    # found by the same trial: `train --hardware` never said which preset its seconds were on, and
    # `--tp -1` was refused as "t must be ...", the API's field name only
    from costgraph.cli import main

    m, v, _ = gpt
    r = m.train(gpus=8, zero=1, values=v, hardware="h100-sxm")
    assert r.to_dict()["step"]["hardware"] == "h100-sxm"
    assert "step time model on h100-sxm (" in r.to_text()
    assert main(["train", "gpt", "--config", "gpt2", "--tp", "-1"]) == 2
    assert "t (--tp) must be a positive whole number, got -1" in capsys.readouterr().err


@pytest.mark.parametrize("flag, value, message, hint", [
    ("--tp", "0", "t (--tp) must be a positive whole number, got 0", "hint: a whole number above 0, e.g. --tp 2"),
    ("--lora", "0", "lora_rank (--lora) must be a positive whole number, got 0", "e.g. --lora 8"),
    ("--micro-batches", "-3", "(--micro-batches) must be a positive whole number, got -3", "e.g. --micro-batches 2"),
    ("--offload-activations", "1.5", "(--offload-activations) 3/2 is not a fraction in [0, 1]", "e.g. 0.5"),
])
def test_layout_refusals_have_a_hint(capsys, flag, value, message, hint):
    # found by a hostile trial: these refusals had no hint line (every exit-2 message has one)
    from costgraph.cli import main

    assert main(["train", "gpt", "--config", "gpt2", "--zero", "3", flag, value]) == 2
    err = capsys.readouterr().err
    assert message in err and hint in err and "internal error" not in err


def _count_actions(command: str):
    """``(flag, action)`` of every count flag of ``command``'s parser: an option field the declarations call a count
    (option_fields.is_count), or a layout flag solve declares itself (--gpus, --tp, --pp, --cp: Layout's counts)."""
    from costgraph import option_fields
    from costgraph.cli import _parser
    from costgraph.fit_options import FitOptions
    from costgraph.layout_options import LayoutOptions
    from costgraph.train_options import PlanOptions, TrainOptions

    counts = {s.flag for cls in (LayoutOptions, TrainOptions, PlanOptions, FitOptions)
              for _, s in option_fields.specs(cls).values() if s.flag and option_fields.is_count(s)}
    counts |= {"--gpus-per-node"}   # train's DeepSpeed table (commands/_offload), a count of GPUs
    sub = next(a for a in _parser([command])._actions if a.dest == "command").choices[command]
    return [(a.option_strings[0], a) for a in sub._actions if a.option_strings and a.option_strings[0] in counts]


@pytest.mark.parametrize("command", ["train", "plan", "fit", "solve"])
def test_count_flags_read_counts_as_the_api_does(command):
    """Session 42 trial: `plan --global-batch 1e3` and `1280.0` were refused (argparse's type=int) while
    Model.plan(global_batch=1e3) ran. Every count flag reads its text by the API's rule (arguments.token_count,
    through option_fields.count_type): a whole number in e-notation or with '.0' is that int; text the API
    refuses is refused with the API's message, which argparse puts after "argument FLAG:"; plain digits ("0") read as
    int reads them, the range left to the option's check (t (--tp) must be a positive whole number, got 0)."""
    import argparse

    from costgraph.arguments import token_count

    actions = _count_actions(command)
    assert len(actions) >= {"train": 15, "plan": 3, "fit": 10, "solve": 4}[command], [f for f, _ in actions]
    for flag, a in actions:
        assert a.type("1e3") == 1000 and a.type("1280.0") == 1280 and a.type("1_280") == 1280, flag
        assert a.type("0") == token_count("0", flag) == 0, flag   # its range: the option's check, on both surfaces
        for text in ("1_28", "2.5", "2.5e0", "x"):
            with pytest.raises(CostgraphValueError) as api:
                token_count(text, flag)
            with pytest.raises(argparse.ArgumentTypeError) as cli:
                a.type(text)
            said = api.value.message.replace(f"{flag} '", "'")   # argparse names the flag: "argument --tp: '2.5' ..."
            assert str(cli.value) == f"{said} (hint: {api.value.hint})", (flag, text)


def test_plan_global_batch_alike_on_the_command_line_and_the_api(gpt, capsys):
    """The trial's case end to end: `plan --global-batch 1e3` plans what global_batch=1e3 (and 1000) plans; a
    fractional batch is refused on both surfaces with one message."""
    from costgraph.cli import main

    m, v, _ = gpt
    words = ["plan", "gpt", "--config", "gpt2", "--gpus", "8", "--hardware", "h100-sxm", "--top", "2", "--format", "json"]
    assert main(words + ["--global-batch", "1e3"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)["layouts"]
    api = m.plan(v, gpus=8, hardware="h100-sxm", global_batch=1e3, top=2).to_dict()["layouts"]
    assert rows == api == m.plan(v, gpus=8, hardware="h100-sxm", global_batch=1000, top=2).to_dict()["layouts"]
    assert main(words + ["--global-batch", "1280.5"]) == 2
    err = capsys.readouterr().err
    with pytest.raises(CostgraphValueError) as e:
        m.plan(v, gpus=8, hardware="h100-sxm", global_batch="1280.5")
    assert e.value.message == "--global-batch '1280.5' is not a positive whole number"
    assert f"costgraph plan: error: argument --global-batch: '1280.5' is not a positive whole number\nhint: " \
           f"{e.value.hint}; costgraph plan --help" in err


def test_fit_devices_alike_on_the_command_line_and_the_api(gpt, capsys):
    """fit's --gpus reads a count by the one rule (count_type) and so does costgraph.fit's gpus (FitOptions.gpus,
    a count: option_fields.resolve), so `fit --gpus 8.0` and fit(gpus=8.0) agree, and "2.5" is refused alike."""
    from costgraph.cli import main

    m, v, _ = gpt
    want = costgraph.fit(m, v, hardware="h100-sxm", gpus=8).to_dict()
    assert costgraph.fit(m, v, hardware="h100-sxm", gpus=8.0).to_dict() == want
    assert costgraph.fit(m, v, hardware="h100-sxm", gpus="8e0").to_dict() == want
    assert main(["fit", "gpt", "--config", "gpt2", "--hardware", "h100-sxm", "--gpus", "8.0", "--format", "json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(want))
    with pytest.raises(CostgraphValueError) as e:
        costgraph.fit(m, v, hardware="h100-sxm", gpus="2.5")
    assert e.value.message == "--gpus '2.5' is not a positive whole number"
    assert main(["fit", "gpt", "--config", "gpt2", "--hardware", "h100-sxm", "--gpus", "2.5"]) == 2
    assert "argument --gpus: '2.5' is not a positive whole number\nhint: " + e.value.hint in capsys.readouterr().err
