"""The front end of a Whisper-like speech encoder over a log-Mel spectrogram, drafted from its traced modules
(issue 28 item 2, ``input_features``).

transformers 5.24 modeling_qwen2_audio.py ``Qwen2AudioEncoder.forward`` (and Whisper's, Voxtral's, AudioFlamingo 3's,
GLM-ASR's alike): ``gelu(conv1(input_features))``, ``gelu(conv2(...))``, ``permute(0, 2, 1)``, then ``+
embed_positions.weight`` (the whole table of ``max_source_positions`` rows: the forward checks ``input_features``
has ``max_source_positions · conv1.stride · conv2.stride`` frames). ``conv1 = nn.Conv1d(num_mel_bins, d_model,
kernel_size=3, padding=1)``, ``conv2 = nn.Conv1d(d_model, d_model, kernel_size=3, stride=2, padding=1)``: each
convolution's output length is PyTorch's ``⌊(n + 2·padding − k)/stride⌋ + 1`` (the ``dense_conv1d`` operator's), so
that a stem without a table (GLM-ASR's: rotary positions) runs ``⌊(s − 1)/2⌋ + 1`` positions of ``s`` frames. The
table, ``requires_grad_(False)`` in all of them, is written ``: frozen`` where the trace saw it so. The statements are
those of the bundled ``models/whisper.cg``. Torch-free: module facts and integers only.
"""

from __future__ import annotations

from .facts import Module
from .writer import Sizer


def _convs(pre: list[Module]) -> list[Module]:
    """The Conv1d modules (weight ``[out, in, k]``) called first before the layers, in call order."""
    out = []
    for m in pre:
        if m.cls != "Conv1d" or len(m.params.get("weight", ())) != 3:
            break
        out.append(m)
    return out


def _table(root: Module, rows: int, width: int) -> Module | None:
    """The position table the forward reads whole (an nn.Embedding never called, weight ``[rows, width]``)."""
    return next((m for m in root.children if m.cls == "Embedding" and m.order is None
                 and m.params.get("weight") == (rows, width)), None)


def mel_front(root: Module, pre: list[Module], sz: Sizer, names) -> tuple[list[str], list[str], list[Module]] | None:
    """(input declarations, statements, modules drafted) of a spectrogram encoder's stem, or None where ``pre`` does
    not begin with Conv1d modules over the probe's Mel bins. Where the stem's output adds a position table of ``se``
    rows, sets ``sz.seq`` to the frames it needs (``2 * se`` for a stride-2 stem) and marks the table drafted.
    ``names``: the node names (:class:`costgraph.drafting.model_file._Names`)."""
    convs = _convs(pre)
    values = sz.probe.symbol_values()
    if not convs or "mel" not in values or convs[0].params["weight"][1] != values["mel"]:
        return None
    lines, x, stride = [], "features", 1
    for m in convs:
        out, cin, k = m.params["weight"]
        groups, pad, st = (m.attrs.get(a, d) for a, d in (("groups", 1), ("padding", 0), ("stride", 1)))
        if not all(isinstance(v, int) for v in (groups, pad, st)):
            return None
        opts = [f"kernel = {k}"] + [f"{a} = {v}" for a, v, d in (("stride", st, 1), ("padding", pad, 0),
                                                                   ("groups", groups, 1)) if v != d]
        bias = "" if "bias" in m.params else ", bias = false"
        lines.append(f"x = gelu(dense_conv1d({x}, {sz.size(out, 'stem width')}, {', '.join(opts)}{bias}, "
                     f"name = {names(m)}))")
        x, stride = "x", stride * st
    lines.append("x = transpose(x)   # [b, positions, h]")
    h = convs[-1].params["weight"][0]
    rows = values.get("se")
    table = _table(root, rows, h) if rows else None
    if table is not None:
        frozen = ": frozen" if "weight" in str(table.attrs.get("frozen", "")).split(",") else ""
        name = names(table)    # named once (the names are unique at the top level: a second call gives another)
        lines.append(f"param {name}[{sz.size(rows, 'position table rows')}, {sz.size(h, 'hidden size')}]"
                     f"{frozen}   # read whole: the frames are {stride} per row")
        lines.append(f"x = x + {name}")
        table.order = -1      # read by the forward (its weight, never called): not among the uncalled modules
        sz.seq = f"{stride} * se"
        sz.seq_dims = [f'  dim s = {sz.seq} "spectrogram frames: the stem\'s output adds the position table whole"']
    sz.size(values["mel"], "Mel bins")
    return [f"input features[b, mel, s]"], lines, convs


def pool_line(m: Module) -> str | None:
    """The statement of an ``nn.AvgPool1d(k, stride=k)`` over the positions of ``x [b, positions, h]`` (transformers 5.24
    modeling_qwen2_audio.py ``Qwen2AudioEncoder.forward``: ``permute(0, 2, 1)``, ``avg_pooler``, ``permute(0, 2, 1)``,
    views about the pool), or None for another kernel, stride or padding."""
    k, stride, pad = (m.attrs.get(a) for a in ("kernel_size", "stride", "padding"))
    if not isinstance(k, int) or stride != k or pad not in (0, None):
        return None
    return f"x = transpose(avg_pool1d(transpose(x), kernel = {k}))   # [b, positions / {k}, h]"
