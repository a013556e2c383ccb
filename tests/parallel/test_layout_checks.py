"""Layout.filled's checks of the settings declared on LayoutOptions (costgraph.layout_options): every field
declared with a Choice is checked by one loop over the declared fields, with the message ``unknown FIELD 'VALUE'``
and the values as the hint; a field added with a Choice is checked without another line of code."""

from __future__ import annotations

import dataclasses

import pytest

from costgraph.choices import Choice
from costgraph.errors import CostgraphValueError
from costgraph.layout_options import LayoutOptions
from costgraph.option_fields import option, specs
from costgraph.parallel.layout import Layout

#: the fields of LayoutOptions declared with a Choice (but the ZeRO stage: its own message, "does not exist")
CHOICE_FIELDS = [n for n, (_, s) in specs(LayoutOptions).items() if isinstance(s.choices, Choice) and n != "zero"]


def test_the_choice_fields_are_the_declared_ones():
    # the loop reads the declarations: these are the fields the five copies checked, and the others declared so
    assert {"zero3_gathered", "cross_entropy", "fp8_transpose", "attention_kernel", "recompute", "attention",
            "schedule", "recompute_count", "schedule_accounting", "overlap", "ep_overlap", "offload_optimizer",
            "offload_params"} <= set(CHOICE_FIELDS)


@pytest.mark.parametrize("name", CHOICE_FIELDS)
def test_every_choice_field_refuses_a_value_not_its_own(name):
    choice = specs(LayoutOptions)[name][1].choices
    for bad in ("no-such-value", True):
        with pytest.raises(CostgraphValueError, match=f"unknown {name} {bad!r}") as e:
            Layout(**{name: bad}).filled()
        assert e.value.hint == choice.hint()


def test_a_new_choice_field_is_checked_without_code():
    paint = Choice("colour", "colour", (("red", "a red one"), ("blue", "a blue one")), "red")

    @dataclasses.dataclass
    class Coloured(Layout):
        colour: str = option("--colour", choices=paint)

    assert Coloured().filled().colour == "red" and Coloured(colour="blue").filled().colour == "blue"
    with pytest.raises(CostgraphValueError, match="unknown colour 'green'") as e:
        Coloured(colour="green").filled()
    assert e.value.hint == "one of: red, blue"


# A setting that applies only with others defaults to auto, so a value given where it cannot apply is told from
# the default and refused (exit status 2 on the command line), naming both flags: the attention kernel times a
# flash core (costgraph.training.kernel_time; --attention eager has none), what ZeRO-3 holds gathered needs ZeRO 3
# (costgraph.training.states._gathered).
@pytest.mark.parametrize("given, words", [
    (dict(attention="eager", attention_kernel="fa2"),
     "--attention-kernel fa2 applies only with --attention flash; this layout has --attention eager"),
    (dict(zero3_gathered="fsdp2"), "--zero3-gathered fsdp2 applies only with --zero 3; this layout has --zero 0"),
    (dict(zero=2, zero3_gathered="largest"), "--zero3-gathered largest applies only with --zero 3"),
])
def test_a_setting_given_where_it_cannot_apply_is_refused(given, words, capsys):
    with pytest.raises(CostgraphValueError, match=words) as e:
        Layout(**given).filled()
    assert "leave out" in e.value.hint and "auto" in e.value.hint
    flags = [a for k, v in given.items() for a in (specs(LayoutOptions)[k][1].flag, str(v))]
    from cli_checks import refused

    refused(capsys, ["train", "llama", "--config", "llama-3-8b", "--gpus", "8", *flags], words)


def test_auto_resolves_where_the_setting_applies():
    # the defaults the analyses use: cudnn (Transformer Engine's fused attention, choices.ATTENTION_KERNEL) under
    # a flash core; largest (one unit in flight, choices.ZERO3_GATHERED) at ZeRO 3; nothing where they do not apply
    assert Layout().attention_kernel == "auto" and Layout().zero3_gathered == "auto"
    assert Layout().filled().resolved("attention_kernel") == "cudnn"
    assert Layout(attention="eager").filled().resolved("attention_kernel") is None
    assert Layout(zero=3).filled().resolved("zero3_gathered") == "largest"
    assert Layout(zero=1).filled().resolved("zero3_gathered") is None
    assert Layout(zero=3, zero3_gathered="fsdp2").filled().resolved("zero3_gathered") == "fsdp2"
    # auto at every stage: dataclasses.replace of a filled layout to another ZeRO stage stays valid (fit's steps)
    assert dataclasses.replace(Layout(zero=3).filled(), zero=1).filled().zero3_gathered == "auto"


def test_the_default_is_named_in_the_output(capsys):
    from cli_checks import run

    code, out, _ = run(capsys, ["train", "llama", "--config", "llama-3-8b", "--gpus", "8", "--zero", "3"])
    assert code == 0 and "ZeRO-3 gathered: --zero3-gathered largest (default) (one unit in flight" in out


def test_filled_once_per_settings_tells_values_of_other_types_apart():
    # Layout.filled keeps each filled layout by its fields' values and types: sp=1 equals sp=True (and
    # hashes alike) yet is refused, after sp=True was filled; t=Integer(2) keeps its type
    import sympy

    assert Layout(t=2, sp=True).filled().sp is True
    with pytest.raises(CostgraphValueError, match="sp must be true or false"):
        Layout(t=2, sp=1).filled()
    assert type(Layout(t=sympy.Integer(2), gpus=8).filled().t) is sympy.Integer
    assert type(Layout(t=2, gpus=8).filled().t) is int


def test_filled_gives_a_new_layout_each_time():
    # a caller may change the layout it got: the next one is filled as before (d = gpus / t)
    first = Layout(t=2, gpus=8).filled()
    first.t, first.d = 8, 1
    again = Layout(t=2, gpus=8).filled()
    assert (again.t, again.d, again.m) == (2, 4, 1)
    assert again is not first
