"""Options declared once (issue 31 item 1): TrainOptions and PlanOptions (costgraph.train_options) are the one
list of the options of ``costgraph train`` and ``costgraph plan``; argparse, the API's keywords, the value checks
and the schemas' ``$defs/options`` are generated from their fields (costgraph.option_fields). A new option is one
field: the last test adds one and finds it in all four without another edit."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import pytest

import costgraph
from costgraph import option_fields, train_options
from costgraph.errors import CostgraphValueError
from costgraph.export import schema as schemas
from costgraph.option_fields import option, specs
from costgraph.commands._analysis import TIME_ONLY
from costgraph.fit_options import FitOptions
from costgraph.infer_options import InferOptions
from costgraph.layout_options import LayoutOptions
from costgraph.parallel.layout import Layout
from costgraph.train_options import PlanOptions, TrainOptions
from tests.cli_checks import refused, run


@pytest.fixture(scope="module")
def gpt():
    return costgraph.load("gpt")


def _subparser(command):
    from costgraph.cli import _parser

    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


#: the fields without a flag: plan's command, infer's draft_values and draft_mtp; the layout's LoRA dropout and
#: what Layout.filled derives
API_ONLY = ("command", "draft_values", "draft_mtp", "lora_dropout", "d",
            "precision", "tp_replicated", "mode", "gpus", "tp", "memory", "reserve", "efficiency_profile")


@pytest.mark.parametrize("command, cls", [("train", TrainOptions), ("plan", PlanOptions), ("infer", InferOptions),
                                          ("fit", FitOptions), ("train", LayoutOptions), ("fit", LayoutOptions),
                                          ("report", LayoutOptions), ("plot", LayoutOptions),
                                          ("calibrate", LayoutOptions)])
def test_argparse_is_generated_from_the_fields(command, cls):
    actions = {a.dest: a for a in _subparser(command)._actions}
    for name, (f, s) in specs(cls).items():
        if s.flag is None:
            assert name in API_ONLY and (name not in actions or cls in (LayoutOptions, FitOptions)), name
            continue
        if s.group == "lora" and command not in ("train", "fit"):   # the LoRA flags: train's and fit's only
            assert (s.dest or name) not in actions, name
            continue
        if command == "fit" and name in TIME_ONLY:   # fit prints no step time: no --link-rate
            assert (s.dest or name) not in actions, name
            continue
        a = actions[s.dest or name]
        assert s.flag in a.option_strings and a.help == s.help, name
        assert (tuple(a.choices) if a.choices else None) == (tuple(s.values) if s.values else None), name
        if f.default is dataclasses.MISSING:   # --launch FILE may give it: checked after the file is read
            assert a.required or "launch" in actions, name
        else:   # --no-router: store_false, default True; infer's --weights: None (a config.json's), the API's bf16
            assert a.default == dict(s.argparse).get("default", f.default), name


def test_plan_takes_the_layouts_own_options():
    # plan's --attention, --precision, --optimizer, --overlap, --pipeline-layout: the layout's fields, declared once
    # (option_fields.like): the same flag, choices and default, plan's help and value check
    layout, plan = specs(LayoutOptions), specs(PlanOptions)
    for mine, theirs in (("attention", "attention"), ("precision", "policy"), ("optimizer", "optimizer"),
                         ("overlap", "overlap"), ("pipeline_layout", "pipeline_layout")):
        (f, s), (g, t) = plan[mine], layout[theirs]
        assert (s.flag, s.values, f.default, s.argparse, s.domain) == (t.flag, t.values, g.default, t.argparse, None)
    assert plan["attention"][1].check == "choice" and layout["attention"][1].check is None


def test_the_reports_inference_options_are_infers_fields(capsys):
    # report and plot: --prompt ... --kv are InferOptions' fields (type, choices, default the API's), optional
    from costgraph.commands._analysis import INFER_SECTION

    for command in ("report", "plot"):
        actions = {a.dest: a for a in _subparser(command)._actions}
        for name in INFER_SECTION:
            f, s = specs(InferOptions)[name]
            a = actions[name]
            assert a.option_strings == [s.flag] and not a.required and a.help == INFER_SECTION[name]
            declared = dict(s.argparse).get("type")   # a count (type=int) read as the API reads one: 1e3 is 1000
            assert (a.type("1e3") == 1000 if declared is int else a.type == declared), name
            assert a.default == (None if f.default is dataclasses.MISSING else f.default), name
    rc, out, _ = run(capsys, "report", "gpt", "--config", "gpt2", "--format", "md", "--prompt", "1e3", "--generate",
                     "64", "--hardware", "h100-sxm")   # --prompt read as infer reads it (1e3), not by int()
    assert rc == 0 and "1000" in out


def test_layout_arguments_run_in_the_fields_order():
    # train's --help lists the layout's flags in LayoutOptions's order, train's --memory and --reserve among them
    flags = [a.option_strings[0] for a in _subparser("train")._actions if a.option_strings]
    declared = [s.flag for _, s in specs(LayoutOptions).values() if s.flag]
    at = [flags.index(f) for f in declared]
    assert at == sorted(at)
    assert flags[at[declared.index("--virtual-stages")] + 1:at[declared.index("--rank-order")]] == \
        ["--memory", "--no-loss", "--cross-entropy", "--reserve"]


@pytest.mark.parametrize("make, fragments", [
    (lambda: TrainOptions(gpuz=8), ["TrainOptions() has no setting 'gpuz'", "did you mean 'gpus'?",
                                    "a setting of the layout", "Model.train(..., gpus=...)"]),
    (lambda: TrainOptions(mfuu=0.4), ["TrainOptions() has no setting 'mfuu'", "did you mean 'mfu'?"]),
    (lambda: PlanOptions(gpuz=8), ["PlanOptions() has no setting 'gpuz'", "did you mean 'gpus'?"]),
    (lambda: InferOptions(promt=8), ["InferOptions() has no setting 'promt'", "did you mean 'prompt'?"]),
    (lambda: FitOptions(hardwre="h100-sxm"), ["FitOptions() has no setting 'hardwre'", "did you mean 'hardware'?"]),
    (lambda: LayoutOptions(zer=1), ["LayoutOptions() has no setting 'zer'", "did you mean 'zero'?"]),
    (lambda: Layout(recompte="full"), ["Layout() has no setting 'recompte'", "did you mean 'recompute'?"]),
    # a command-line habit: the flag's name for the field's keyword
    (lambda: Layout(pp=2), ["Layout() has no setting 'pp'", "did you mean 'p'?", "--pp"]),
    (lambda: costgraph.load("gpt").train(tp=2), ["train() has no setting 'tp'", "did you mean 't'?"]),
    (lambda: costgraph.load("gpt").train(no_loss=True), ["did you mean 'loss'?", "the keyword: loss=False"]),
])
def test_every_unknown_keyword_is_a_costgraph_error(make, fragments):
    # not Python's TypeError: a located message with a did-you-mean hint (the last trial found a TypeError)
    with pytest.raises(CostgraphValueError) as e:
        make()
    text = f"{e.value}\n{e.value.hint}"
    for f in fragments:
        assert f in text, text


def test_a_layout_setting_given_to_the_options_is_named_not_guessed():
    # trial4: TrainOptions(gpus=8) said "did you mean 'gpus'?" of the very name given; now where it belongs
    with pytest.raises(CostgraphValueError) as e:
        TrainOptions(gpus=8)
    assert e.value.hint.startswith("'gpus' is a setting of the layout, not of TrainOptions: Model.train(..., gpus=...)")
    assert "did you mean" not in e.value.hint


@pytest.mark.parametrize("cls", [TrainOptions, PlanOptions, InferOptions, FitOptions, LayoutOptions])
def test_every_switch_is_checked_as_one(cls):
    # a store_true/store_false option takes True or False only (option_fields.check's "flag"); Layout checks its own
    for name, (f, s) in specs(cls).items():
        if dict(s.argparse).get("action") in ("store_true", "store_false") and cls is not LayoutOptions:
            assert s.check == "flag", name


def test_the_parsed_layout_is_the_layout_of_the_keywords():
    # train_layout reads every LayoutOptions field under its dest: the command line gives the Layout the API gives
    import sympy

    from costgraph.cli import _parser
    from costgraph.commands._analysis import train_layout

    args = _parser().parse_args(["train", "gpt", "--gpus", "8", "--tp", "2", "--pp", "2", "--no-loss", "--precision",
                                 "fp32", "--recompute", "selective", "--recompute-modules", "core_attn", "mlp",
                                 "--zero", "3", "--offload-params", "cpu", "--offload-activations", "0.5",
                                 "--schedule", "interleaved", "--virtual-stages", "2", "--micro-batches", "4",
                                 "--no-fp8-wgrad", "--route-nodes", "2", "--lora", "8"])
    parsed = train_layout(args, args.micro_batches)
    assert parsed == Layout(
        gpus=8, t=2, p=2, loss=False, policy="fp32", recompute="selective",
        recompute_modules=("core_attn", "mlp"), zero=3, offload_params="cpu", offload_activations=sympy.Rational(1, 2),
        schedule="interleaved", v=2, m=4, fp8_wgrad=False, route_nodes=2, lora_rank=8)
    # the activations' precision is the layout's to derive (Layout.filled: choices.activation_precision), not the CLI's
    assert parsed.precision is None and parsed.filled().precision == "fp32"
    assert train_layout(_parser().parse_args(["train", "gpt"])) == Layout()   # every default is the API's


def test_policy_fp32_the_api_and_the_cli_agree(gpt, capsys):
    # "activation precision follows the policy" is decided once, in Layout.filled() (choices.activation_precision):
    # the API's policy="fp32" and the CLI's --precision fp32 keep fp32 activations, and their memory is the same
    v = gpt.values("gpt2")
    assert costgraph.Layout is Layout   # the package's name, beside TrainOptions (was costgraph.parallel.layout's only)
    api = gpt.train(gpus=2, t=2, policy="fp32", values=v).to_dict()
    rc, out, _ = run(capsys, "train", "gpt", "--config", "gpt2", "--gpus", "2", "--tp", "2", "--precision", "fp32",
                     "--format", "json")
    cli = json.loads(out)
    assert rc == 0 and api["plan"]["activation_precision"] == cli["plan"]["activation_precision"] == "fp32"
    assert {k: e["value"] for k, e in api["memory"].items()} == {k: e["value"] for k, e in cli["memory"].items()}
    # fp32 activations: the memory's activations are those of the layout that names fp32 explicitly, not bf16's
    from costgraph.training.memory import training_memory

    explicit = training_memory(gpt.graph, Layout(gpus=2, t=2, policy="fp32", precision="fp32")).stages[0].memory
    bf16 = training_memory(gpt.graph, Layout(gpus=2, t=2, policy="fp32", precision="bf16")).stages[0].memory
    assert api["memory"]["activations"]["value"] == explicit["activations"].xreplace(v) \
        != bf16["activations"].xreplace(v)


def test_layout_is_its_declared_fields():
    # the Layout's fields are LayoutOptions's, declared once: its defaults are the command line's
    assert [f.name for f in dataclasses.fields(Layout)] == list(specs(LayoutOptions))
    for name, (f, s) in specs(LayoutOptions).items():
        assert Layout.__dataclass_fields__[name].default == f.default, name


def test_the_api_takes_an_options_object_or_keywords(gpt):
    v = gpt.values("gpt2")
    by_keywords = gpt.train(t=2, gpus=4, values=v, megatron=True, convention="all", memory="80GB")
    opts = TrainOptions(megatron=True, convention="all")
    by_object = gpt.train(None, v, opts, t=2, gpus=4, memory="80GB")   # overrides replace the object's fields
    assert by_object.to_dict() == by_keywords.to_dict()
    assert by_object.megatron is not None and by_object.fits["capacity_bytes"] == 80 * 10**9   # both were used
    # --megatron's figures typed (costgraph.training.result_parts): three MemoryEstimates in bytes
    from costgraph.result_fields import quantities
    from costgraph.training.result_parts import MegatronBeside, MemoryEstimate

    beside = by_object.megatron
    assert type(beside) is MegatronBeside and type(beside.difference) is MemoryEstimate
    assert beside.difference.total == beside.costgraph.total - beside.megatron.total
    assert {q.unit for _, q in quantities(MemoryEstimate)} == {"bytes"}
    assert list(by_object.to_dict()["megatron"]) == ["megatron", "costgraph", "difference"]
    assert opts.memory is None   # frozen: the object given is not changed


@pytest.mark.parametrize("call, fragments", [
    (lambda m: m.train(gpus=1, hardwre="h100-sxm"), ["train() has no setting 'hardwre'", "did you mean 'hardware'?"]),
    (lambda m: m.train(tensor_paralel=2), ["no setting 'tensor_paralel'", "settings: "]),
    (lambda m: m.train(gpus=1, options={"mfu": 0.4}), ["train() takes options as a TrainOptions, not"]),
    (lambda m: m.plan(m.values("gpt2"), gpu=8, hardware="h100-sxm", global_batch=8),
     ["plan() has no setting 'gpu'", "did you mean 'gpus'?"]),
    (lambda m: m.plan(m.values("gpt2"), gpus=8), ["plan() needs hardware, global_batch"]),
    # trial4: load(..., config=NAME) sets the options only; the sizes are values=, which the hint now says
    (lambda m: m.plan(gpus=8, hardware="h100-sxm", global_batch=8), ['values=model.values("NAME")']),
    (lambda m: m.fit(gpus=8, hardware="h100-sxm"), ['values=model.values("NAME")']),
    # the checks declared on the fields, with the command line's messages (tests/test_api_checks.py has more)
    (lambda m: m.train(gpus=1, peak=-1), ["--peak must be positive"]),
    (lambda m: m.train(gpus=1, global_batch=2.5), ["'--global-batch' must be a positive whole number"]),
    (lambda m: m.train(gpus=1, convention="macs"), ["unknown convention 'macs' (FLOP convention)"]),
    (lambda m: m.train(gpus=1, router="no"), ["argument 'router' must be True or False"]),
    # trial4: the activation precision as a list was TypeError (unhashable type: 'list')
    (lambda m: m.train(gpus=1, precision=["bf16"]), ["unknown precision ['bf16']"]),
    # trial4: a string is not a switch ("no" was true: plan searched the FP8 policies)
    (lambda m: m.plan(m.values("gpt2"), gpus=8, hardware="h100-sxm", global_batch=8, allow_fp8="no"),
     ["argument 'allow_fp8' must be True or False, got 'no'"]),
    (lambda m: m.infer(m.values("gpt2"), prompt=8, generate=8, hardware="h100-sxm", activations="no"),
     ["argument 'activations' must be True or False, got 'no'"]),
])
def test_unknown_keywords_and_bad_values_are_refused(gpt, call, fragments):
    with pytest.raises(CostgraphValueError) as e:
        call(gpt)
    text = f"{e.value}\n{getattr(e.value, 'hint', '')}"
    for f in fragments:
        assert f in text, text


@pytest.mark.parametrize("name, cls", [("train", TrainOptions), ("plan", PlanOptions), ("infer", InferOptions),
                                       ("fit", FitOptions)])
def test_schema_options_are_the_fields(name, cls):
    doc = schemas.schema(name)
    props = doc["$defs"]["options"]["properties"]
    assert list(props) == list(specs(cls))
    for field, (f, s) in specs(cls).items():
        if s.values is not None:
            assert [x for x in props[field]["enum"] if x is not None] == list(s.values)
    assert doc["$defs"]["options"].get("required", []) == [n for n, (f, _) in specs(cls).items()
                                                          if f.default is dataclasses.MISSING]


@pytest.mark.parametrize("name", ["train", "fit"])
def test_schema_layout_is_the_layout_fields(name):
    props = schemas.schema(name)["$defs"]["layout"]["properties"]
    assert list(props) == list(specs(LayoutOptions))
    assert props["zero"]["enum"] == [0, 1, 2, 3] and "flag --tp" in props["t"]["description"]


def test_a_new_option_is_one_field(gpt, monkeypatch, capsys):
    # a throwaway option: one field on TrainOptions, nothing else edited
    energy = option("--energy", "the energy unit of the result", choices=("joules", "kwh"), default="joules",
                    check="choice")
    extended = dataclasses.make_dataclass("TrainOptions", [("energy", str, energy)], bases=(TrainOptions,),
                                          frozen=True)
    from costgraph.commands import _analysis, train as train_command

    for module in (train_options, train_command, _analysis):   # where the class is looked up
        monkeypatch.setattr(module, "TrainOptions", extended)
    # argparse
    action = next(a for a in _subparser("train")._actions if a.dest == "energy")
    assert action.option_strings == ["--energy"] and action.choices == ("joules", "kwh") and action.default == "joules"
    rc, out, err = run(capsys, "train", "gpt", "--config", "gpt2", "--energy", "kwh", "--format", "json")
    assert rc == 0 and json.loads(out)["memory"]
    refused(capsys, ["train", "gpt", "--energy", "watts"], "--energy", "invalid choice")
    # the API's keywords and the value check
    assert gpt.train(gpus=1, energy="kwh").layout.gpus == 1
    with pytest.raises(CostgraphValueError, match="unknown energy 'watts'"):
        gpt.train(gpus=1, energy="watts")
    with pytest.raises(CostgraphValueError) as e:
        gpt.train(gpus=1, energi="kwh")
    assert "did you mean 'energy'?" in e.value.hint
    # the schema
    prop = schemas.schema("train")["$defs"]["options"]["properties"]["energy"]
    assert prop["enum"] == ["joules", "kwh"] and prop["default"] == "joules" and "--energy" in prop["description"]


def test_infer_scopes_are_the_analysis_scopes():
    from costgraph import infer_options
    from costgraph.inference.quantized import SCOPES

    assert infer_options.SCOPES == SCOPES   # --quantized's choices, kept light for the parser


def test_fit_modes_read_the_groups(capsys):
    # fit's serving options are FitOptions' fields of group "serve", each refused without --serve by its flag
    from costgraph.commands import fit

    assert list(fit.SERVE_DEFAULTS) == [n for n, (_, s) in specs(FitOptions).items() if s.group == "serve"]
    refused(capsys, ["fit", "gpt", "--hardware", "h100-sxm", "--not-quantized", "lm_head"],
            "--not-quantized is a serving option")
    refused(capsys, ["fit", "gpt", "--hardware", "h100-sxm", "--serve", "--prompt", "8", "--generate", "8",
                     "--host-memory", "2TB"], "--host-memory is a training option")


def test_fit_takes_an_options_object(gpt):
    # issue 31 item 1: costgraph.fit and Model.fit take a FitOptions like train, plan and infer (at most 6 parameters)
    import inspect

    from costgraph.verdict import fit

    v = gpt.values("gpt2")
    by_keywords = costgraph.fit(gpt, values=v, hardware="h100-sxm", gpus=2, zero=1, recompute="full")
    by_object = gpt.fit(v, FitOptions(hardware="h100-sxm", gpus=2), None, zero=1, recompute="full")
    assert by_object.to_dict() == by_keywords.to_dict() and "ZeRO 1; recompute full" in by_object.settings["layout"]
    serve = gpt.fit(v, FitOptions(mode="serve", hardware="h100-sxm", prompt=64, generate=8), batch=4)
    assert serve.to_dict() == costgraph.fit(gpt, v, mode="serve", hardware="h100-sxm", prompt=64, generate=8,
                                            batch=4).to_dict()
    assert len(inspect.signature(fit).parameters) <= 6 and len(inspect.signature(type(gpt).fit).parameters) <= 6
    # and Model.train, .infer, .plan (self, [layout,] values, options, **overrides): 36 keywords once for infer
    assert {n: list(inspect.signature(getattr(type(gpt), n)).parameters) for n in ("train", "infer", "plan")} == {
        "train": ["self", "layout", "values", "options", "overrides"],
        "infer": ["self", "values", "options", "overrides"], "plan": ["self", "values", "options", "overrides"]}
    with pytest.raises(CostgraphValueError) as e:
        gpt.fit(v, hardware="h100-sxm", zeroo=1)
    assert "fit() has no setting 'zeroo'" in str(e.value) and "did you mean 'zero'?" in e.value.hint


def test_infer_takes_an_options_object(gpt):
    v = gpt.values("gpt2")
    by_keywords = gpt.infer(values=v, prompt=64, generate=8, batch=2, kv="fp8")
    by_object = gpt.infer(v, InferOptions(prompt=64, generate=8, kv="fp8"), batch=2)
    assert by_object.to_dict() == by_keywords.to_dict()
    with pytest.raises(CostgraphValueError) as e:
        gpt.infer(v, prompt=64, generate=8, batchh=2)
    assert "infer() has no setting 'batchh'" in str(e.value) and "did you mean 'batch'?" in e.value.hint
    with pytest.raises(CostgraphValueError, match="infer\\(\\) needs generate"):
        gpt.infer(v, prompt=64)


def test_declarations_name_known_checks():
    with pytest.raises(AssertionError, match="unknown check"):
        option_fields.option("--x", "x", default=None, check="between")


def test_a_new_searched_option_is_one_field(monkeypatch, capsys):
    # issue 27 item 2: a throwaway layout setting with a search domain, declared as LayoutOptions declares its
    # fields (one field, its Domain beside it), and nothing else edited: it is on train's command line, in the
    # keyword check, in the schema's way of writing it and in the planner's search space (searched / not searched)
    from costgraph import options
    from costgraph.commands import _analysis
    from costgraph.option_fields import Domain, keywords_checked

    warm = option("--warmup-kernels", "a throwaway setting: kernels warmed before the step", default="cold",
                  choices=("cold", "warm"), domain=Domain("variant", lambda s: ("cold", "warm") if s.exhaustive
                                                          else ("cold",), "cold only; --exhaustive searches it",
                                                          {"group": "warmup"}))
    extended = keywords_checked()(dataclasses.make_dataclass("LayoutOptions", [("warmup", str, warm)],
                                                             bases=(LayoutOptions,)))
    # argparse: train's layout arguments run to the last field
    monkeypatch.setattr(_analysis, "LayoutOptions", extended)
    action = next(a for a in _subparser("train")._actions if a.dest == "warmup")
    assert action.option_strings == ["--warmup-kernels"] and action.choices == ("cold", "warm")
    refused(capsys, ["train", "gpt", "--warmup-kernels", "hot"], "--warmup-kernels", "invalid choice")
    # the keyword check
    assert extended(warmup="warm").warmup == "warm"
    with pytest.raises(CostgraphValueError) as e:
        extended(warmpu="warm")
    assert "did you mean 'warmup'?" in e.value.hint
    # the schema
    prop = option_fields.json_schema(extended)["properties"]["warmup"]
    assert prop["enum"] == ["cold", "warm"] and "--warmup-kernels" in prop["description"]
    # the planner's search space: generated by the one function the planner reads its domains through
    monkeypatch.setattr(options, "TRAIN_OPTIONS", options.search_options(extended))
    for name, value in zip(("BY_FIELD", "SEARCHED_OPTIONS", "VARIANT_OPTIONS"), options.views(options.TRAIN_OPTIONS)):
        monkeypatch.setattr(options, name, value)
    base, everything = options.Space(gpus=8, max_tp=8, layers=12), options.Space(gpus=8, max_tp=8, layers=12,
                                                                                 exhaustive=True)
    assert "warmup" not in options.searched(base) and options.not_searched(base)["warmup"] == "cold only; " \
        "--exhaustive searches it"
    assert options.searched(everything)["warmup"] == ["cold", "warm"] and "warmup" not in options.not_searched(everything)
    assert {"warmup": "warm", "requires": {}} in options.variants(everything)


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="argparse's layout of --help differs between Pythons")
@pytest.mark.parametrize("command", ["train", "plan", "fit", "solve"])
def test_help_is_byte_identical_to_the_hand_written_parsers(command, capsys, monkeypatch):
    # the --help printed before the arguments were generated from the fields (tests/help_pins/README.md)
    monkeypatch.setenv("COLUMNS", "100")
    rc, out, err = run(capsys, command, "--help")
    want = (Path(__file__).parent / "help_pins" / f"{command}.txt").read_text(encoding="utf-8")
    assert rc == 0 and out == want
