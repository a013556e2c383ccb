"""Megatron-LM's FLOP count of one global batch, as a named reference beside costgraph's own.

A transcription of ``num_floating_point_operations`` → ``transformer_flops`` of
``megatron/training/training.py`` of NVIDIA/Megatron-LM at commit
``d98e8a64ddf34856e74b24714e3bedb2f5a39553`` (:data:`MEGATRON_COMMIT`; the
``# l.`` numbers below are of that file), arithmetic for arithmetic, in exact
SymPy, for the standard (non-hybrid, softmax-attention) Transformer in the BSHD
layout (every sample ``seq_length`` tokens: ``seqlen_squared_sum = B·s²``,
``total_real_tokens = B·s``). Its conventions, as they differ from costgraph's
``matmul`` count with ``--causal half`` and the router left out:

* MLA's query and key/value low-rank norms count ``+1`` per rank entry
  (``q_lora_rank·(... + 1)``, ``kv_lora_rank·(... + 1)``): ``6·(r_q + r_kv)``
  FLOPs per token per layer that costgraph's matmul convention does not count;
* multi-token prediction (``mtp_num_layers`` = D) counts each depth as one more
  layer (MoE when the main model's last layer is MoE), ``6·D·(3h + 2h²)``
  per token for its norms (``3h``: enorm, hnorm, final norm) and ``eh_proj``
  (``2h²``), and the output head ``D + 1`` times;
* the MoE router's ``h·E`` matmul is not counted; the causal mask halves the
  ``QKᵀ`` and ``scores·V`` terms.

The model's arguments come from :func:`costgraph.training.megatron.megatron_args`
(the family mapping ``megatron_args.toml``).
"""

from __future__ import annotations

import sympy

from ..engine.symbols import as_expr
from ..errors import CostgraphValueError
from .megatron import MEGATRON_COMMIT, MEGATRON_REPO, megatron_args

MEGATRON_FLOPS_FILE = "megatron/training/training.py"
__all__ = ["MEGATRON_COMMIT", "MEGATRON_REPO", "MEGATRON_FLOPS_FILE", "transformer_flops", "megatron_flops"]


def _layer_split(args):
    """l. 1015–1049: dense and MoE layer counts, MTP depths added as layers of the last layer's kind."""
    if args.num_experts is None:                                                           # l. 1015-1021
        num_dense_layers, num_moe_layers, num_experts_routed_to, last_layer_is_moe = args.num_layers, 0, 0, 0
    else:                                                                                  # l. 1022-1040
        freq = args.moe_layer_freq
        if isinstance(freq, list):
            pattern = list(freq)
            n = as_expr(args.num_layers)
            if not (n.is_Integer and len(pattern) == int(n)):
                raise CostgraphValueError(f"moe_layer_freq has {len(pattern)} entries for {n} layers")
            num_moe_layers, last_layer_is_moe = sum(pattern), pattern[-1]
        elif freq == 1:
            num_moe_layers, last_layer_is_moe = args.num_layers, 1
        else:
            n = as_expr(args.num_layers)
            if not n.is_Integer:
                raise CostgraphValueError("Megatron's FLOPs branch on num_layers (moe_layer_freq ≠ 1); give it a number")
            pattern = [1 if i % freq == 0 else 0 for i in range(int(n))]
            num_moe_layers, last_layer_is_moe = sum(pattern), pattern[-1]
        num_dense_layers = args.num_layers - num_moe_layers
        num_experts_routed_to = args.moe_router_topk
    if args.mtp_num_layers is not None:                                                   # l. 1042-1049
        mtp_num_layers = args.mtp_num_layers
        num_moe_layers += last_layer_is_moe * mtp_num_layers
        num_dense_layers += (1 - last_layer_is_moe) * mtp_num_layers
        num_layers = args.num_layers + mtp_num_layers
    else:
        mtp_num_layers, num_layers = 0, args.num_layers
    return num_dense_layers, num_moe_layers, num_experts_routed_to, mtp_num_layers, num_layers


def _attention_terms(args, fb, fma):
    """l. 1079–1172: the token-linear and the core (s²) self-attention terms of one layer."""
    h, a = args.hidden_size, args.num_attention_heads
    if args.multi_latent_attention:                                                        # l. 1079-1139
        if args.q_lora_rank is None:
            q_term = h * a * (args.qk_head_dim + args.qk_pos_emb_head_dim)
        else:
            q_term = args.q_lora_rank * (h + a * (args.qk_head_dim + args.qk_pos_emb_head_dim) + 1)
        linear = fb * fma * (q_term
                             + args.kv_lora_rank * (h + a * (args.qk_head_dim + args.v_head_dim) + 1)
                             + h * args.qk_pos_emb_head_dim
                             + (a * args.v_head_dim) * h)
        core = fb * fma * (a * (args.qk_head_dim + args.qk_pos_emb_head_dim) / 2 + a * args.v_head_dim / 2)
        return linear, core
    groups = args.num_query_groups if args.group_query_attention else a                   # l. 1013-1014
    query_projection_size = args.kv_channels * a                                          # l. 1143-1172
    key_projection_size = value_projection_size = args.kv_channels * groups
    linear = fb * fma * (h * (query_projection_size + key_projection_size + value_projection_size)
                         + query_projection_size * h)
    core = fb * fma * query_projection_size / 2 * 2
    return linear, core


def transformer_flops(args, batch_size) -> sympy.Expr:
    """Megatron's ``transformer_flops`` (l. 1009–1311) for ``batch_size`` sequences
    of ``args.seq_length`` (BSHD: l. 835–838), exact. ``args``: as
    :func:`~costgraph.training.megatron.megatron_args` returns (no linear
    attention variant, no latent MoE, no attention output gate)."""
    B, s, h = as_expr(batch_size), args.seq_length, args.hidden_size
    seqlen_squared_sum_in_batch = B * s * s                                               # l. 835-836
    total_real_tokens_in_batch = B * s                                                    # l. 837-838
    num_dense_layers, num_moe_layers, routed, mtp_num_layers, num_layers = _layer_split(args)
    moe_ffn_hidden_size = (args.moe_ffn_hidden_size if args.moe_ffn_hidden_size is not None
                           else args.ffn_hidden_size)                                     # l. 1051-1055
    shared = (0 if args.moe_shared_expert_intermediate_size is None
              else args.moe_shared_expert_intermediate_size)                              # l. 1057-1061
    fb, fma = 3, 2                                                                         # l. 1065, 1067
    ffn_expansion_factor = 3 if args.swiglu else 2                                        # l. 1070
    attn_linear, attn_core = _attention_terms(args, fb, fma)
    self_attn_term = attn_linear * num_layers                                             # l. 1255-1262
    self_attn_core_term = attn_core * num_layers                                          # l. 1264
    return sympy.expand(
        total_real_tokens_in_batch * (
            fb * fma * h * (args.ffn_hidden_size * ffn_expansion_factor * num_dense_layers
                            + moe_ffn_hidden_size * routed * ffn_expansion_factor * num_moe_layers
                            + shared * ffn_expansion_factor * num_moe_layers)            # MLP, l. 1269-1296
            + self_attn_term
            + fb * fma * mtp_num_layers * (3 * h + 2 * h * h)                             # MTP norms, eh_proj
            + fb * fma * h * args.padded_vocab_size * (mtp_num_layers + 1))               # logits, MTP + final
        + seqlen_squared_sum_in_batch * self_attn_core_term)                              # l. 1310


def megatron_flops(model, values: dict | None = None, layout=None, **overrides) -> dict[str, sympy.Expr]:
    """Megatron's FLOPs for one micro-batch of ``b`` sequences of ``model``
    (arguments as :func:`~costgraph.training.megatron.megatron_args`: its
    ``values``, ``layout``, ``overrides``), and per token.

    Returns ``{"per_micro_batch", "per_token"}`` (exact SymPy; per token =
    per micro-batch ÷ ``b·s``). The vocabulary is padded as Megatron pads it
    (to ``128·t``). Raises :class:`CostgraphValueError` as ``megatron_args``.
    """
    args = megatron_args(model, values, layout, **overrides)
    if args.moe_latent_size is not None:
        raise CostgraphValueError("Megatron's FLOPs with a latent MoE are not transcribed here")
    total = transformer_flops(args, args.micro_batch_size)
    return {"per_micro_batch": total,
            "per_token": sympy.cancel(total / (args.micro_batch_size * args.seq_length))}
