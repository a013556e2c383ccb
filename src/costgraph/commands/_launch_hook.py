"""``--launch FILE`` of ``train``, ``plan``, ``fit`` and ``infer``: the one hook that fills the parsed
arguments from a launch file (:func:`costgraph.launch.read_launch`), and the lines that say so.

* :func:`add_argument` adds ``--launch`` to a subcommand's parser; MODEL and the options a file
  can give (``plan``'s ``--gpus`` and ``--global-batch``) become optional there, and are checked
  after the file is read (:func:`apply`): still missing, they are refused as argparse would.
* :func:`apply` (called once by :mod:`costgraph.cli` on the parsed namespace): each value of the
  file fills its option (by ``dest``) where the command line left the parser's default; one the
  command line gives differently is refused (exit 2, both places named); dimension values and model
  options join ``--set`` (a name the command line sets differently: refused); the model and its
  configuration fill MODEL and ``--config`` (a Megatron-LM script's or torchtitan flavor's model that
  differs from MODEL is refused; a serving line's model id yields to MODEL, noted). A training file
  given to ``infer`` or ``fit --serve``, or a serving line given to ``train``, is refused.
* :func:`render` adds what came from the file to the command's output: a ``launch:`` block before
  the text report, a ``"launch"`` object in the JSON.

Light at import (the readers are imported when a file is given).
"""

from __future__ import annotations

from ..errors import CostgraphValueError
from ..hints import them

#: the options a launch file may give that a parser declares required (checked after the file is read)
_FILLABLE = ("gpus", "global_batch")
#: the unknown entries the text report lists one a line (the rest counted)
_SHOWN = 8
#: the serving degrees fit --serve has no form for (a value other than 1 is refused)
_SERVE_NONE = ("pp", "ep", "dp_attention")
#: options that exclude each other (train's m = B / (b·d)): one from the file, the other from the command line
_EXCLUSIVE = {"global_batch": "micro_batches", "micro_batches": "global_batch"}
#: what a command does not take from a file, and why
_DROPPED = {"plan": {"set b": "plan chooses the micro-batch b itself"},
            "infer": {"set b": "--batch sets b", "set s": "--prompt and --generate set s"}}
_NAMES = {"megatron": "Megatron-LM script", "torchtitan": "torchtitan job file", "deepspeed": "DeepSpeed config",
          "accelerate": "accelerate config", "vllm": "vLLM serve line", "sglang": "SGLang launch line"}


def add_argument(p, serving: bool = False) -> None:
    """``--launch FILE`` on parser ``p``; MODEL (and ``--gpus``/``--global-batch`` where required) optional."""
    what = ("a vllm serve or SGLang launch line (a script or the command)" if serving else
            "a Megatron-LM launch script, a torchtitan job TOML, a DeepSpeed config JSON or an accelerate config YAML")
    p.add_argument("--launch", metavar="FILE",
                   help=f"read the configuration you already run: {what}; its values fill the options not given "
                        "here (a different value given here is refused); the file is read, never run")
    relaxed = []
    for a in p._actions:
        if a.dest == "model" and not a.option_strings and a.nargs is None:
            a.nargs, a.required = "?", False
            relaxed.append("model")
        elif a.dest in _FILLABLE and a.required:
            a.required = False
            relaxed.append(a.dest)
    p.set_defaults(launch_required=tuple(relaxed))


def subparser(parser, command: str):
    """The parser of subcommand ``command`` under the top-level ``parser``."""
    import argparse

    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a.choices[command]
    raise KeyError(command)


def apply(args, parser, command: str, argv: list | None = None) -> None:
    """Fill ``args`` of subcommand ``command`` from ``--launch`` (module docstring); with no file,
    check what :func:`add_argument` made optional. Sets ``args.launch_report`` (or None). ``argv``: the
    words parsed, so that an option written at its default value (``--tp 1``) still counts as given.

    Raises
    ------
    CostgraphValueError
        The file is unreadable or refused by its reader; a value differs from the command line's; the
        file's kind does not serve the command; MODEL or a required option still missing."""
    args.launch_report = None
    if not hasattr(args, "launch"):
        return
    sub = subparser(parser, command)
    if args.launch is not None:
        from ..launch import SERVING, read_launch

        launch = read_launch(args.launch, gpus=getattr(args, "gpus", None))
        serving = command == "infer" or (command == "fit" and getattr(args, "serve", False))
        if (launch.kind in SERVING) != serving:
            want = "a vllm serve or SGLang line" if serving else "a training launch file"
            raise CostgraphValueError(f"--launch {args.launch}: a {_NAMES[launch.kind]}, but {command}"
                                      f"{' --serve' if command == 'fit' and serving else ''} reads {want}",
                                      hint="costgraph infer / fit --serve take serving lines; train, plan, fit "
                                           "take training files")
        taken, unused = _model(args, launch, command), []
        taken += _dims(args, launch, command, unused)
        written = {w.split("=", 1)[0] for w in (argv or []) if isinstance(w, str) and w.startswith("-")}
        taken += _options(args, sub, launch, command, unused, written)
        args.launch_report = {**launch.to_dict(), "taken": taken, "not_used": unused}
        _devices_of_the_batch(args, launch)
        if command != "plan":   # plan searches b and the degrees itself
            _batch_divides(args, launch)
    missing = [d for d in getattr(args, "launch_required", ()) if getattr(args, d, None) is None
               and not (d == "model" and command == "train")]
    if missing:
        flags = ["MODEL" if d == "model" else "--" + d.replace("_", "-") for d in missing]
        raise CostgraphValueError(f"the following arguments are required: {', '.join(flags)}",
                                  hint=f"give {them(flags)}, or a --launch file that holds {them(flags)}")


def _devices_of_the_batch(args, launch) -> None:
    """A global batch from the file needs the devices of the run: without ``--gpus`` (or a launcher
    that holds the grid) refused here, where the file's line and its launcher's note can be named
    (trial6: train_gpt3_175b_distributed.sh said only "--global-batch needs --gpus")."""
    origin = launch.origins.get("global_batch")
    if origin is None or getattr(args, "gpus", None) is not None or "gpus" not in vars(args):
        return
    why = [n.split(":", 1)[0] for n in launch.notes if "cannot hold" in n]
    raise CostgraphValueError(f"the global batch of {origin.where} ({origin.text}) needs the devices of the run"
                              + (f"; {why[0]}" if why else ""),
                              hint="give --gpus N: t × p × c × d devices for a whole data-parallel degree d")


def _batch_divides(args, launch) -> None:
    """The file's global batch B, taken, must be a multiple of b·d (the micro-batch from ``--set b=`` or the
    file, d = gpus / (t·p·c) once the command line is known): refused at the file's line and column, where
    train's own check could name neither (Megatron-LM asserts it too: core/num_microbatches_calculator.py
    @ d98e8a64, "global batch size (..) is not divisible by micro batch size (..) times data parallel size").
    Nothing is checked when a figure is missing or the devices do not divide (train says so)."""
    from ..arguments import digits
    from ..launch.text import located

    origin, batch = launch.origins.get("global_batch"), getattr(args, "global_batch", None)
    if origin is None or batch != launch.values.get("global_batch") or ":" not in origin.where:
        return
    sizes = [p.split("=", 1)[1] for p in getattr(args, "set", None) or [] if p.startswith("b=")]
    b = sizes[-1] if sizes else launch.dims.get("b")
    gpus, per = getattr(args, "gpus", None), 1
    for dest in ("tp", "pp", "cp"):
        per *= getattr(args, dest, 1) or 1
    if not (isinstance(b, int) or digits(str(b))) or not isinstance(gpus, int) or gpus <= 0 or gpus % per:
        return
    b, d = int(b), gpus // per
    if b <= 0 or batch % (b * d) == 0:
        return
    path, line = origin.where.rsplit(":", 1)
    step, low = b * d, batch - batch % (b * d)
    raise located(f"the global batch {batch} ({origin.text}) is not a multiple of micro-batch × data-parallel "
                  f"degree = {b} × {d} = {step} (--gpus {gpus} over t·p·c = {per})", path, launch.text,
                  int(line) if line.isdigit() else 1, word=origin.text.split()[0] if origin.text else None,
                  hint=f"a global batch of {' or '.join(map(str, ([low] if low else []) + [low + step]))} (a whole "
                       "number of micro-batches per data-parallel rank), or other --gpus")


def _model(args, launch, command: str) -> list:
    if launch.model is None:
        return []
    if args.model is None:
        _bundled_id(launch)
        mine = getattr(args, "config", None)
        if launch.config is not None and mine not in (None, launch.config):   # it read the file's, ran the line's
            raise CostgraphValueError(f"--config {mine} on the command line, but {launch.path} is model {launch.model} "
                                      f"--config {launch.config}" + (f" ({launch.origins['model'].where})"
                                                                     if "model" in launch.origins else ""),
                                      hint="drop --config (the file gives it), or the --launch file")
        args.model = args.model_given = launch.model
        if launch.config is not None and mine is None:
            args.config = launch.config
        return ["model"] + (["config"] if launch.config else [])
    if launch.kind in ("vllm", "sglang"):
        launch.notes.append(f"MODEL {args.model} from the command line (the line serves {launch.model})")
        return []
    if args.model != launch.model or (launch.config and args.config not in (None, launch.config)):
        raise CostgraphValueError(f"MODEL {args.model}{f' --config {args.config}' if args.config else ''} on the "
                                  f"command line, but {launch.path} is model {launch.model}"
                                  f"{f' --config {launch.config}' if launch.config else ''}",
                                  hint="drop MODEL (the file gives it), or the --launch file")
    if launch.config and args.config is None:
        args.config = launch.config
        return ["config"]
    return []


def _bundled_id(launch) -> None:
    """A serving line's model id that names a bundled configuration (``vllm serve gpt2``) read as that model
    and configuration (``gpt --config gpt2``), noted; any other id stays a Hub id or a path."""
    if launch.kind not in ("vllm", "sglang") or launch.config is not None:
        return
    from ..language.loader import configuration_owner

    owner = configuration_owner(launch.model)
    if owner is not None:
        launch.notes[:] = [n for n in launch.notes if not n.startswith(f"model {launch.model}: a Hub id")]
        launch.notes.append(f"model {launch.model}: the bundled {owner} --config {launch.model}")
        launch.model, launch.config = owner, launch.model


def _dims(args, launch, command: str, unused: list) -> list:
    if not hasattr(args, "set"):
        return []
    given = {p.split("=", 1)[0]: p.split("=", 1)[1] for p in args.set if "=" in p}
    _against_config(args, launch, command)
    taken = []
    for pair in launch.set_pairs():
        name, value = pair.split("=", 1)
        why = _DROPPED.get(command, {}).get(f"set {name}")
        if why:
            unused.append(f"{name}={value}: {why}")
            continue
        if name in given:
            if given[name] != value:
                raise CostgraphValueError(f"--set {name}={given[name]} on the command line, but {launch.path} gives "
                                          f"{name}={value} ({launch.origins[f'set {name}']})",
                                          hint="give it in one place: drop it from --set or from the file")
            continue
        args.set.append(pair)
        taken.append(f"set {name}")
    return taken


def _against_config(args, launch, command: str) -> None:
    """The file's dimension values against ``--config``'s, where the command line names a configuration
    the file does not: a model size that differs (``--config gpt2``'s ``l=12`` against a GPT-3 175B script's
    ``--num-layers 96``) is refused, both places named; the file's micro-batch and sequence length (``b``,
    ``s``: sizes of the run, which ``--set`` overrides in a configuration as well) win, noted. Sizes the file
    does not give (a Megatron script's vocabulary) come from the configuration."""
    mine = getattr(args, "config", None)
    if mine is None or mine == launch.config or not launch.dims or args.model is None:
        return
    from ..errors import CostgraphError
    from ..model import load

    try:
        config = load(args.model).configs.get(mine)
    except CostgraphError:   # the command refuses the model itself, located
        return
    if config is None:
        return
    differ = {k: v for k, v in launch.dims.items() if k in config and config[k] != v}
    run = {k: differ.pop(k) for k in ("b", "s") if k in differ}   # not noted where the command drops them
    run = {k: v for k, v in run.items() if f"set {k}" not in _DROPPED.get(command, {})}
    if differ:
        shown = "; ".join(f"{k}={config[k]} against {v} ({launch.origins[f'set {k}']})" for k, v in differ.items())
        raise CostgraphValueError(f"--config {mine} on the command line contradicts {launch.path}: {shown}",
                                  hint="drop --config (the file gives the model's sizes; --set NAME=N gives one it "
                                       "lacks), or name a configuration the file agrees with")
    if "V" in config and "V" not in launch.dims:   # the reader's note that the file lacks the vocabulary
        launch.notes[:] = [n for n in launch.notes if not n.startswith("V: the file gives no")]
        launch.notes.append(f"V={config['V']} from --config {mine} (the file gives no --vocab-size)")
    for k, v in run.items():
        launch.notes.append(f"{k}={v} from the file over --config {mine}'s {k}={config[k]} "
                            f"({launch.origins[f'set {k}']})")


def _options(args, sub, launch, command: str, unused: list, written: set = frozenset()) -> list:
    actions = {a.dest: a for a in sub._actions}
    taken = []
    if command == "fit" and "gpu_memory_utilization" in launch.values:   # fit's reserve: 1 - the runtime's share
        from ..arguments import ascii_number

        try:
            ascii_number(launch.values["gpu_memory_utilization"], "--gpu-memory-utilization")
        except CostgraphValueError as e:   # named as the file writes it, where it does
            raise CostgraphValueError(f"{launch.origins['gpu_memory_utilization'].where}: {e.message}",
                                      hint=e.hint) from None
        launch.values["reserve"] = _complement(launch.values.pop("gpu_memory_utilization"))
        launch.origins["reserve"] = launch.origins.pop("gpu_memory_utilization")
    for dest, value in list(launch.values.items()):
        if command == "fit" and dest in _SERVE_NONE and getattr(args, "serve", False):
            if value != 1:
                raise CostgraphValueError(f"{launch.origins[dest]}: fit --serve judges one replica "
                                          f"of tensor parallelism only, not {dest} {value}",
                                          hint="costgraph infer --launch FILE takes it (--pp, --ep)")
            continue
        if dest not in actions or not hasattr(args, dest):
            unused.append(f"{dest}={value}: " + (f"{command} takes the default --cross-entropy" if dest ==
                                                 "cross_entropy" else "plan searches the layout" if command == "plan"
                                                 else f"not an option of {command}"))
            continue
        action, mine = actions[dest], getattr(args, dest)
        flag = action.option_strings[0] if action.option_strings else dest
        if action.choices is not None and value not in action.choices:
            raise CostgraphValueError(f"{launch.origins[dest]} gives {flag} {value}, which {command} "
                                      f"does not take", hint="choices: " + ", ".join(map(str, action.choices)))
        given = bool(written & set(action.option_strings))
        _exclusive(args, actions, launch, dest, taken)
        if mine is None or (_same(mine, action.default) and not given):   # the parser's default: the file's
            setattr(args, dest, list(value) if isinstance(value, (list, tuple)) else value)
            taken.append(dest)
            continue
        if _same(mine, value):   # the command line gives it too, the same
            continue
        if dest in launch.weak:
            launch.notes.append(f"{flag} {_shown(mine)} from the command line ({launch.origins[dest]} gives {_shown(value)})")
            continue
        raise CostgraphValueError(f"{flag} {_shown(mine)} on the command line, but {launch.path} gives "
                                  f"{_shown(value)} ({launch.origins[dest]})",
                                  hint="give it in one place: drop the option or edit the file")
    return taken


def _exclusive(args, actions, launch, dest: str, taken: list) -> None:
    """Refuse the file's ``dest`` where the command line gives the option it excludes (``--micro-batches``
    with a file's global batch, ``--global-batch`` with a file's accumulation steps): both places named."""
    other = _EXCLUSIVE.get(dest)
    if other is None or other in taken or other not in actions or getattr(args, other, None) is None:
        return
    flag = actions[other].option_strings[0]
    raise CostgraphValueError(f"{flag} {_shown(getattr(args, other))} on the command line, but {launch.path} gives "
                              f"{actions[dest].option_strings[0]} {_shown(launch.values[dest])} "
                              f"({launch.origins[dest]}), and the two exclude each other",
                              hint=f"give one of them: drop {flag} or edit the file")


def _complement(text: str) -> str:
    """``1 - text`` of a decimal share (``0.85`` → ``0.15``), exactly; the text itself if it is none."""
    from decimal import Decimal, InvalidOperation

    if not isinstance(text, str) or not text.isascii():   # Decimal reads '０.８５': left to --reserve's ASCII rule
        return text
    try:
        d = Decimal(text)
    except (InvalidOperation, ValueError):
        return text
    return str(Decimal(1) - d) if d.is_finite() and 0 < d <= 1 else text


def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return a == b or (a is not None and b is not None and str(a) == str(b))


def _shown(v) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return " ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def render(args, out):
    """The command's output ``out`` (text, JSON text, or ``(text, status)``) with what the launch file gave."""
    report = getattr(args, "launch_report", None)
    if report is None:
        return out
    if isinstance(out, tuple):
        return (render(args, out[0]), *out[1:])
    if not isinstance(out, str):
        return out
    if getattr(args, "format", "text") == "json":
        import json

        data = json.loads(out)
        if isinstance(data, dict):
            data["launch"] = report
            return json.dumps(data, indent=2, ensure_ascii=False)
        return out
    return "\n".join(lines(report)) + "\n\n" + out


def lines(report: dict) -> list[str]:
    """The ``launch:`` block of the text report: the file, what was taken from it and from where, what
    was ignored, not known or not used, and the notes."""
    out = [f"launch: {report['file']} ({_NAMES[report['kind']]})"]
    origins = report["from"]
    for key in report["taken"]:
        if key in ("model", "config"):
            out.append(f"  {key} {report[key]}" + (f"  <- {origins[key]['where']} ({origins[key]['text']})"
                                                     if key in origins else ""))
            continue
        value = report["set"][key[4:]] if key.startswith("set ") else report["options"][key]
        o = origins.get(key)
        shown = f"--set {key[4:]}={str(value).lower() if isinstance(value, bool) else value}" if key.startswith("set ") \
            else f"{key} {_shown(value)}"
        out.append(f"  {shown}  <- {o['where']} ({o['text']})" if o else f"  {shown}")
    if report["ignored"]:
        names = [i.split(" (")[0] for i in report["ignored"]]
        out.append(f"  ignored (no cost): {len(names)}: {', '.join(names[:8])}{', ...' if len(names) > 8 else ''}")
    for u in report["unknown"][:_SHOWN]:
        out.append(f"  warning: unknown, not taken: {u}")
    if len(report["unknown"]) > _SHOWN:   # a file of many (200,000 tables) printed a line each
        out.append(f"  warning: {len(report['unknown']) - _SHOWN:,} more unknown, not taken (--format json lists them)")
    for u in report["not_used"]:
        out.append(f"  not used: {u}")
    for n in report["notes"]:
        out.append(f"  note: {n}")
    return out
