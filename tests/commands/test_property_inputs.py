"""Property tests over generated inputs as a command's MODEL: a mutated bundled model file or a mutated
example ``config.json`` (tests/fuzz_inputs.py's mutations), with argument lists of any command that takes
a model, run in this process and checked as tests/commands/test_property_cli.py says (the harness:
tests/property_run.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import cli_props as P
import fuzz_inputs as F
from property_run import LONG, MODEL_COMMANDS, SPEC, _seeded, _settings, base, models_copy, run_case  # noqa: F401


@_seeded
@_settings(fast=5, long=LONG)   # 44 s of CI for 8: the campaign (bench.bench_fuzz) runs the rest
@given(data=st.data())
def test_generated_model_files(base, models_copy, data):
    """A mutated bundled model file (tests/fuzz_inputs.py's mutations) as the MODEL of any
    command that takes one."""
    rel = data.draw(st.sampled_from([r for r in F.SOURCES if "/" not in r]), label="file")
    target = models_copy / rel
    target.write_text(F.mutate_model_text(data, F.TEXTS[rel]), encoding="utf-8")
    command = data.draw(st.sampled_from(MODEL_COMMANDS), label="command")
    try:
        run_case(base, data.draw(P.argv_for(command, SPEC[command], str(target)), label="argv"))
    finally:
        target.write_text(F.TEXTS[rel], encoding="utf-8")


@_seeded
@_settings(fast=4, long=LONG)   # 72 s of CI for 6 (a drawn web or plan is seconds): the campaign runs the rest
@given(data=st.data())
def test_generated_configs(base, data):
    """A mutated example config.json (tests/fuzz_inputs.py's mutations) as the MODEL."""
    name = data.draw(st.sampled_from(sorted(F.CONFIGS)), label="config")
    text = F.to_json_text(F.mutate_config(data, F.CONFIGS[name]))
    path = base / "config.json"
    path.write_text(text, encoding="utf-8")
    command = data.draw(st.sampled_from(MODEL_COMMANDS), label="command")
    run_case(base, data.draw(P.argv_for(command, SPEC[command], str(path)), label="argv"))
