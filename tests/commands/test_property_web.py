"""Property tests over ``costgraph web``'s flags: argument lists drawn from the real parser and run in this
process, checked as every subcommand's are (tests/commands/test_property_cli.py says what a case must do;
tests/property_run.py runs and checks it). A file of its own: a calculator page derives train and infer for
every preset, precision and layout (10 to 20 s of CPU a page), so two lists are half a minute."""

from __future__ import annotations

from property_run import base, flags_property  # noqa: F401  (base: the fixture)


def test_flags_web(base):
    flags_property(base, "web")
