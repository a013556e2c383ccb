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
