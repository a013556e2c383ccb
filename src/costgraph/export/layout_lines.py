"""The lines of ``costgraph train``'s report that name the layout's settings away from their defaults (each named
with its default): the expert placement (:mod:`costgraph.parallel.ranks`), the FP8 options, the loss, the CP
exchange, the GEMM rate, ZeRO-3's gathered parameters and the recompute FLOP count (:mod:`.training_report`)."""

from __future__ import annotations

from ..choices import CROSS_ENTROPY
from ..engine.symbols import as_expr


def _expert_placement_line(L) -> str | None:
    """``expert placement: …`` when a placement setting is not its default (costgraph.parallel.ranks)."""
    from ..parallel.ranks import DEFAULT_ORDER

    parts = ([f"rank order {L.rank_order}"] if L.rank_order != DEFAULT_ORDER else []) + \
        ([f"{L.domain_ranks} ranks per scale-up domain"] if L.domain_ranks is not None else []) + \
        ([f"EP all-to-all overlap {L.ep_overlap}"] if L.ep_overlap != "none" else []) + \
        ([f"each token to at most {L.route_nodes} domains"] if L.route_nodes is not None else [])
    return "expert placement: " + "; ".join(parts) if parts else None


def _options_lines(L) -> list[str]:
    """The FP8 options under an FP8 policy, and the recompute FLOP count when a policy re-runs
    something (each named with its default)."""
    from ..choices import CP_COMM_TYPE, RECOMPUTE_COUNT, ZERO3_GATHERED
    from ..training.fp8 import policy_recipe

    out = []
    rec = policy_recipe(L.policy)
    if rec is not None:   # torchao keeps no transpose buffer whatever --fp8-transpose says (training.fp8)
        out.append("FP8 options: dot-product attention " + ("in FP8 (--fp8-dot-product-attention)" if L.fp8_attention
                                                           else "in BF16 (default)")
                   + "; weight gradients " + ("in FP8 (default)" if L.fp8_wgrad else "in BF16 (--no-fp8-wgrad)")
                   + ("; weight transpose none (torchao's Float8Linear keeps no transpose buffer)"
                      if rec.weight_cache != "step" else
                      f"; weight transpose {L.fp8_transpose} (--fp8-transpose; default auto: from the preset)"))
    if L.loss and L.cross_entropy != CROSS_ENTROPY.default:   # the default named in the header line
        out.append(f"loss: --cross-entropy {L.cross_entropy} ({CROSS_ENTROPY.meaning(L.cross_entropy)})")
    c = as_expr(L.c)
    if c == 1:   # as the other settings' lines, where it applies: at cp 1 no K and V are exchanged
        if L.cp_comm_type != CP_COMM_TYPE.default:
            out.append(f"CP communication: --cp-comm-type {L.cp_comm_type} does not apply (cp 1: no context "
                       "parallelism, no K and V exchanged)")
    elif L.cp_comm_type != CP_COMM_TYPE.default or c.is_Integer:   # how CP exchanges K and V (cp > 1)
        out.append(f"CP communication: --cp-comm-type {L.cp_comm_type}"
                   + (" (default)" if L.cp_comm_type == CP_COMM_TYPE.default else "")
                   + f" ({CP_COMM_TYPE.meaning(L.cp_comm_type)})")
    if L.zero >= 3:   # what ZeRO-3 holds gathered, the default (auto) named
        g = L.resolved("zero3_gathered")
        out.append(f"ZeRO-3 gathered: --zero3-gathered {g}" + (" (default)" if L.zero3_gathered == "auto" else "")
                   + f" ({ZERO3_GATHERED.meaning(g)})")
    if L.recompute != "none":
        out.append(f"hardware FLOPs count the re-run as: {L.recompute_count}"
                   + (" (default)" if L.recompute_count == RECOMPUTE_COUNT.default else "")
                   + f" ({RECOMPUTE_COUNT.meaning(L.recompute_count)})")
    return out
