"""The two probes' primes (:mod:`costgraph.drafting.probe`): for each probe, the prime of every base factor of a
probed size. Each helper task's keys sit on a line of their own, with the task named and its reserved range kept.

Torch-free and SymPy-free: integers only.
"""

from __future__ import annotations

#: per probe: prime of every base factor. ``g`` = a/kv (query heads per KV head), ``x`` = h/(40a), the head size over
#: :data:`HEAD`; ``w`` = lru_width/(40a) (RecurrentGemma's RG-LRU splits its width into a heads). The Mamba-2
#: inner width (``e·h`` or ``mamba_d_ssm``) must divide into ``hm`` heads, and the heads into ``ng`` groups of B
#: and C (``repeat_interleave(hm / ng)``): ``hm`` holds ``ng``'s prime, ``e`` and ``di`` hold ``hm``'s primes besides
#: their own. Gated DeltaNet's value heads hold the key heads' prime (``hv / hk`` value heads share a key head). ``C``, the scan's chunk, is no prime (never read from a shape): below ``s``, so that the
#: probe's scan runs several chunks, the last one padded. ``W``, a sliding window, is read from the attention
#: module, never from a shape: above the probe's ``s`` (eager attention computes every pair, masked: FlopCounterMode
#: counts the full square, a window's saving shows only beyond it; the tests check it there, on the KV cache).
PRIMES: tuple[dict[str, int], dict[str, int]] = (
    {"kv": 7, "g": 11, "x": 13, "d": 17, "i": 19, "V": 251, "s_max": 43, "E": 29, "m": 31, "k": 3, "l": 11,
     "w": 53, "K": 59, "e": 71, "N": 83, "R": 97, "r_q": 103, "r_kv": 109, "d_n": 127, "d_r": 131, "d_v": 137,
     "i_s": 149, "hm": 157, "dm": 191, "di": 283, "ng": 167, "C": 8, "Cl": 8,
     "W": 41, "hk": 197, "hv": 199, "dk": 211, "dv": 223, "hl": 257, "dl": 263, "n_s": 277, "r_a": 347, "d_pl": 307,
     "V_pl": 313, "hi": 331, "t_k": 1009, "V_sh": 353, "d_sh": 359, "V_pr": 367, "d_pr": 373, "w_t": 401,
     "r_g": 419, "P": 431, "T_p": 439, "G": 449, "n_b": 461, "c_H": 2, "c_L": 3,
     "n_g": 61, "nb": 467, "hr": 479, "p": 499, "c": 509, "q": 5,
     "mel": 827, "se": 811, "frames": 809,      # k28feat12: speech encoders' Mel bins, positions, input frames
     "n_r": 523,   # k28tower12
     "G_c": 701, "K_c": 719, "L": 733,     # k28wav12: speech encoders from raw audio
     "h_1": 601, "h_2": 607, "h_3": 613, "h_4": 617, "l_1": 2, "l_2": 3, "l_3": 2, "l_4": 3, "h_0": 647,
     "side": 659, "g_w": 673, "h_e": 683, "a_1": 2, "a_2": 4, "a_3": 2, "a_4": 4,   # k28conv12: stages
     "t": 911,     # k28seq12: an encoder-decoder's decoder length (decoder_input_ids [b, t]), no config field
     "n_c": 1409, "tb": 1427, "f_t": 2,     # k28vision13: class tokens, tubelets (f_t: no symbol; probe_video.py)
     "C_s": 1601,     # k28speech13: FastConformer's subsampling channels (configuration_parakeet.py)
     "d_emb": 1801, "V_ent": 1823, "d_ent": 1847,     # k28text13: ALBERT's embedding_size, LUKE's entity table
     "h_o": 1201, "i_p": 1213, "g_pos": 1217,     # k28patch13: VLM towers (n_pos = g_pos², a square)
     "e_j": 1019, "e_p": 1031,   # k28dual13: a text head's width (SigLIP's, AltCLIP's), a dual encoder's projection_dim
     "V_src": 2411},     # k28text2: FSMT's source vocabulary (configuration_fsmt.py src_vocab_size)
    {"kv": 13, "g": 7, "x": 17, "d": 23, "i": 31, "V": 241, "s_max": 47, "E": 19, "m": 37, "k": 2, "l": 13,
     "w": 61, "K": 67, "e": 73, "N": 89, "R": 101, "r_q": 107, "r_kv": 113, "d_n": 131, "d_r": 137, "d_v": 139,
     "i_s": 151, "hm": 163, "dm": 193, "di": 293, "ng": 173, "C": 10, "Cl": 10,
     "W": 43, "hk": 227, "hv": 229, "dk": 233, "dv": 239, "hl": 269, "dl": 271, "n_s": 281, "r_a": 349, "d_pl": 311,
     "V_pl": 317, "hi": 337, "t_k": 1013, "V_sh": 379, "d_sh": 383, "V_pr": 389, "d_pr": 397, "w_t": 409,
     "r_g": 421, "P": 433, "T_p": 443, "G": 457, "n_b": 463, "c_H": 3, "c_L": 2,
     "n_g": 59, "nb": 487, "hr": 491, "p": 503, "c": 521, "q": 7,
     "mel": 829, "se": 821, "frames": 863,      # k28feat12: speech encoders' Mel bins, positions, input frames
     "n_r": 541,   # k28tower12
     "G_c": 709, "K_c": 727, "L": 739,     # k28wav12: speech encoders from raw audio
     "h_1": 619, "h_2": 631, "h_3": 641, "h_4": 643, "l_1": 3, "l_2": 2, "l_3": 3, "l_4": 2, "h_0": 653,
     "side": 661, "g_w": 677, "h_e": 691, "a_1": 4, "a_2": 2, "a_3": 4, "a_4": 2,   # k28conv12: stages
     "t": 919,     # k28seq12: an encoder-decoder's decoder length (decoder_input_ids [b, t]), no config field
     "n_c": 1423, "tb": 1429, "f_t": 2,     # k28vision13: class tokens, tubelets (f_t: no symbol; probe_video.py)
     "C_s": 1607,     # k28speech13: FastConformer's subsampling channels (configuration_parakeet.py)
     "d_emb": 1811, "V_ent": 1831, "d_ent": 1861,     # k28text13: ALBERT's embedding_size, LUKE's entity table
     "h_o": 1223, "i_p": 1229, "g_pos": 1231,     # k28patch13: VLM towers (n_pos = g_pos², a square)
     "e_j": 1021, "e_p": 1033,   # k28dual13: a text head's width (SigLIP's, AltCLIP's), a dual encoder's projection_dim
     "V_src": 2417},     # k28text2: FSMT's source vocabulary (configuration_fsmt.py src_vocab_size)
)
