"""Training compute per iteration, utilization and time — an analysis over the graph.

Conventions (named in every output):

* **Model FLOPs** per iteration: forward + backward of the model (input and
  weight gradients) for the global batch of ``B = b·m·d`` sequences (the
  micro-batch ``b``, ``m`` micro-batches per step, ``d`` data-parallel
  replicas), under a FLOP convention (``matmul``: 2 per multiply-add of a
  matrix product, Megatron/PaLM/FlopCounterMode; ``all``) and a causal
  convention (``full`` square, or ``half``). ``router=False`` leaves out the
  MoE router's linear, as Megatron-LM's FLOP count does (a linear whose
  output has one entry per expert of a ``repeat E as ... active k`` group).
* **Hardware FLOPs**: model FLOPs plus the forward FLOPs of what the
  recomputation policy re-runs (:func:`costgraph.engine.recompute.recompute_plan`,
  the same description the activation memory reads) — ``full``: one more
  forward of the layers (the top-level repeat groups; the head and
  embeddings are not recomputed), of the checkpointed share of them with
  ``recompute_method = block``; ``selective`` (Megatron ``core_attn``): the
  forward of QKᵀ, scale, softmax, dropout and probs·V; ``selective-korthikanti``:
  without probs·V; ``flash`` attention recomputes the core up to the softmax
  in its backward (each op counted once). That is the ``rerun`` count
  (``recompute_count``); ``korthikanti-eq8`` counts a selectively re-run
  attention core as its forward + backward, Korthikanti et al. 2022 Eq. 8
  (:mod:`costgraph.training.recompute_count`). For GPT with
  full recomputation this is Narayanan et al. 2021 Eq. 3,
  ``96 B s l h² (1 + s/6h + V/16lh)`` (tested).
* **Per device**: divided evenly by the ``t·p·c·d`` devices (expert
  parallelism does not change the count; pipeline bubbles are time, not FLOPs).
* **Rules of thumb** per token: ``6N`` (no recomputation) and ``8N`` (full),
  with ``N`` all parameters or the non-embedding ones (Kaplan et al. 2020),
  shown beside the exact count with the difference; for a mixture of
  experts also ``6 N_active`` (the parameters a token passes through).
* **MFU / HFU** (Chowdhery et al. 2022, PaLM App. B): model (hardware) FLOPs
  per second over ``n × peak``.
* **Time**: from an assumed MFU ``u`` — ``step = model FLOPs / (n · peak · u)``
  — or from achieved FLOP/s per device ``X`` (hardware FLOPs, as Narayanan §5.1)
  — ``step = hardware FLOPs / (n · X)``; days to train on ``D`` tokens
  (``D / (B s)`` steps), GPU-hours, cost, PF-days (10¹⁵ FLOP/s × 1 day).
"""

from __future__ import annotations

import sympy


from ..choices import CAUSAL, CONVENTION
from ..engine.recompute import recompute_plan
from .lora_flops import lora_compute
from .recompute_count import recompute_flops
from ..parallel.placement import expert_groups
from ..parallel.tensor import sequence_dims
from ..engine.graph import CostGraph
from ..ops.registry import has_role
from ..engine.precision import precision as get_precision
from ..engine.symbols import as_expr
from ..engine.totals import MODEL_SCOPE, breakdown, expand_sum
from ..result_fields import quantities
from .result_parts import TrainingCompute, TrainingFlops, TrainingTime

SECONDS_PER_DAY = 86400
PF_DAY = 10**15 * SECONDS_PER_DAY

#: The quantities of ``costgraph train``'s compute sections by their JSON name (unit and label): read from
#: the fields that declare them once (:class:`~costgraph.training.result_parts.TrainingFlops`,
#: :class:`~costgraph.training.result_parts.TrainingTime`, MFU and HFU of ``TrainingCompute``);
#: ``tests/export/test_results_render.py`` holds the train schema's names of ``flops`` and ``time`` to them.
FLOPS = {q.json: q for _, q in quantities(TrainingFlops)}
TIME = {q.json: q for _, q in quantities(TrainingTime)}
RATIOS = {q.json: q for n, q in quantities(TrainingCompute) if n in ("mfu", "hfu")}


def routers(cg: CostGraph) -> set[str]:
    """Paths of MoE router linears: an operator of role ``router`` (linear)
    whose output has one entry per expert of a group with fewer active copies
    than copies."""
    counts = [g.count for g in expert_groups(cg).values()]
    out = set()
    for path, d in cg.ops():
        if has_role(d["kind"], "router") and d["outputs"]:
            last = cg.tensors[d["outputs"][0]].shape[-1]
            if any(sympy.expand(last - c) == 0 for c in counts):
                out.add(path)
    return out


def training_flops(cg: CostGraph, layout, *, convention: str = CONVENTION.default, causal: str = CAUSAL.default,
                   router: bool = True) -> dict[str, sympy.Expr]:
    """FLOPs of one training iteration (module docstring). ``layout``: a
    filled :class:`~costgraph.parallel.layout.Layout`.

    Returns ``model_per_micro_batch``, ``model_per_iteration``,
    ``hardware_per_iteration``, ``recompute_per_iteration``, ``per_token``
    (model FLOPs per token), ``model_per_device``, ``hardware_per_device``,
    ``tokens_per_iteration``, ``global_batch`` (sequences), and the rules of
    thumb ``six_n``, ``eight_n``, ``six_n_non_embedding`` (per token).
    With ``layout.lora_rank``: the trainable-aware count of
    :mod:`costgraph.training.lora_flops` (model FLOPs), QLoRA's
    dequantization in the hardware FLOPs, ``lora`` (rank, targets,
    trainable parameters, conventions) and ``four_n`` (``4N``: a frozen
    base's forward and input gradients per token).
    """
    rows = breakdown(cg, MODEL_SCOPE, convention, get_precision("bf16"), causal, leaves_only=True)
    skip = routers(cg) if not router else set()
    rows = [r for r in rows if r["path"] not in skip]
    per_mb = expand_sum([r["count"] * (r["flops_forward"] + r["flops_backward"]) for r in rows])
    plan = recompute_plan(cg, layout, layout.attention)   # what re-runs: the same plan as the memory's
    # counted under layout.recompute_count (rerun, or Korthikanti et al. 2022 Eq. 8)
    recompute_mb = expand_sum(list(recompute_flops(cg, layout, rows, plan).values()))
    lora = None
    if getattr(layout, "lora_rank", None) is not None:   # a frozen base and its adapters
        lora = lora_compute(cg, layout, rows, convention, plan.rerun)
        per_mb = lora["model"]
        recompute_mb = expand_sum([recompute_mb, lora["recompute"], lora["dequant"]])
    b = cg.dims["b"].symbol if "b" in cg.dims else sympy.Integer(1)
    seq = (sequence_dims(cg) or [sympy.Integer(1)])[0]   # tokens per sequence
    replicas = as_expr(layout.m) * as_expr(layout.d)
    n = as_expr(layout.t) * as_expr(layout.p) * as_expr(layout.c) * as_expr(layout.d)
    model_it = sympy.expand(per_mb * replicas)
    hw_it = sympy.expand((per_mb + recompute_mb) * replicas)
    tokens = sympy.expand(b * seq * replicas)
    params = expand_sum([r["count"] * r["params"] for r in breakdown(cg, MODEL_SCOPE, convention, get_precision("bf16"),
                                                                    causal, leaves_only=True)])
    embed = expand_sum([r["count"] * r["params"] for r in rows
                        if r["kind"] != "storage" and has_role(cg.nodes[r["path"]]["kind"], "embedding")])
    return {
        "model_per_micro_batch": per_mb,
        "model_per_iteration": model_it,
        "hardware_per_iteration": hw_it,
        "recompute_per_iteration": sympy.expand(recompute_mb * replicas),
        "per_token": _per_token(cg, model_it, tokens),
        "model_per_device": sympy.expand(model_it / n),
        "hardware_per_device": sympy.expand(hw_it / n),
        "tokens_per_iteration": tokens,
        "global_batch": sympy.expand(b * replicas),
        "six_n": 6 * params,
        "eight_n": 8 * params,
        "six_n_non_embedding": sympy.expand(6 * (params - embed)),
        "six_n_active": 6 * expand_sum([r["count"] * r["params_active"] for r in rows]),
        **({} if lora is None else {"lora": lora["info"], "four_n": 4 * params}),
    }




def utilization(flops: dict, *, devices, peak, step_seconds) -> dict[str, sympy.Expr]:
    """MFU and HFU (PaLM App. B) for a measured step time: FLOPs per second
    over ``devices × peak`` (peak in FLOP/s per device)."""
    denom = as_expr(devices) * as_expr(peak) * step_seconds
    return {"mfu": flops["model_per_iteration"] / denom, "hfu": flops["hardware_per_iteration"] / denom}


def training_time(flops: dict, *, devices, peak=None, mfu=None, achieved=None, tokens=None,
                  price_per_gpu_hour=None) -> dict[str, sympy.Expr]:
    """Step time and the cost of training on ``tokens`` tokens.

    Give ``mfu`` (with ``peak``, FLOP/s per device): ``step = model FLOPs /
    (n · peak · mfu)``; or ``achieved`` (hardware FLOP/s per device):
    ``step = hardware FLOPs / (n · achieved)``. Returns ``step_seconds`` and,
    with ``tokens``: ``steps``, ``train_seconds``, ``train_days``,
    ``gpu_hours``, ``pf_days`` (model FLOPs), and ``cost`` with a price.
    ``mfu``, ``achieved`` and prices are exact rationals (``Rational(45, 100)``).
    """
    n = as_expr(devices)
    if achieved is not None:
        step = flops["hardware_per_iteration"] / (n * achieved)
    else:
        step = flops["model_per_iteration"] / (n * as_expr(peak) * mfu)
    out = {"step_seconds": step}
    if tokens is not None:
        steps = as_expr(tokens) / flops["tokens_per_iteration"]
        secs = steps * step
        out.update(steps=steps, train_seconds=secs, train_days=secs / SECONDS_PER_DAY, gpu_hours=n * secs / 3600,
                   pf_days=steps * flops["model_per_iteration"] / PF_DAY)
        if price_per_gpu_hour is not None:
            out["cost"] = out["gpu_hours"] * price_per_gpu_hour
    return out


def rule_of_thumb_time(params, tokens, devices, achieved, *, recompute: bool = True) -> sympy.Expr:
    """The seeds' and Narayanan et al.'s ``8TP/(nX)`` seconds (``6TP/(nX)``
    without recomputation): ``T`` tokens, ``P`` parameters, ``n`` devices,
    ``X`` achieved FLOP/s per device (or peak × utilization)."""
    return (8 if recompute else 6) * as_expr(tokens) * as_expr(params) / (as_expr(devices) * achieved)


__all__ = ["training_flops", "utilization", "training_time", "rule_of_thumb_time", "routers"]


def compute_summary(cg: CostGraph, layout, *, peak=None, mfu=None, achieved=None, tokens=None, price=None,
                    convention: str = CONVENTION.default, causal: str = CAUSAL.default, router: bool = True) -> dict:
    """The ``flops``, ``time``, ``mfu`` and ``hfu`` sections of ``costgraph
    train`` (SymPy expressions; ``flops`` a :class:`~costgraph.training.result_parts.TrainingFlops`,
    ``time`` a :class:`~costgraph.training.result_parts.TrainingTime`; sections without their inputs are left out):
    ``flops`` always; ``time`` with ``mfu`` (and ``peak``) or ``achieved``;
    ``mfu``/``hfu`` when both a rate and ``peak`` are known (an assumed MFU
    gives HFU = MFU × hardware/model FLOPs; achieved FLOP/s give HFU =
    achieved/peak)."""
    f = training_flops(cg, layout, convention=convention, causal=causal, router=router)
    n = as_expr(layout.t) * as_expr(layout.p) * as_expr(layout.c) * as_expr(layout.d)
    flops = TrainingFlops(**{k: f[k] for k in ("model_per_iteration", "hardware_per_iteration", "per_token",
                                               "model_per_device", "hardware_per_device", "six_n", "eight_n",
                                               "six_n_non_embedding")},
                          # a mixture of experts: 6 × the parameters a token passes through
                          six_n_active=f["six_n_active"] if f["six_n_active"] != f["six_n"] else None,
                          four_n=f.get("four_n"),   # LoRA on: 4N beside 6N
                          per_token_minus_six_n=sympy.expand(f["per_token"] - f["six_n"]))
    out = {"flops": flops}
    if "lora" in f:   # LoRA on: its targets, trainable count and the FLOP convention
        out["lora"] = f["lora"]
    if mfu is not None and peak is None:
        return out
    if mfu is not None or achieved is not None:
        out["time"] = TrainingTime(**training_time(f, devices=n, peak=peak, mfu=mfu, achieved=achieved, tokens=tokens,
                                                   price_per_gpu_hour=price))
        ratio = f["hardware_per_iteration"] / f["model_per_iteration"]
        if mfu is not None:
            out["mfu"], out["hfu"] = mfu, sympy.cancel(mfu * ratio)
        elif peak is not None:
            out["hfu"] = achieved / as_expr(peak)
            out["mfu"] = sympy.cancel(out["hfu"] / ratio)
    return out


def _per_token(cg: CostGraph, model_it: sympy.Expr, tokens: sympy.Expr) -> sympy.Expr:
    """``cancel(model_it / tokens)``: model FLOPs per token, once per graph and pair of expressions (the
    planner derives the FLOPs of dozens of layouts whose ``m·d`` — the one layout factor of both — is the same
    symbols or numbers; SymPy's cancel of the long sums is ~10 ms each)."""
    store = cg.memo("flops_per_token")
    key = (model_it, tokens)
    if key not in store:
        store[key] = sympy.cancel(model_it / tokens)
    return store[key]
