"""The cases of the fuzz campaign (``bench/bench_fuzz.py``), drawn with Hypothesis: an argument
list of a subcommand (``tests/cli_props.py``), a mutated model file or config (``tests/fuzz_inputs.py``),
hostile files (symbolic links to a secret, ``-o`` onto a file the run reads), or an API call; and the
CPU-time limit a case runs under. Imported as ``bench.fuzz_cases`` (the checkout's root on the path)."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECRET = "s3cr3t-7f1c2a9e-never-printed"
FILE_SECRET = "f1le-s3cret-55e0b2-never-printed"
KINDS = ["flags"] * 5 + ["model", "config", "api"] + ["files"] * 2
#: values an API argument is drawn from: plausible, out of range, of the wrong type
API_VALUES = [1, 2, 4, 8, 0, -1, 3, 10**30, 0.5, 1 / 3, float("nan"), float("inf"), -0.0, "2", "1e400", "", None,
              True, [], {}, "h100-sxm", "a100-80gb-sxm", "bogus", 2**63, "\uff11\uff16", "\u00b2", "16\u00a0"]
#: what a launch file's numbers are replaced by (hostile files, ``launch``): other scripts' digits ('²'.isdigit()
#: is true and int('²') fails), out of range, not numbers
LAUNCH_VALUES = ["\u00b2", "\uff18", "\u0668", "0", "-1", "1e400", "9" * 30, "nan", "", "3", "7", "1.5", "$X", "$(( 1/0 ))"]


# --- the time limit ---------------------------------------------------------------------

class TooSlow(BaseException):
    """Raised by the timer (a BaseException: the CLI's ``except Exception`` does not take it)."""


def _alarm(signum, frame):
    raise TooSlow("cpu" if signum == signal.SIGPROF else "wall")


@contextlib.contextmanager
def cpu_limit(limit: float):
    old = signal.signal(signal.SIGPROF, _alarm), signal.signal(signal.SIGALRM, _alarm)
    # re-armed every second after the limit: a TooSlow raised inside a callback that swallows it (the
    # garbage collector's, "Exception ignored in ...") is raised again (seed 10012 ran 278 s of CPU so)
    signal.setitimer(signal.ITIMER_PROF, limit, 1.0)
    signal.setitimer(signal.ITIMER_REAL, 10 * limit, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, old[0])
        signal.signal(signal.SIGALRM, old[1])


# --- the cases -----------------------------------------------------------------------------

def draw_api(data) -> tuple[str, str, dict]:
    """An API call: a bundled model, ``train``, ``infer``, ``plan`` or ``evaluate``, and arguments
    drawn from :data:`API_VALUES` (names the method takes, and one it does not)."""
    import tests.cli_props as P
    from hypothesis import strategies as st

    name = data.draw(st.sampled_from(P.MODEL_NAMES), label="model")
    method = data.draw(st.sampled_from(["train", "infer", "plan", "evaluate"]), label="method")
    names = api_keywords()[method] + ["no_such_argument"]
    kwargs = data.draw(st.dictionaries(st.sampled_from(names), st.sampled_from(API_VALUES), max_size=5), label="kwargs")
    return name, method, kwargs


def api_keywords() -> dict[str, list[str]]:
    """The keywords of ``Model.train``, ``infer`` and ``plan``: every field of their options dataclasses (and the
    Layout's, for train), as the API takes them; ``evaluate``'s: dimension names and ``config``. From the
    declarations, so a new option is drawn without listing it (issue 30: ``infer(compute_efficiency=None)`` was
    an AttributeError the hand-written list never drew)."""
    import dataclasses

    from costgraph.infer_options import InferOptions
    from costgraph.layout_options import LayoutOptions
    from costgraph.train_options import PlanOptions, TrainOptions

    def fields(*classes):
        return sorted({f.name for c in classes for f in dataclasses.fields(c)} - {"command"})
    return {"train": fields(TrainOptions, LayoutOptions), "infer": fields(InferOptions), "plan": fields(PlanOptions),
            "evaluate": ["b", "s", "h", "l", "a", "V", "kv", "config"]}


def run_api(call: tuple[str, str, dict], limit: float) -> dict:
    """An API case (:func:`draw_api`): the call must return, or raise costgraph's own error (a
    :class:`~costgraph.CostgraphError`) or, for a name the method does not take, Python's
    ``TypeError``; anything else is ``internal``."""
    import tests.cli_props as P

    import costgraph

    name, method, kwargs = call

    argv = [f"api:{name}.{method}", repr(kwargs)]
    findings, t0 = [], time.process_time()
    try:
        with cpu_limit(limit):
            model = costgraph.load(name)
            config = (P.CONFIGS.get(name) or [None])[0]
            values = model.values(config) if config else None
            if method == "evaluate":
                model.costs().evaluate(**kwargs)
            elif method == "plan":
                model.plan(values, **{"gpus": 8, "hardware": "h100-sxm", "global_batch": 8, **kwargs})
            elif method == "infer":
                model.infer(**{"prompt": 16, "generate": 4, "values": values, **kwargs})
            else:
                model.train(values=values, **kwargs)
    except TooSlow as e:
        findings.append(("slow", f"over {limit} s of {e}"))
    except costgraph.CostgraphError:
        pass
    except TypeError as e:
        if "no_such_argument" not in str(e):
            findings.append(("internal", f"TypeError: {e}"[:600]))
    except Exception as e:   # noqa: BLE001 (what the campaign looks for)
        findings.append(("internal", f"{type(e).__name__}: {e}"[:600]))
    return {"argv": argv, "status": None, "cpu": round(time.process_time() - t0, 3), "findings": findings}


def _hostile_files(data, work: Path, spec: dict) -> tuple[list[str], set[str]]:
    """A hostile-file case in ``work``: its argv and the files it may change."""
    import tests.cli_props as P
    from hypothesis import strategies as st

    secret = work / "secret.txt"
    kind = data.draw(st.sampled_from(["link-plain", "link-json", "hub-link", "o-import", "o-model", "o-config",
                                      "launch"]), label="files")
    if kind == "launch":
        return _hostile_launch(data, work), set()
    if kind.startswith("link") or kind == "hub-link":
        secret.write_text(FILE_SECRET + "\n" if kind == "link-plain" else
                          json.dumps({"model_type": FILE_SECRET, "hidden_size": FILE_SECRET}), encoding="utf-8")
        if kind == "hub-link":
            snap = work / "hub" / "models--org--name" / "snapshots" / ("0" * 40)
            snap.mkdir(parents=True)
            (work / "hub" / "models--org--name" / "refs").mkdir()
            (work / "hub" / "models--org--name" / "refs" / "main").write_text("0" * 40)
            folder = snap
        else:
            folder = work / "ckpt"
            folder.mkdir()
        (folder / "config.json").symlink_to(secret)
        model = data.draw(st.sampled_from([str(folder), str(folder / "config.json")]), label="model")
    else:
        # m.cg: GPT with its MLP block imported from blocks.cg (models/std/mlp.cg) beside it
        shutil.copy(ROOT / "models" / "std" / "mlp.cg", work / "blocks.cg")
        gpt = (ROOT / "models" / "gpt.cg").read_text(encoding="utf-8")
        (work / "m.cg").write_text(gpt.replace('import "std/mlp.cg"', 'import "blocks.cg"'), encoding="utf-8")
        shutil.copy(ROOT / "examples" / "hf" / "llama-3-8b.json", work / "config.json")
        model = {"o-import": "m.cg", "o-model": "m.cg", "o-config": "config.json"}[kind]
    if kind.startswith("o-"):   # MODEL is the file; -o names it, or what it imports, with --force
        writers = [c for c in sorted(spec) if any(a.flag == "-o" for a in spec[c])
                   and any(a.flag is None and a.dest == "model" for a in spec[c])]
        command = data.draw(st.sampled_from(writers), label="command")
        target = {"o-import": "blocks.cg", "o-model": "m.cg", "o-config": "config.json"}[kind]
        extra = {"codegen": ["--lang", "python"], "sweep": ["--over", "b=1,2"], "plot": ["--kind", "flops"],
                 "report": ["--format", "md"], "graph": ["--format", "dot"]}.get(command, [])
        config = ["--config", "gpt2"] if model == "m.cg" else []   # m.cg is GPT: its configurations
        return [command, model, *config, *extra, "-o", target, "--force"], set()
    command = data.draw(st.sampled_from([c for c in ("derive", "codegen", "report", "graph", "sweep", "plot",
                                                     "train", "infer", "web") if c in spec]), label="command")
    argv = data.draw(P.argv_for(command, spec[command], model), label="argv")
    return argv, outputs(argv)


def _hostile_launch(data, work: Path) -> list[str]:
    """A launch file of examples/launch/ with one to three of its numbers replaced (:data:`LAUNCH_VALUES`),
    written in ``work``, read by ``train`` or ``fit`` (a serving line: ``infer`` or ``fit --serve``), with or
    without ``--gpus``: the readers must refuse it with a located message, never fail inside."""
    import re

    import tests.cli_props as P
    from hypothesis import strategies as st

    src = Path(data.draw(st.sampled_from(P.LAUNCH_FILES), label="launch file"))
    text = src.read_text(encoding="utf-8")
    number = re.compile(r"(?<![\w.])[0-9]+(?![\w.])")
    for _ in range(data.draw(st.integers(1, 3), label="replaced")):
        spans = [m.span() for m in number.finditer(text)]
        if not spans:
            break
        start, end = data.draw(st.sampled_from(spans), label="number")
        text = text[:start] + data.draw(st.sampled_from(LAUNCH_VALUES), label="value") + text[end:]
    target = work / src.name
    target.write_text(text, encoding="utf-8")
    serving = "vllm" in src.name or "sglang" in src.name
    command = data.draw(st.sampled_from(["infer", "fit"] if serving else ["train", "fit"]), label="command")
    argv = [command, "--launch", str(target)] + (["--serve"] if serving and command == "fit" else [])
    if data.draw(st.booleans(), label="--gpus?"):
        argv += ["--gpus", data.draw(st.sampled_from(["8", "64", "1024", "3"]), label="gpus")]
    if command == "fit":
        argv += ["--hardware", "h100-sxm"]
    return argv


def outputs(argv: list[str]) -> set[str]:
    """The files an argument list names to ``-o`` (a run may replace them with ``--force``
    when it did not read them)."""
    return {argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-o", "--output")}


def draw_case(data, spec: dict, work: Path, models: Path, kind: str | None = None) \
        -> tuple[str, list[str], set[str], object]:
    """One case (of ``kind``, or a kind drawn: :data:`KINDS`): (kind, argv, files it may change,
    an undo callable or None)."""
    import tests.cli_props as P
    import tests.fuzz_inputs as F
    from hypothesis import strategies as st

    kind = kind or data.draw(st.sampled_from(KINDS), label="kind")
    model_commands = [c for c, args in spec.items() if any(a.flag is None and a.dest == "model" for a in args)]
    shutil.copy(ROOT / "models" / "gpt.cg", work / "model.cg")
    undo = None
    if kind == "flags":
        command = data.draw(st.sampled_from(sorted(spec)), label="command")
        argv = data.draw(P.argv_for(command, spec[command]), label="argv")
    elif kind == "model":
        rel = data.draw(st.sampled_from([r for r in F.SOURCES if "/" not in r]), label="file")
        target = models / rel
        target.write_text(F.mutate_model_text(data, F.TEXTS[rel]), encoding="utf-8")
        undo = lambda: target.write_text(F.TEXTS[rel], encoding="utf-8")   # noqa: E731
        command = data.draw(st.sampled_from(model_commands), label="command")
        argv = data.draw(P.argv_for(command, spec[command], str(target)), label="argv")
    elif kind == "config":
        name = data.draw(st.sampled_from(sorted(F.CONFIGS)), label="config")
        (work / "config.json").write_text(F.to_json_text(F.mutate_config(data, F.CONFIGS[name])), encoding="utf-8")
        command = data.draw(st.sampled_from(model_commands), label="command")
        argv = data.draw(P.argv_for(command, spec[command], str(work / "config.json")), label="argv")
    else:
        argv, may = _hostile_files(data, work, spec)
        return kind, argv, may, undo
    return kind, argv, outputs(argv) - ({"config.json"} if kind == "config" else set()), undo
