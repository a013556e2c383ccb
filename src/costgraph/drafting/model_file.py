"""The whole model file of a draft: embeddings, the layers as ``repeat``, the final norm, the head;
the ``dim`` declarations of the symbols used (each naming its config field), a ``config`` of the
user's values, and the header saying where the draft comes from and how its fields map.
"""

from __future__ import annotations

import re
from dataclasses import replace

from .blocks import is_norm, norm_call
from .ngram_attention import head_lines, stream_lines, streams_module
from .recurrent import LOCAL_BLOCKS
from .zaya import model_lines as zaya_model_lines
from .per_layer import per_layer_inputs
from .shared_blocks import SHARED_BLOCKS, reuse_names
from .facts import Module
from .parallel_lists import fold_parallel_lists
from .probe import FIELDS, STAGE_LISTS, STAGE_SCALARS
from .segment_bias import bias_line, seq_text
from .looped_stacks import looped_lines
from .fsmt import fsmt_body
from .seq2seq import bart_body, t5_body
from .writer import Sizer, layer_lines
from .folding import _period, _periodic, _prefixed_period  # noqa: F401 (importable here)
from .pooling_head import map_head, map_head_lines
from .vision import patch_conv, vision_embeddings
from .uncalled import uncalled_lines
from .video import video_embeddings
from .text_encoders import xpath_front
from .mel_front import mel_front, pool_line
from .audio import audio_front, is_conv_stack
from .bert_conformer import stacked_front
from .fast_conformer import ctc_head_line, front as fast_conformer_front
from .frame_stacking import stacking_front     # k28speech2
from .spectrogram import spectrogram_embeddings
from .conv_stages import IMAGE_SIDE, stage_body
from .patch_tower import patch_tower_body


def find_layers(root: Module, count: int) -> Module | None:
    """The ModuleList of the Transformer layers: ``count`` children built alike, else the longest list."""
    lists = [m for m in root.walk() if m.cls == "ModuleList" and m.children and not is_conv_stack(m)]
    exact = [m for m in lists if len(m.children) == count]
    pool = exact or lists
    return max(pool, key=lambda m: len(m.children)) if pool else None


def _is_embedding(m: Module) -> bool:
    return "embedding" in m.cls.lower() and len(m.params.get("weight", ())) == 2 and not m.children


ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "silu": "silu", "tanh": "tanh"}


def _leaves(root: Module, layers: Module) -> list[Module]:
    """Modules without children called outside the layers, in call order."""
    inside = layers.path + "."
    found = [m for m in root.walk() if not m.children and m.order is not None and not m.path.startswith(inside)]
    return sorted(found, key=lambda m: m.order)


class _Names:
    """Node names unique at the model's top level (BERT has two modules called LayerNorm)."""

    def __init__(self):
        self.taken: set[str] = set()

    def __call__(self, m: Module) -> str:
        name = m.name if m.name not in self.taken and m.name.isidentifier() else m.path.replace(".", "_")
        if not name.isidentifier():      # an element of a ModuleList ("10"): its path, as a name
            name = "m_" + name
        base, k = name, 2
        while name in self.taken:       # a top-level module of the name taken (AIMv2's rms_norm, its embeddings' too)
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name


def _concat_map(pre: list[Module]) -> tuple[list[Module], Module] | None:
    """(the tables joined, the Linear that maps them back): RoCBERT's embeddings (transformers 5.24
    modeling_roc_bert.py ``RoCBertEmbeddings.forward`` with ``concat_input``): the token embedding [V, h], its shape
    and pronunciation embeddings of widths of their own concatenated with it (``torch.cat(..., -1)``), then
    ``map_inputs_layer`` (h + d_sh + d_pr → h) before the token-type and position embeddings are added; else None."""
    tables = [m for m in pre if _is_embedding(m)]
    if len(tables) < 2:
        return None
    width = tables[0].params["weight"][1]
    joined = [tables[0]] + [m for m in tables[1:] if m.params["weight"][1] != width]
    total = sum(m.params["weight"][1] for m in joined)
    for m in pre:
        w = m.params.get("weight")
        if "linear" in m.cls.lower() and w is not None and tuple(w) == (width, total) and len(joined) > 1 \
                and all(t.order < m.order for t in joined):
            return joined, m
    return None


def _embeddings(pre: list[Module], sz: Sizer, names: _Names, emb: dict) -> tuple[list[str], list[str]]:
    inputs, terms, tables = ["input tokens[b, s]: index"], [], []
    width = None
    joined = _concat_map(pre)
    for m in [m for m in pre if _is_embedding(m)]:
        num, dim = m.params["weight"]
        rows = sz.size(num, "embedding rows")
        name = emb[m.path] = names(m)
        width = dim if width is None else width
        if joined is not None and m in joined[0][1:]:     # RoCBERT's shape and pronunciation tables, concatenated
            inputs.append(f"input {name}_ids[b, s]: index")
            terms[0] = f"concat({terms[0]}, embedding({name}_ids, {rows}, {sz.size(dim, 'table width')}, " \
                       f"name = {name}))"
            if m is joined[0][-1]:
                lin = joined[1]
                bias = "true" if "bias" in lin.params else "false"
                terms[0] = f"linear({terms[0]}, {sz.size(width, 'embedding width')}, bias = {bias}, " \
                           f"name = {names(lin)})"
            continue
        if dim != width:      # RoFormer's sinusoidal table [s_max, h / a]: read by the attention's rotary, not added
            tables.append(f"param {name}_weight[{rows}, {sz.size(dim, 'table width')}]   # {m.cls}: a table of "
                          "another width than the token embedding's, not added to it (parameters only)")
            continue
        if not terms:
            ids = "tokens"
        elif rows.startswith("s_max") and "positions" not in " ".join(inputs):
            ids = "positions"
            inputs.append("input positions[s]: index")
        else:
            ids = f"{name}_ids"
            inputs.append(f"input {ids}[b, s]: index")
        term = f"embedding({ids}, {rows}, {sz.size(dim, 'embedding width')}, name = {name})"
        if "scaled" in m.cls.lower():     # BioGPT's, XGLM's scaled word embeddings: × √h
            term = f"scale({term}, name = {name}_scale)"
        terms.append(term)
    return inputs, (["x = " + " + ".join(terms)] if terms else []) + tables


def _leaf_line(m: Module, sz: Sizer, names: _Names, emb: dict, last: bool, seq: str = "s") -> str | None:
    """One statement for a module called before or after the layers (norm, dropout, linear, activation, CPM-Ant's
    position bias over the layers' ``seq`` positions)."""
    bias = bias_line(m, sz, names(m), seq) if "relative_attention_bias" in m.params else None
    if bias is not None:
        return bias
    if is_norm(m):
        return f"x = {norm_call(m, 'x').replace(f'name = {m.name})', f'name = {names(m)})')}"
    if m.cls == "Dropout":
        return f"x = dropout(x, name = {names(m)})" if m.attrs.get("p", 0) else None
    if m.cls == "AvgPool1d":      # a speech encoder's pooled output (Qwen2-Audio's avg_pooler)
        return pool_line(m)
    if m.cls.endswith("CTCHead"):     # a FastConformer's CTC head, a Conv1d of width 1 (Parakeet's)
        return ctc_head_line(m, sz, names(m), last)
    act = next((v for k, v in ACTIVATIONS.items() if k in m.cls.lower()), None)
    if act is not None and not m.params:
        return f"x = {act}(x)"
    w = m.params.get("weight")
    if "linear" in m.cls.lower() and w is not None and len(w) == 2:
        tied = ""
        if "weight" in m.tied:
            if m.tied["weight"] not in emb:
                return sz.todo(m, f"shares its weight with {m.tied['weight']}")
            tied = f", tied = {emb[m.tied['weight']]}"
        call = f"linear(x, {sz.size(w[0], 'output size')}, bias = {'true' if 'bias' in m.params else 'false'}" \
               f"{tied}, name = {names(m)})"
        return f"return {call}" if last else f"x = {call}"
    if not m.params:
        return None
    return sz.todo(m, "outside the layers, not an embedding, norm or linear")


def _front_end(root: Module, pre: list[Module], sz: Sizer, names: _Names, emb: dict):
    """(inputs, statements, the modules before the layers left, whether it is a vision tower) of an encoder whose
    input is no token ids — AST's spectrogram patches (:mod:`.spectrogram`), a ViT-like tower's (:mod:`.vision`), a
    Whisper-like Mel stem (:mod:`.mel_front`), the wav2vec2 family's feature encoder (:mod:`.audio`) — else None."""
    video = video_embeddings(root, pre, sz, names)      # a video's tubelets (VideoMAE: task k28vision13)
    if video is not None:
        return video[0], video[1], [m for m in pre if id(m) not in video[2]], True
    conv = patch_conv(pre)
    if conv is not None:
        named = names(conv)
        ast = spectrogram_embeddings(root, conv, sz, named)   # AST's patches of a spectrogram
        if ast is None:     # the name given back for vision_embeddings to take (the one given, not conv.name)
            names.taken.discard(named)
        vision = (*ast, {id(conv)}) if ast is not None else vision_embeddings(root, pre, sz, names)
        if vision is not None:      # the image's patches, the tokens in front, the positions
            return vision[0], vision[1], [m for m in pre if id(m) not in vision[2]], True
    mel = fast_conformer_front(root, pre, sz, names) or stacked_front(root, pre, sz) \
        or stacking_front(root, sz, names) \
        or mel_front(root, pre, sz, names)     # FastConformer's stem, Wav2Vec2-BERT's stacked frames, Whisper's
    if mel is not None:       # the Conv1d stem over the spectrogram, the positions
        return mel[0], mel[1], [m for m in pre if all(m is not d for d in mel[2])], False
    audio = audio_front(root, pre, sz, lambda m: _leaf_line(m, sz, names, emb, False))
    if audio is not None:     # the feature encoder, its projection, the positional convolution
        return audio[0], audio[1], [], False
    markup = xpath_front(root, pre, sz, names)     # MarkupLM's xpath embeddings beside the tokens' (k28text13)
    return (*markup, False) if markup is not None else None


def body_lines(root: Module, sz: Sizer, rotary: bool) -> tuple[list[str], list[str]]:
    """(input declarations, statements) of the model's body."""
    from .text_encoders import without_observers

    root = without_observers(root)     # I-BERT's quantisation observers: identities, no weight (k28text13)
    values = sz.probe.symbol_values()
    looped = _looped_body(root, sz, rotary)       # HRM's two stacks of layers, run again and again
    if looped is not None:
        return looped
    staged = stage_body(root, sz)      # ConvNeXt's stages of layers (k28conv12)
    if staged is not None:
        return staged
    seq2seq = t5_body(root, sz) or bart_body(root, sz)    # T5's, BART's encoder and decoder (t: decoder_input_ids)
    seq2seq = seq2seq or fsmt_body(root, sz)     # FSMT's: a token table per stack, the logits inside (k28text2)
    if seq2seq is not None:
        return seq2seq
    tower = patch_tower_body(root, sz)    # a VLM's vision tower on flattened patches (k28patch13)
    if tower is not None:
        return tower
    root = fold_parallel_lists(root, values.get("l", 0))      # XLM's attentions, ffns, ... side by side
    layers = find_layers(root, values.get("l", 0))
    if layers is None:
        raise ValueError("no ModuleList of layers found")
    layers = _in_index_order(layers)
    called = [c.order for c in layers.children if c.order is not None]
    start, end = min(called, default=0), max(called, default=0)
    leaves = _leaves(root, layers)
    pre = [m for m in leaves if m.order < start]
    # a module called before the layers and again after them (NanoChat's norm): a statement at each call
    post = sorted([(m.order, m) for m in leaves if m.order > end]
                  + [(o, m) for m in pre for o in m.again if o > end], key=lambda om: om[0])
    post = [m for _, m in post]
    names, emb = _Names(), {}
    ple = per_layer_inputs(pre, sz)       # Gemma 4's per-layer inputs: made once, read by every layer
    if ple is not None:
        pre = [m for m in pre if m not in ple[0]]
    front = _front_end(root, pre, sz, names, emb)    # an encoder's input that is no token ids, else None
    if front is not None:
        inputs, lines, pre, vision = front
    else:
        inputs, lines, vision = *_embeddings(pre, sz, names, emb), False
    first = min((c for c in layers.children if c.order is not None), key=lambda c: c.order, default=None)
    # a vision encoder's layers run s = n + 1 (DeiT's n + 2) positions, the s its dims derive: no prompt tokens
    seq = "s" if front is not None else seq_text(first.tokens if first is not None else None, sz) or "s"
    if seq != "s":      # CPM-Ant's prompt tokens, prepended by the forward: the inputs hold them too
        inputs = [line.replace("[b, s]", f"[b, {seq}]") for line in inputs]
    if ple is not None:
        lines += ple[1]
    streams = streams_module(root, layers)     # ProphetNet's predicting streams, after the main stream's embeddings
    positions = next((emb[m.path] for m in pre if m.path in emb and "position" in m.name), None)
    if streams is not None and positions is not None:
        lines += stream_lines(streams, sz, positions)
        streams.order = -1     # read by the forward (its weight, never called): not among the uncalled modules
    else:
        streams = None
    mapped = _concat_map(pre)
    lines += [x for x in (_leaf_line(m, sz, names, emb, False, seq) for m in pre
                          if not _is_embedding(m) and (mapped is None or m is not mapped[1])) if x]
    lines += zaya_model_lines(root, layers, sz)     # ZAYA's embedding scale and bias, its router state
    folded = reuse_names(_repeat(layers, sz, rotary, values))
    if any(re.search(r"\bemb\b", line) for line in folded):
        lines.append("emb = x     # the embeddings' output, which every shared transformer call reads again")
    lines += folded
    if streams is not None:
        lines += head_lines(streams, sz)
    inputs += _post_lines(root, post, sz, names, emb, seq, lines,
                          first.tokens if first is not None and vision else None)
    if not lines[-1].startswith("return"):
        lines.append("return x")
    extra = uncalled_lines(root, layers, sz)
    return inputs, (lines[:-1] + extra + lines[-1:]) if extra else lines


def _post_lines(root: Module, post: list[Module], sz: Sizer, names: _Names, emb: dict, seq: str, lines: list[str],
                layer_tokens: int | None) -> list[str]:
    """Append to ``lines`` the statements of the modules called after the layers (the final norm, the head); returns
    the inputs they add (SigLIP's attention-pooling head: :mod:`.pooling_head`). ``layer_tokens``: the positions the
    layers of a vision encoder run (its pooled modules read fewer: the class token); None for any other model (a
    speech encoder's pool after the layers reads fewer positions too, every one of them)."""
    head, inputs, done = map_head(root) if sz.seq is not None else None, [], False
    for i, m in enumerate(post):
        if seq != "s" and m.tokens == sz.probe.s:   # the head reads the last s positions (CPM-Ant: after the prompt)
            lines.append(f"x = slice_seq(x, s)   # the s positions after the prompt's {seq.split(' + ', 1)[1]} (a view)")
            seq = "s"
        if head is not None and m.path.startswith(head.path + "."):    # the head's modules: drafted at its first
            drafted = map_head_lines(head, sz, names(head)) if not done else ([], [])
            if drafted is not None:
                inputs += drafted[0]
                lines += drafted[1]
                done = True
                continue
            head = None     # not SigLIP's: its modules one by one
        line = _leaf_line(m, sz, names, emb, i == len(post) - 1)
        # k28dual13: SigLIP's text ``head`` reads one token too (transformers 5.24 modeling_siglip.py
        # SiglipTextModel.forward: ``pooled_output = last_hidden_state[:, -1, :]``, then ``self.head``)
        last = m.name == "head" and layer_tokens is None
        text_pooler = layer_tokens is None and ("pooler" in m.path.split(".") or last) and line and "linear(" in line
        if (layer_tokens is not None or text_pooler) and line and m.tokens != (layer_tokens or sz.probe.s) \
                and "select(" not in "".join(lines):   # a text encoder's pooler (MPNetPooler, BertPooler) too
            # a vision encoder's pooled output: the first token alone (ViTPooler: hidden_states[:, 0]; CLIP's
            # post_layernorm of last_hidden_state[:, 0, :])
            lines.append("x = select(x)   # " + ("the last token (one token a sequence: [b, h])" if last else
                                                 _pooled(root, m)))
        if line:
            lines.append(line)
    return inputs


def _pooled(root: Module, m: Module) -> str:
    """What a vision encoder's pooled output is, said beside its ``select``: the class token, or where a pooler
    norms the mean of the patch tokens (BEiT's, transformers 5.24 modeling_beit.py ``BeitPooler.forward`` with
    ``use_mean_pooling``: ``layernorm(patch_tokens.mean(1))``) that mean, of the same size (the mean's additions are
    no matmul FLOPs)."""
    parent = next((x for x in root.walk() if x.path == m.path.rpartition(".")[0]), None)
    if parent is not None and parent.cls.endswith("Pooler") and is_norm(m):
        return "the mean of the patch tokens (the pooler's layernorm(x[:, 1:].mean(1))), [b, h] as the class token"
    return "the class token"


def _looped_body(root: Module, sz: Sizer, rotary: bool) -> tuple[list[str], list[str]] | None:
    """(inputs, statements) of a model whose stacks of layers its forward loops (:mod:`.looped_stacks`), else None:
    the embeddings, the stacks' calls, the modules after them (the head)."""
    found = looped_lines(root, sz, rotary)
    if found is None:
        return None
    lines, low, high = found
    inside = (low.path + ".", high.path + ".")
    leaves = sorted((m for m in root.walk() if not m.children and m.order is not None and not m.path.startswith(inside)),
                    key=lambda m: m.order)
    pre, post = [m for m in leaves if m.order < low.order], [m for m in leaves if m.order > high.order]
    names, emb = _Names(), {}
    inputs, out = _embeddings(pre, sz, names, emb)
    out += [x for x in (_leaf_line(m, sz, names, emb, False) for m in pre if not _is_embedding(m)) if x]
    out += lines
    out += [x for x in (_leaf_line(m, sz, names, emb, i == len(post) - 1) for i, m in enumerate(post)) if x]
    if not out[-1].startswith("return"):
        out.append("return x")
    return inputs, out


def _in_index_order(layers: Module) -> Module:
    """The layers' list with its elements in index order (the trace lists a module's children in call order, the
    uncalled ones last): mllama's cross-attention layers, which a text-only forward skips (transformers 5.24
    modeling_mllama.py ``MllamaTextModel.forward``: ``continue`` where ``cross_attention_states`` is None), stay at
    the config's indices (``cross_attention_layers``: every 5th from layer 3), where the layers' pattern reads them."""
    if not all(c.name.isdigit() for c in layers.children):
        return layers
    return replace(layers, children=sorted(layers.children, key=lambda c: int(c.name)))


def _repeat(layers: Module, sz: Sizer, rotary: bool, values: dict) -> list[str]:
    sizers = [sz] + [sz.repeated() for _ in layers.children[1:]]
    texts = [layer_lines(layer, z, rotary) for layer, z in zip(layers.children, sizers)]
    n = len(layers.children)
    count = "l" if values.get("l") == n else str(n)
    if count == "l":
        sz.used.add("l")
    if all(t == texts[0] for t in texts):
        return [f"repeat {count} as {_label(layers.name, values)} {{", *("  " + t for t in texts[0]), "}"]
    runs, i = [], 0
    while i < n:
        j = i
        while j < n and texts[j] == texts[i]:
            j += 1
        runs.append((i, j))
        if i:     # the first layer of each other kind says its TODOs and warnings too
            sz.todos += sizers[i].todos
            sz.warnings += sizers[i].warnings
        i = j
    label = _label(layers.name, values)
    if len(runs) == 2 and count == "l":     # first K layers of one kind (DeepSeek's dense layers), or the last
        short = min(runs, key=lambda r: r[1] - r[0])
        m = short[1] - short[0]
        sz.warnings.append(f"{layers.path}: layers {short[0]}..{short[1] - 1} are of another kind; their count {m} "
                           "is written as a number (set by a config field such as first_k_dense_replace)")
        out = []
        for a, b in runs:
            counted = str(m) if (a, b) == short else f"l - {m}"
            # the last layers of their own (GPT-NeoX-Japanese's last attention with its bias): named and numbered from
            # the end, so that probes of other layer counts draft the same text
            if (a, b) == short:
                first, last = (a, b - 1) if a == 0 else (f"l - {n - a}", "l - 1")
            else:
                first, last = a, "l - 1" if b == n else f"l - {n - b + 1}"
            name = label if (a, b) != short else f"{label}_{a}" if a == 0 else f"{label}_last"
            out += [f"repeat {counted} as {name} {{   # layers {first}..{last}", *("  " + t for t in texts[a]), "}"]
        return out
    period = _period(texts)
    if period is not None and count == "l":
        return _periodic(texts, period, label)
    prefixed = _prefixed_period(texts) if count == "l" else None
    if prefixed is not None:
        p, m, last = prefixed
        sz.warnings.append(f"{layers.path}: the first {p} layer(s) of their own kind{', the last layer' if last else ''}"
                           f", then a pattern of period {m}: written j in [...] (set by config fields such as "
                           "first_k_dense_replace or layer_types)")
        return _periodic(texts, m, label, prefix=p, last=last)
    if count != "l":     # a layer count no probe field sets: the config's own list of layer kinds (Nemotron-H's)
        sz.warnings.append(f"{layers.path}: {n} layers whatever the probe's layer count (a list of layer kinds in the "
                           "config, as Nemotron-H's layers_block_type): written with index lists j in [...]")
        return _periodic(texts, n, label, listed=True)
    sz.warnings.append(f"{layers.path}: layers differ ({len(set(map(tuple, texts)))} kinds): written one run of "
                       "alike layers per repeat; fold the pattern by hand (repeat l as layers[j] with conditions)")
    out = []
    for a, b in runs:
        out += [f"repeat {b - a} as {label}_{a} {{   # TODO layers {a}..{b - 1}: one kind of the pattern",
                *("  " + t for t in texts[a]), "}"]
        sz.todos.append(f"{layers.path}.{a}-{b - 1}")
    return out


def stage_text(sym: str) -> str:
    """What a per-stage symbol (``h_2``: :data:`costgraph.drafting.probe.STAGE_LISTS`) or a staged backbone's own
    (``h_0``: :data:`costgraph.drafting.probe.STAGE_SCALARS`) says, else the symbol."""
    own = next((d for s, d in STAGE_SCALARS.values() if s == sym), None)
    if own is not None:
        return own
    prefix, _, i = sym.rpartition("_")
    return next((f"{d} {i}" for f, (p, d) in STAGE_LISTS.items() if p == prefix and i.isdigit()), sym)


def _label(name: str, values: dict) -> str:
    """The repeat's name: the ModuleList's, unless a dimension has it (GPT-2's ``h``)."""
    return "layers" if name in values or name in ("b", "s") else name


def render(name: str, header: list[str], inputs: list[str], lines: list[str], sz: Sizer,
           fields: dict[str, str], real: dict[str, int], config_name: str, context: int | None = None) -> str:
    """The model file's text. ``fields``: symbol → config field; ``real``: symbol → the user's value;
    ``context``: the config's context length (the configuration's ``s``; 2048 when it has none)."""
    first = ("h", "a", "kv", "d", "i", "m", "E", "k", "l", "V", "s_max", "t")
    order = ["b", "s", *(s for s in first if s in sz.used and s != "t"),
             *sorted(s for s in sz.used if s not in first)]
    dims = ['  dim b   "micro-batch size (sequences)"', '  dim s   "sequence length (tokens)"']
    if "t" in sz.used:    # an encoder-decoder (:mod:`.seq2seq`): s the encoder's positions, t the decoder's
        dims = [dims[0], '  dim s   "encoder sequence length (input tokens)"',
                '  dim t   "decoder sequence length (decoder_input_ids)"']
    if sz.seq is not None or sz.stages:     # a vision encoder: s follows the image and patch sizes; none in a
        # convolutional backbone, or its image side
        kind = "videos" if "f" in sz.used else "audio clips" if sz.seq_dims or sz.front_dims else "images"   # f: frames
        dims = [f'  dim b   "micro-batch size ({kind})"']
        if sz.stages and "image" not in sz.used:
            dims.append('  dim s   "image size (pixels per side): the input\'s, set by no config field"')
    for sym in order[2:]:
        desc = next((d for f, (s, d) in FIELDS.items() if s == sym), None) or stage_text(sym)
        dims.append(f'  dim {sym:<3} "{desc} (config.json: {fields.get(sym, "?")})"')
    if sz.front_dims:     # a speech encoder from raw audio: the samples, the frames after each convolution
        dims += sz.front_dims
    elif sz.seq is not None:
        dims += sz.seq_dims or ['  dim n = (image / p) * (image / p) "number of patches, (image/p)^2"',
                                f'  dim s = {sz.seq} "sequence length: the patches and the tokens put in front of them"']
    body = [("  " + x) if x else "" for x in (*inputs, "", *lines)]
    values = [f"{sym} = {real[sym]}" for sym in order[2:] if sym in real]
    seq = real.get("s_max", context or 2048)
    if sz.stages:      # an image side no config field sets (conv_stages.IMAGE_SIDE)
        seq = IMAGE_SIDE
    image = sz.seq or (sz.stages and "image" in sz.used)
    lengths = [] if image else [f"s = {seq}"] + ([f"t = {seq}"] if "t" in sz.used else [])
    config = f"config {config_name} {{ {', '.join(values + sz.front_config + lengths + ['b = 1'])} }}"
    imports = ['import "std/attention.cg"', 'import "std/mlp.cg"', 'import "std/moe.cg"',
               *(f'import "{f}"' for f in sorted(sz.imports))]
    local = [{**LOCAL_BLOCKS, **SHARED_BLOCKS}[b] + "\n" for b in sorted(sz.blocks)] + [t + "\n" for t in sz.defined]
    return "\n".join([*header, "", *imports, "", *local, f"model {name} {{", *dims, "", *body, "}", "", config, ""])
