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
"""

from __future__ import annotations

import sys
import time
import warnings
from collections import defaultdict


def cause(draft=None, error: Exception | None = None) -> str:
    if error is not None:
        text = str(error)
        if "cannot build" in text or "refuses the probe configuration" in text:   # the second: api's wording
            return "build"                                                        # since 97424fc (dots3_note)
        if "fails on the meta device" in text:
            return "trace"
        if type(error).__name__.startswith("Costgraph"):
            return "language"
        return "trace"
    if draft.todos:
        return "todo"
    return "differs"


def builds_in_transformers(model_type: str) -> bool:
    """Whether transformers builds the default config of ``model_type`` and its causal LM on the meta device (bfloat16,
    eager attention, as :func:`costgraph.drafting.api._build` does), without costgraph's probes."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.for_model(model_type)
        with torch.device("meta"):
            AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="eager")
    except Exception:  # noqa: BLE001 - any failure of transformers' own: not a type the drafter is measured on
        return False
    return True


def main(argv: list[str]) -> int:
    warnings.filterwarnings("ignore")
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from costgraph.drafting.api import draft_model

    types = argv or sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
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
