"""Write a model file from traced facts: the layers folded into ``repeat``, each layer's dataflow
(pre-norm, parallel, post-norm, sandwich norms) as residual sums of recognised blocks
(:mod:`costgraph.drafting.blocks`), sizes in the probe's symbols (:mod:`costgraph.drafting.probe`).

Unknown modules with parameters are written as a commented ``# TODO`` and a warning: never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from .blocks import is_norm, norm_call
from .recurrent import mixer_call
from .facts import Module
from .gated_norms import as_norm
from .per_layer import per_layer_tail
from .divided_attention import divided_layer_lines
from .shared_blocks import hybrid_lines
from .text_encoders import text_layer_lines
from .probe import COUNTS, Probe


@dataclass
class Sizer:
    """Sizes as text in a probe's symbols; records the symbols used, warnings and TODOs."""

    probe: Probe
    used: set = field(default_factory=set)
    warnings: list = field(default_factory=list)
    todos: list = field(default_factory=list)
    silent: bool = False
    blocks: set = field(default_factory=set)     # blocks.LOCAL_BLOCKS the draft uses
    #: the drafted class predicts the next token (``…ForCausalLM``): its attention is causal and cached, whatever an
    #: attention module's ``is_causal`` says; elsewhere an attention with ``is_causal = False`` is written bidirectional
    causal_lm: bool = True
    imports: set = field(default_factory=set)    # std/ files the draft imports besides attention, mlp and moe
    #: symbol → the config's own value (the same at both probes): a quotient these values do not divide is written
    #: floor(...), as transformers computes it (``hidden_size // num_attention_heads``: GLM-4.5's 4096 // 96 = 42)
    real: dict = field(default_factory=dict)
    #: (text, value at the probe) of sizes a config derives by rounding (:func:`costgraph.drafting.configs.rounded_widths`)
    rounded: list = field(default_factory=list)
    #: the text of blocks drafted for this model alone (HRM's stack: :mod:`costgraph.drafting.looped_stacks`)
    defined: list = field(default_factory=list)
    #: a vision encoder's sequence length, derived from its patches (``n + 1``: :mod:`costgraph.drafting.vision`);
    #: None where ``s`` is the input's length, set by the user
    seq: str | None = None
    #: the dim lines that derive ``s`` (a speech encoder's frames: :mod:`costgraph.drafting.mel_front`); a vision
    #: encoder's (the patches n, then s) where empty
    seq_dims: list = field(default_factory=list)
    #: a front end's own dims in place of the vision encoder's (a speech encoder's samples L and the frames after each
    #: convolution: :mod:`costgraph.drafting.audio`), and the values its config block gives them (``L = 16000``)
    front_dims: list | None = None
    front_config: list = field(default_factory=list)
    #: a staged convolutional backbone (:mod:`costgraph.drafting.conv_stages`): no sequence, its input an image
    stages: bool = False

    def quiet(self) -> "Sizer":
        """A sizer for trial recognition: nothing it reads is recorded."""
        return replace(self, used=set(), warnings=[], todos=[], silent=True, blocks=set(), imports=set(), defined=[])

    def repeated(self) -> "Sizer":
        """A sizer for the second and later layers: their symbols count, their warnings are layer 0's."""
        return replace(self, warnings=[], todos=[], silent=False)

    def _quotient(self, over: str, sym: str) -> str:
        """``over / sym``, or ``floor(over / sym)`` where the config's own values of the symbols leave a remainder
        (the probes always divide: their sizes are products of the same primes). ``over``: symbols (and one
        coefficient) joined by ``*``."""
        text = f"{over} / {sym}" if " " not in over else f"({over}) / {sym}"
        num = 1
        for t in over.split(" * "):
            v = int(t) if t.isdigit() else self.real.get(t)
            if not isinstance(v, int):
                return text
            num *= v
        den = self.real.get(sym)
        return f"floor({text})" if isinstance(den, int) and den > 0 and num % den else text

    def _extra_rows(self, n: int, values: dict, what: str = "size") -> str | None:
        """``n`` as one field plus or minus a few rows (``s_max + 2``, ``V + 1``), or None. mllama's token table is
        vocab_size + 8 (transformers 5.24 modeling_mllama.py MllamaTextModel's nn.Embedding): the 8 only for a
        table's rows, where no other size of a probe lies near (RemBERT's embedding width 256 is no V + 5)."""
        for extra in (1, 2, -1, -2, *((8,) if what == "embedding rows" else ())):
            over = self.probe.cover(n - extra) if n > extra else None
            if over is not None and " " not in over and over in values:
                return f"{over} {'+' if extra > 0 else '-'} {abs(extra)}"
        return None

    def _rows_after_vocabulary(self, n: int, values: dict) -> str | None:
        """``V + x * y``: a token table of the vocabulary and rows of other kinds, a product of size fields (CPM-Ant's
        ``vocab_size + prompt_types * prompt_length``: transformers 5.24 modeling_cpmant.py ``CpmAntModel``'s
        ``input_embedding``), or None."""
        vocab = values.get("V")
        more = self.probe.cover(n - vocab) if isinstance(vocab, int) and n > vocab else None
        if more is None or more.split(" * ")[0].isdigit():
            return None
        return f"V + {more}"

    def size(self, n: int, what: str = "size", *, count: str | None = None, quiet: bool = False) -> str:
        """``n`` in symbols (``a * d``, ``h / a``), or its number with a warning. ``count``: a counting
        symbol (``k``, ``l``) that ``n`` equals at the probe, named only by equality."""
        values = self.probe.symbol_values()
        if n == 1:
            return "1"
        if count is not None and values.get(count) == n:
            text = count
        else:
            text = self.probe.cover(n)
            if what == "embedding rows" and text is not None and text.split(" * ")[0].isdigit():
                text = self._extra_rows(n, values, what) or text     # Moshi's V + 1 rows, not a product such as 36 * kv
            if text is None:
                for sym, v in values.items():
                    if sym in COUNTS:
                        continue
                    over = self.probe.cover(n * v)
                    if over is not None and sym not in over.split(" * "):
                        text = self._quotient(over, sym)
                        break
        if text is None:     # half a field, rounded down (RecurrentGemma's MLP: intermediate_size // 2)
            text = next((f"floor({sym} / 2)" if v % 2 else f"{sym} / 2" for sym, v in values.items()
                         if sym not in COUNTS and v // 2 == n and v > 2), None)
        if text is None:     # a table with a few extra rows (OPT's learned positions: s_max + 2; mllama's: V + 8)
            text = self._extra_rows(n, values, what)
        if text is None and what == "embedding rows":     # CPM-Ant's token table: V + T_p * P (prompt tokens' rows)
            text = self._rows_after_vocabulary(n, values)
        if text is None:     # a width the config rounds (LFM2's MLP: a multiple of 256 at or above 2i/3)
            text = next((t for t, v in self.rounded if v == n and what == "MLP width"), None)
        if text is None:
            if not (quiet or self.silent):
                self.warnings.append(f"{what} {n} at the probe is no product of config fields: written as a number")
            return str(n)
        if not (quiet or self.silent):
            self.used.update(t for t in text.replace("(", " ").replace(")", " ").split() if t in values)
        return text

    def todo(self, m: Module, why: str) -> str:
        if not self.silent:
            self.todos.append(m.path)
            self.warnings.append(f"{m.path} ({m.cls}, {m.param_count()} parameters): {why}; left as a TODO")
        return f"# TODO {m.name}: {m.cls} ({why}; parameters {sorted(m.params)} and children " \
               f"{[c.name for c in m.children]} not drafted)"


def _called(m: Module) -> list[Module]:
    return [c for c in m.children if c.order is not None]


def _flat_mlp(layer: Module, kids: list[Module]) -> list[Module]:
    """OPT's, XGLM's layers hold ``fc1`` and ``fc2`` themselves: seen as one MLP module ``mlp``."""
    fc1, fc2 = layer.child("fc1"), layer.child("fc2")
    if fc1 is None or fc2 is None or fc1 not in kids or fc2 not in kids:
        return kids
    mlp = Module(f"{layer.path}.mlp", "mlp", "FlatMLP", attrs=dict(layer.attrs), children=[fc1, fc2],
                 order=fc1.order, src=fc1.src)
    return [mlp if c is fc1 else c for c in kids if c is not fc2]


def layer_lines(layer: Module, sz: Sizer, rotary: bool) -> list[str]:
    """The statements of one layer, on the residual stream ``x``."""
    from .encoder import bert_lines
    from .segment_bias import layer_lines as segment_bias_lines
    from .conformer import conformer_layer_lines
    from .zaya import layer_lines as zaya_layer_lines
    bert = bert_lines(layer, sz, rotary) or text_layer_lines(layer, sz, rotary)     # ALBERT's shared layer, LUKE's
    if bert is not None:
        return bert
    # whole layers: CPM-Ant's (position bias), Zamba2's (shared block, then Mamba-2), ZAYA's (CCA, router state)
    for whole in (lambda: segment_bias_lines(layer, sz), lambda: hybrid_lines(layer, sz, rotary),
                  lambda: zaya_layer_lines(layer, sz, rotary), lambda: conformer_layer_lines(layer, sz, rotary),
                  lambda: divided_layer_lines(layer, sz)):     # TimeSformer's (k28vision13)
        lines = whole()
        if lines is not None:
            return lines + uncalled_lines(layer, sz)
    kids, tail = _layer_modules(layer, sz)
    expr: dict[str, str] = {}
    pending: dict[str, str] = {}     # mixer name → its output's expression, not yet added to x
    uses = {c.name: sum(1 for k in kids if k.src == c.name) for c in kids}
    # post-norm: the first block reads the layer's input and a norm ends the layer (OPT-350m, GPT-1); ModernBERT's
    # first layer, whose attention norm is an Identity, reads its input too but ends with the MLP's residual sum
    post_norm = bool(kids) and not is_norm(kids[0]) and kids[0].src == "input" and is_norm(kids[-1])
    state = {"updated": False, "var": 0}
    (scales, outs), lines, kids = _prologue(layer, kids, uses, sz)

    def flush(norm: Module | None = None):
        if pending:
            terms = [f"x * {scales.pop(0)}" if scales else "x",
                     *(f"{v} * {outs.pop(0)}" if outs else v for v in pending.values())]   # BEiT's lambda_1
            wrap = len(terms) > 2 and len(" + ".join(terms)) > 100 and norm is None   # a parallel layer
            total = "\n        + ".join(terms) if wrap else " + ".join(terms)
            lines.append(f"x = {norm_call(norm, total) if norm else total}")
            pending.clear()
            state["updated"] = True
        elif norm is not None:
            lines.append(f"x = {norm_call(norm, 'x')}")

    def source(c: Module) -> str:
        if c.src in expr:
            return expr[c.src]
        if c.src == "input" and state["updated"]:
            return "x0"
        return "x"

    for c in kids:
        if post_norm and is_norm(c) and c.src not in pending:
            flush(c)
            continue
        if _on_block_output(c, pending, expr, lines, uses, sz):
            continue
        if is_norm(c) and c.src in pending:   # a block that adds the residual itself (BLOOM): its output is x
            flush()
            c.src = "?"
        if c.src == "?" and pending:
            flush()
        arg = source(c)
        if is_norm(c):
            text = norm_call(c, arg)
            if uses.get(c.name, 0) > 1:            # read by two blocks (a parallel layer): bound once
                state["var"] += 1
                var = f"y{state['var']}"
                lines.append(f"{var} = {text}")
                text = var
            expr[c.name] = text
            continue
        call = mixer_call(c, arg, sz, rotary)
        if call is None:
            lines.append(sz.todo(c, "no std block recognised"))
            continue
        pending[c.name] = call
        expr[c.name] = call
    flush()
    if scales or outs:     # more residual or output scales than residual sums: not read
        lines.append(sz.todo(layer, f"residual scales {scales + outs} left over"))
    if tail is not None:
        lines.append(tail[1])
    if any(line.find("x0") >= 0 for line in lines):
        lines.insert(0, "x0 = x")
    return lines + uncalled_lines(layer, sz)


def _on_block_output(c: Module, pending: dict, expr: dict, lines: list, uses: dict, sz: Sizer) -> bool:
    """A module on a pending block's output, before the residual sum: DINOv2's LayerScale (a ``param`` line, the
    output times it) or a norm nothing else reads (a sandwich norm). True where it was written so."""
    if c.src not in pending:
        return False
    scale = layer_scale(c)
    if scale is not None:
        lines.append(f"param {c.name}_{scale}[{sz.size(c.params[scale][0], 'layer scale width')}]")
        pending[c.src] = f"{pending[c.src]} * {c.name}_{scale}"
    elif is_norm(c) and uses.get(c.name, 0) == 0:
        pending[c.src] = norm_call(c, pending[c.src])
    else:
        return False
    expr[c.name] = pending[c.src]
    return True


def layer_scale(m: Module) -> str | None:
    """The parameter of a per-channel LayerScale (transformers 5.24 modeling_dinov2.py ``Dinov2LayerScale``:
    ``hidden_state * self.lambda1``, ``lambda1 [h]``), or None for any other module."""
    names = list(m.params)
    if m.cls.endswith("LayerScale") and not m.children and len(names) == 1 and len(m.params[names[0]]) == 1:
        return names[0]
    return None


def _layer_modules(layer: Module, sz: Sizer) -> tuple[list[Module], tuple | None]:
    """(the modules a layer's statements read, in call order; Gemma 4's per-layer tail or None)."""
    kids = [c for c in _called(layer) if c.cls != "Dropout" and (c.params or c.children or is_norm(c))]
    kids = [as_norm(c, sz) or c for c in kids]     # A.X-K2's gated RMSNorms, read where a norm is
    kids = _flat_mlp(layer, kids)
    tail = per_layer_tail(layer, sz)      # Gemma 4's per-layer input, after the MLP's residual
    if tail is not None:
        kids = [c for c in kids if c.name not in tail[0]]
    for prev, c in zip(kids, kids[1:]):     # Falcon-H1: attention reads the norm Mamba read, times a µP scalar
        if c.src == "?" and not is_norm(c) and not is_norm(prev) and any(k.name == prev.src and is_norm(k) for k in kids):
            c.src = prev.src
    return kids, tail


def _prologue(layer: Module, kids: list[Module], uses: dict, sz: Sizer) -> tuple[tuple, list[str], list[Module]]:
    """((the residual scales, the block-output scales), the layer's first statements, the modules left): the ``param``
    of each residual scale (:func:`_residual_scales`) and block-output scale (:func:`_output_scales`), and a norm of the layer's input that the next norm reads, which norms the residual
    stream itself (RWKV's first block: ``hidden = pre_ln(hidden)``, transformers 5.24 modeling_rwkv.py
    ``RwkvBlock.forward``)."""
    scales, outs = _residual_scales(layer), _output_scales(layer)
    lines = [f"param {n}[{sz.size(layer.params[n][0], 'residual scale width')}]" for n in scales + outs]
    if len(kids) > 1 and is_norm(kids[0]) and kids[0].src == "input" and is_norm(kids[1]) \
            and kids[1].src == kids[0].name and uses.get(kids[0].name) == 1:
        lines.append(f"x = {norm_call(kids[0], 'x')}")
        kids[1].src = "input"
        kids = kids[1:]
    return (scales, outs), lines, kids


def _output_scales(layer: Module) -> list[str]:
    """The layer's own vectors that scale each block's output before the residual sum, in the order they were
    registered (BEiT's layer scale, transformers 5.24 modeling_beit.py ``BeitLayer.forward``: ``self.lambda_1 *
    attention_output``, then ``self.lambda_2 * layer_output`` of the MLP; ``lambda_1 [h]``): parameters of the layer
    itself named ``lambda_1``, ``lambda_2``, one dimension each, in a ViT-family layer (``layernorm_before`` and
    ``layernorm_after``: Dory's ``lambda_1``, ``lambda_2`` are interpolation rates of another form); else none."""
    names = list(layer.params)
    vit = layer.child("layernorm_before") is not None and layer.child("layernorm_after") is not None
    if names and vit and all(re.fullmatch(r"lambda_\d", n) and len(layer.params[n]) == 1 for n in names):
        return names
    return []


def _residual_scales(layer: Module) -> list[str]:
    """The layer's own vectors that scale the residual stream before each block's output is added, in the order
    they were registered (Doge's ``input_residual`` then ``post_attention_residual``, transformers 5.24
    modeling_doge.py ``DogeDecoderLayer.forward``: ``input_residual * residual + attn(...)``, then the MLP's the same
    way): parameters of the layer itself, one dimension each, named ``*residual``; else none."""
    names = list(layer.params)
    if names and all(n.endswith("residual") and len(layer.params[n]) == 1 for n in names):
        return names
    return []


def uncalled_lines(layer: Module, sz: Sizer) -> list[str]:
    """``param`` statements for the parameters of the layer's modules its forward never calls (the
    cross-attention of BartForCausalLM's decoder layers, built without an encoder to attend to):
    counted as ``sum(p.numel())`` counts them, no FLOPs."""
    out = []
    skipped = all(m.order is None for m in layer.walk())
    if skipped:     # a layer the forward skips (mllama's cross-attention layers): its own parameters too
        out += [f"param {pname}[{', '.join(sz.size(n, f'{layer.path}.{pname}') for n in shape)}]"
                for pname, shape in layer.params.items() if pname not in layer.tied]
    for c in layer.children:
        if c.order is not None or not c.param_count():
            continue
        for m in c.walk():
            for pname, shape in m.params.items():
                if pname in m.tied:
                    continue
                name = (m.path[len(layer.path) + 1:] + "." + pname).replace(".", "_")
                out.append(f"param {name}[{', '.join(sz.size(n, f'{m.path}.{pname}') for n in shape)}]")
    if out:
        out.insert(0, f"# built but never called by the forward (parameters only): "
                      f"{', '.join(c.name for c in layer.children if c.order is None and c.param_count())}"
                      f"{' (the whole layer)' if skipped else ''}")
    return out
