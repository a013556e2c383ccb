"""Recognise RWKV-4's mixers (Peng et al. 2023, "RWKV: Reinventing RNNs for the Transformer Era", arXiv:2305.13048;
transformers 5.24 modeling_rwkv.py) as blocks the draft defines itself: the time mix (``RwkvSelfAttention``) and the
channel mix (``RwkvFeedForward``).

Each recogniser reads :class:`costgraph.drafting.facts.Module` facts and returns the call as model-language text, or
None; the blocks' text (:data:`RWKV_BLOCKS`) follows transformers 5.24's modeling code.
"""

from __future__ import annotations

from .blocks import _linear
from .facts import Module

#: the time mix's own parameters (``RwkvSelfAttention.__init__``): the decay and bonus per channel, three token-shift
#: mixes [1, 1, H]
TIME_MIX = {"time_decay", "time_first", "time_mix_key", "time_mix_value", "time_mix_receptance"}
#: the channel mix's own parameters (``RwkvFeedForward.__init__``)
CHANNEL_MIX = {"time_mix_key", "time_mix_receptance"}


def _mixes(m: Module, names, hidden: int) -> bool:
    """Each token-shift mix of ``names`` is a [1, 1, H] parameter."""
    return all(m.params.get(n) == (1, 1, hidden) for n in names if n.startswith("time_mix"))


def rwkv_call(m: Module, arg: str, d) -> str | None:
    """RWKV-4's time mix (``RwkvSelfAttention``: the token shift mixed into key, value and receptance by
    ``time_mix_*``; ``key``, ``value``, ``receptance`` H → W, ``output`` W → H, no bias; the WKV recurrence over
    ``time_decay`` and ``time_first`` [W]) as the draft's ``rwkv_time_mix``; its channel mix (``RwkvFeedForward``:
    ``key`` H → I, squared ReLU, ``value`` I → H, times ``sigmoid(receptance(x))``, ``receptance`` H → H) as
    ``rwkv_channel_mix``; else None."""
    key, value, rec, out = (_linear(m.child(n)) for n in ("key", "value", "receptance", "output"))
    if None in (key, value, rec) or any(x[2] for x in (key, value, rec)) or m.child("time_shift") is None:
        return None
    hidden = key[0]
    if set(m.params) == TIME_MIX and out is not None and not out[2] and value[:2] == key[:2] == rec[:2] \
            and out[:2] == (key[1], hidden) and m.params["time_decay"] == m.params["time_first"] == (key[1],) \
            and _mixes(m, TIME_MIX, hidden):
        d.blocks.add("rwkv_time_mix")
        return f"rwkv_time_mix({arg}, {d.size(key[1], 'time-mix width')}, name = {m.name})"
    if set(m.params) == CHANNEL_MIX and out is None and rec[:2] == (hidden, hidden) and value[:2] == (key[1], hidden) \
            and _mixes(m, CHANNEL_MIX, hidden):
        d.blocks.add("rwkv_channel_mix")
        return f"rwkv_channel_mix({arg}, {d.size(key[1], 'MLP width')}, name = {m.name})"
    return None


#: the RWKV blocks a draft defines itself
RWKV_BLOCKS = {"rwkv_time_mix": """# RWKV-4's time mix (Peng et al. 2023, arXiv:2305.13048; transformers 5.24 RwkvSelfAttention): key, value
# and receptance from the input mixed with the previous token's by time_mix_* [1, 1, H] (no product); the WKV
# recurrence over time_decay and time_first [width] (exponentials and a running maximum per channel: no matrix
# product, written here as the elementwise product k * v it combines; its state, three [b, width] vectors per layer
# at decode, is not counted in the cache), times sigmoid(receptance), projected back by output.
block rwkv_time_mix(x[B, S, H], width) {
  param time_decay[width]
  param time_first[width]
  param time_mix_key[1, 1, H]
  param time_mix_value[1, 1, H]
  param time_mix_receptance[1, 1, H]
  k = linear(x, width, bias = false, name = key)
  v = linear(x, width, bias = false, name = value)
  r = sigmoid(linear(x, width, bias = false, name = receptance))
  return linear(r * (k * v), H, bias = false, name = output)
}""", "rwkv_channel_mix": """# RWKV-4's channel mix (transformers 5.24 RwkvFeedForward): key and receptance from the input mixed with the
# previous token's by time_mix_* [1, 1, H] (no product); value(relu(key(x))^2) times sigmoid(receptance(x)).
block rwkv_channel_mix(x[B, S, H], width) {
  param time_mix_key[1, 1, H]
  param time_mix_receptance[1, 1, H]
  k = relu2(linear(x, width, bias = false, name = key))
  r = sigmoid(linear(x, H, bias = false, name = receptance))
  return r * linear(k, H, bias = false, name = value)
}"""}
