"""Benchmark: the reach of `costgraph import` (issue 28) over the causal LMs of the pinned transformers.

Run:  python bench/bench_import_reach.py [MODEL_TYPE ...]   (needs the torch extra; about 100 s of CPU, 96 s
      measured, for every type of transformers 5.24's AutoModelForCausalLM mapping on a 2-core machine)

For every model_type (default: every key of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``) the default config of
its class is drafted by :func:`costgraph.drafting.api.draft_model` and checked at both probes (parameters
and forward FLOPs against ``sum(p.numel())`` and ``FlopCounterMode``, the second probe the same file).
Prints one line per type (EXACT, or why not), then the failures grouped by cause and the count exact.
The causes: ``todo`` (a module no std block reads, left as a TODO), ``differs`` (recognised, yet a
count differs from PyTorch's, or the two probes drafted other files), ``build`` (transformers cannot
build the config or the model at a probe configuration: sizes whose relations the probe does not know,
nested sub-configs), ``trace`` (the meta forward fails), ``language`` (the draft does not load).

Issue 28 measures reach over the types "whose config class builds on meta": a type that fails is checked once more
without costgraph (:func:`builds_in_transformers`: its default config and model built by transformers on the meta
device, as the drafter builds them). Where transformers itself cannot (a default config with a field left None, a
sub-config without a field the model reads, a validator, a missing optional library), the type's cause is
``transformers`` and it is left out of the second figure. A model that builds but whose forward fails on meta (data-
dependent routing, a defective default such as DeepSeek-V2's top-k None) stays in: the drafter's to answer.

``--mapping base`` (issue 28 item 2) walks the types of ``MODEL_MAPPING_NAMES`` (AutoModel) that the causal mapping
lacks (429 in transformers 5.24), drafts each type's AutoModel class (its base model: no head) and classifies it
into a kind by the auto mappings it appears in (:func:`kind_of`: speech, multimodal, encoder-decoder, vision,
encoder, decoder, other, in that order of precedence; then sub-models by suffix, then the forward's inputs). A
failing type's cause says first what input its forward wants where it takes no token ids (``input:pixel_values``,
``input:input_values``, ...: the drafter traces token ids alone), then ``decoder-inputs`` (an encoder-decoder whose
forward fails without ``decoder_input_ids``), ``timeout`` (the ``--timeout`` seconds of CPU per type ran out), else
the causes above. ``--kinds vision speech ...`` keeps those kinds alone.

Run:  python bench/bench_import_reach.py --mapping base [MODEL_TYPE ...] [--kinds KIND ...] [--timeout S]
(the types before ``--kinds``, whose list takes every word after it)
(242 s of CPU, 5 min 18 s wall, measured for the 429 types of transformers 5.24 on a loaded 2-core machine: 53 of the
391 types transformers builds on meta exact; docs/import.md, Reach, gives the counts by kind and cause).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections import defaultdict


def cause(draft=None, error: Exception | None = None) -> str:
    if error is not None:
        text = str(error)
        if "cannot build" in text or "refuses the probe configuration" in text:   # a validator's refusal (dots3)
            return "build"
        if "fails on the meta device" in text:
            return "trace"
        if type(error).__name__.startswith("Costgraph"):
            return "language"
        return "trace"
    if draft.todos:
        return "todo"
    return "differs"


def builds_in_transformers(model_type: str, auto: str = "AutoModelForCausalLM") -> bool:
    """Whether transformers builds the default config of ``model_type`` and its causal LM (``auto``: the Auto class,
    ``AutoModel`` for the base mapping) on the meta device (bfloat16, eager attention, as
    :func:`costgraph.drafting.api._build` does), without costgraph's probes."""
    import torch
    import transformers
    from transformers import AutoConfig

    try:
        config = AutoConfig.for_model(model_type)
        with torch.device("meta"):
            getattr(transformers, auto).from_config(config, dtype=torch.bfloat16, attn_implementation="eager")
    except Exception:  # noqa: BLE001 - any failure of transformers' own: not a type the drafter is measured on
        return False
    return True


#: (kind, the auto mappings whose types are of that kind), first match wins: a speech seq2seq model (Whisper) is
#: speech, a vision-language wrapper (in the image-text-to-text mapping) is multimodal before it is vision
KINDS = (
    ("speech", ("CTC", "AUDIO_CLASSIFICATION", "AUDIO_FRAME_CLASSIFICATION", "AUDIO_XVECTOR", "SPEECH_SEQ_2_SEQ",
                "RNNT", "TDT", "TEXT_TO_SPECTROGRAM", "TEXT_TO_WAVEFORM")),
    ("multimodal", ("IMAGE_TEXT_TO_TEXT", "MULTIMODAL_LM", "VISUAL_QUESTION_ANSWERING", "DOCUMENT_QUESTION_ANSWERING",
                    "ZERO_SHOT_IMAGE_CLASSIFICATION", "ZERO_SHOT_OBJECT_DETECTION", "RETRIEVAL")),
    ("encoder-decoder", ("SEQ_TO_SEQ_CAUSAL_LM",)),
    ("vision", ("IMAGE_CLASSIFICATION", "IMAGE", "MASKED_IMAGE_MODELING", "BACKBONE", "OBJECT_DETECTION",
                "IMAGE_SEGMENTATION", "SEMANTIC_SEGMENTATION", "INSTANCE_SEGMENTATION", "UNIVERSAL_SEGMENTATION",
                "DEPTH_ESTIMATION", "VIDEO_CLASSIFICATION", "KEYPOINT_DETECTION", "KEYPOINT_MATCHING",
                "IMAGE_TO_IMAGE", "IMAGE_MATTING", "MASK_GENERATION", "NORMAL_ESTIMATION", "POSE_ESTIMATION",
                "POINTMAP_ESTIMATION", "CAUSAL_IMAGE_MODELING", "TABLE_RECOGNITION", "TEXT_RECOGNITION")),
    ("encoder", ("MASKED_LM", "TEXT_ENCODING", "SEQUENCE_CLASSIFICATION", "TOKEN_CLASSIFICATION",
                 "QUESTION_ANSWERING", "MULTIPLE_CHOICE", "NEXT_SENTENCE_PREDICTION")),
    ("decoder", ("CAUSAL_LM",)),
)
#: the kinds ``--kinds`` accepts
KIND_NAMES = (*(k for k, _ in KINDS), "other")
#: the largest --timeout (CPU seconds): signal.setitimer overflows far above it
MAX_TIMEOUT = 1e6
#: the command line, in each refusal's hint
USAGE = ("bench_import_reach.py [--mapping causal|base] [MODEL_TYPE ...] [--kinds KIND ...] [--timeout S] "
         "(--kinds and --timeout with --mapping base)")
#: the inputs a base model's forward may want in place of token ids, in the order they are looked for
INPUTS = ("pixel_values", "input_values", "input_features", "past_values", "pixel_values_videos", "inputs_embeds")


#: (suffix, kind) of the sub-models a multimodal wrapper's config holds, registered as types of their own
#: (``qwen2_5_omni_text``, ``siglip_vision_model``, ``kimi_audio_encoder``): the text model of a multimodal or causal
#: type is a decoder (CLIP's ``clip_text_model``, an encoder, is not one), a vision or audio tower its modality's
SUFFIXES = (("_text", "decoder"), ("_vision_model", "vision"), ("_vision", "vision"),
            ("_audio_encoder", "speech"), ("_audio", "speech"))


def kind_of(model_type: str) -> str:
    """The kind of ``model_type``: the first of :data:`KINDS` one of whose auto mappings (transformers'
    ``MODEL_FOR_<NAME>_MAPPING_NAMES``, modeling_auto.py) holds it; else, for a sub-model named by a
    :data:`SUFFIXES` suffix whose parent type (the name before it) is a known type, the suffix's kind (a ``_text``
    sub-model a decoder only where its parent is multimodal or causal); else ``encoder-decoder`` where the default
    config says ``is_encoder_decoder``; else ``other`` (time series, decision transformers, a type with no head
    mapping)."""
    from transformers.models.auto import modeling_auto

    def mapped(t: str) -> str | None:
        for kind, names in KINDS:
            for n in names:
                if t in getattr(modeling_auto, f"MODEL_FOR_{n}_MAPPING_NAMES", {}):
                    return kind
        return None

    kind = mapped(model_type)
    if kind not in (None, "encoder"):
        return kind
    for suffix, sub in SUFFIXES:
        parent = model_type[: -len(suffix)]
        if model_type.endswith(suffix) and parent in modeling_auto.MODEL_MAPPING_NAMES:
            if sub != "decoder" or mapped(parent) in ("multimodal", "decoder") \
                    or parent in modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
                return sub
    if kind is not None:
        return kind
    try:
        from transformers import AutoConfig

        if getattr(AutoConfig.for_model(model_type), "is_encoder_decoder", False) is True:
            return "encoder-decoder"
    except Exception:  # noqa: BLE001 - a default config transformers cannot build: no kind of its own
        pass
    wants = _inputs(base_class(model_type))
    tokens, pixels = "input_ids" in wants, "pixel_values" in wants or "pixel_values_videos" in wants
    audio = "input_values" in wants or "input_features" in wants
    if tokens and (pixels or audio):
        return "multimodal"      # a dual encoder (CLAP, GroupViT, FLAVA): tokens beside images or sound
    return "vision" if pixels else "speech" if audio else "other"


def _inputs(class_name: str) -> set[str]:
    """The parameter names of ``class_name``'s forward (empty where transformers cannot give the class)."""
    import inspect

    import transformers

    try:
        return set(inspect.signature(getattr(transformers, class_name).forward).parameters)
    except (AttributeError, TypeError, ValueError, ImportError):
        return set()


def base_class(model_type: str) -> str:
    """The AutoModel class name of ``model_type`` (the first where the mapping names several: Funnel's)."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    name = MODEL_MAPPING_NAMES[model_type]
    return name[0] if isinstance(name, (tuple, list)) else name


def input_cause(class_name: str, why: str) -> str:
    """A base model's cause refined by its forward's inputs: ``input:NAME`` where the forward takes no
    ``input_ids`` (NAME its first of :data:`INPUTS`, else its first required parameter: Qwen's vision towers'
    ``hidden_states``, patches already cut), ``decoder-inputs`` where a traced encoder-decoder failed."""
    import inspect

    import transformers

    try:
        params = inspect.signature(getattr(transformers, class_name).forward).parameters
    except (AttributeError, TypeError, ValueError, ImportError):
        return why
    if "input_ids" not in params:
        required = [n for n, q in params.items() if n != "self" and q.default is q.empty
                    and q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD, q.KEYWORD_ONLY)]
        return "input:" + next((n for n in INPUTS if n in params), required[0] if required else "other")
    if why == "trace" and "decoder_input_ids" in params:
        return "decoder-inputs"
    return why


class _Timeout(BaseException):
    """A type's CPU seconds ran out: a BaseException, so that no ``except Exception`` of the drafter's (its words for
    transformers' refusals) takes it for a failure of the model's."""


def _limited(seconds: float, fn):
    """``fn()`` with at most ``seconds`` of CPU (``signal.setitimer(ITIMER_PROF)``, POSIX), :class:`_Timeout` after."""
    import signal

    def stop(signum, frame):
        raise _Timeout(f"more than {seconds:g} s of CPU")

    old = signal.signal(signal.SIGPROF, stop)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


def main_base(args) -> int:
    """``--mapping base``: the AutoModel types the causal mapping lacks, counted by kind (``args`` of
    :func:`parse_args`)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES

    from costgraph.drafting.api import draft_model

    from transformers.utils import logging

    logging.set_verbosity_error()    # the probe configs' token-id warnings, one a type: not the bench's output
    types = args.types or sorted(t for t in MODEL_MAPPING_NAMES if t not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    kinds = {t: kind_of(t) for t in types}
    types = [t for t in types if kinds[t] in args.kinds]
    failures: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    exact: dict[str, int] = defaultdict(int)
    exact_names: dict[str, list[str]] = defaultdict(list)
    total: dict[str, int] = defaultdict(int)
    for t in types:
        t0 = time.process_time()
        cls = base_class(t)
        try:
            d = _limited(args.timeout, lambda: draft_model(cls))
            why = None if d.exact else cause(d)
            note = "" if d.exact else "; ".join(d.warnings)[:160]
            if d.model_type != t:   # the class's config is another type's (MLCD's vision model): not this type
                why, note = "other-type", f"{cls} drafts model_type {d.model_type}"
        except _Timeout as e:
            why, note = "timeout", str(e)
        except Exception as e:  # noqa: BLE001 - a bench reports every failure and goes on
            why, note = cause(error=e), f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        if why is not None and why != "timeout" and not builds_in_transformers(t, "AutoModel"):
            why = "transformers"
        if why not in (None, "transformers", "timeout", "other-type"):
            why = input_cause(cls, why)
        total[kinds[t]] += 1
        exact[kinds[t]] += why is None
        if why is None:
            exact_names[kinds[t]].append(t)
        else:
            failures[kinds[t]][why].append(t)
        print(f"{t:28s} {kinds[t]:15s} {time.process_time() - t0:6.1f}s CPU  "
              f"{'EXACT' if why is None else why.upper()}  {note}", flush=True)
    print()
    for kind in KIND_NAMES:
        if not total[kind]:
            continue
        built = total[kind] - len(failures[kind].get("transformers", []))
        print(f"{kind}: exact {exact[kind]} of {total[kind]}; of the {built} transformers builds on meta: "
              f"{100 * exact[kind] / max(built, 1):.1f}%")
        if exact_names[kind]:
            print(f"  exact ({exact[kind]}): {', '.join(exact_names[kind])}")
        for why, names in sorted(failures[kind].items(), key=lambda kv: (-len(kv[1]), kv[0])):
            print(f"  {why} ({len(names)}): {', '.join(names)}")
    n, e = sum(total.values()), sum(exact.values())
    built = n - sum(len(f.get("transformers", [])) for f in failures.values())
    print(f"exact: {e} of {n} model types; {e} of the {built} types whose default config transformers builds on "
          f"meta ({100 * e / max(built, 1):.1f}%)")
    return 0


class Refusal(Exception):
    """A refused command line: the flag, what was expected, a hint (printed by :func:`main`, exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):   # argparse's own refusals (an unknown flag, a bad choice) as ours
        raise Refusal(f"{message}\nhint: {USAGE}")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_TIMEOUT:   # NaN compares false; setitimer overflows time_t far above the cap
        raise argparse.ArgumentTypeError(f"expected CPU seconds above 0 and at most {MAX_TIMEOUT:g}, got {text!r} "
                                         "(e.g. --timeout 60)")
    return value


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line: ``--mapping`` (causal, default, or base), the model types (each a key of that mapping),
    ``--kinds`` and ``--timeout`` (``--mapping base`` only). Raises :class:`Refusal` (flag, expected, hint)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    parser = _Parser(prog="bench_import_reach.py", add_help=False)
    parser.add_argument("--mapping", choices=("causal", "base"), default="causal")
    parser.add_argument("--kinds", nargs="+", choices=KIND_NAMES, default=None, metavar="KIND")
    parser.add_argument("--timeout", type=_seconds, default=None, metavar="S")
    parser.add_argument("types", nargs="*", metavar="MODEL_TYPE")
    args = parser.parse_args(argv)
    if args.mapping == "causal":
        for flag, value in (("--kinds", args.kinds), ("--timeout", args.timeout)):
            if value is not None:
                raise Refusal(f"{flag}: the causal mapping has no kinds nor per-type timeout\n"
                              f"hint: {flag} goes with --mapping base; {USAGE}")
    # the causal walk drafts any type transformers configures; the base walk needs the type's AutoModel class
    known = CONFIG_MAPPING_NAMES if args.mapping == "causal" else MODEL_MAPPING_NAMES
    for t in args.types:
        if t not in known:
            raise Refusal(f"MODEL_TYPE: {t!r} is no model type of transformers' "
                          f"{'CONFIG_MAPPING_NAMES' if args.mapping == 'causal' else 'AutoModel mapping'}\n"
                          f"hint: a model_type such as {next(iter(sorted(known)))!r}, or none for every type; {USAGE}")
    args.kinds = list(KIND_NAMES) if args.kinds is None else args.kinds
    args.timeout = 60.0 if args.timeout is None else args.timeout
    return args


def main(argv: list[str]) -> int:
    warnings.filterwarnings("ignore")
    try:
        args = parse_args(argv)
    except Refusal as e:
        print(f"bench_import_reach.py: error: {e}", file=sys.stderr)
        return 2
    if args.mapping == "base":
        return main_base(args)
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from costgraph.drafting.api import draft_model

    types = args.types or sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    failures: dict[str, list[str]] = defaultdict(list)
    exact = 0
    for t in types:
        t0 = time.process_time()
        try:
            d = draft_model(t)
            why = None if d.exact else cause(d)
            note = "" if d.exact else "; ".join(d.warnings)[:160]
        except Exception as e:  # noqa: BLE001 - a bench reports every failure and goes on
            why, note = cause(error=e), f"{type(e).__name__}: {str(e)[:160]}"
        if why is not None and not builds_in_transformers(t):
            why = "transformers"
        exact += why is None
        if why is not None:
            failures[why].append(t)
        print(f"{t:28s} {time.process_time() - t0:6.1f}s CPU  {'EXACT' if why is None else why.upper()}  {note}",
              flush=True)
    print()
    for why, names in sorted(failures.items(), key=lambda kv: -len(kv[1])):
        print(f"{why} ({len(names)}): {', '.join(names)}")
    print(f"exact: {exact} of {len(types)} model types")
    measured = len(types) - len(failures.get("transformers", []))
    print(f"exact: {exact} of the {measured} types whose default config transformers builds on meta "
          f"({100 * exact / max(measured, 1):.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
