"""``costgraph report MODEL --format tex|html|md [-o FILE]``: a report of a
model's costs — closed forms per scope and per block, the symbol legend, the
conventions, numbers with units for a ``--config``/``--set``, and, when asked,
the training memory per device (layout options as ``costgraph train``) and
the inference summary (``--hardware --prompt --generate`` as ``costgraph
infer``).

* ``tex``: a standalone LaTeX document (packages of ``texlive-latex-base``
  only); ``--fragment`` writes the body alone, to ``\\input`` into a paper.
* ``html``: one self-contained page (MathML formulas, inline SVG plots, inline
  CSS; nothing loaded from the network).
* ``md``: Markdown for READMEs and issues.

Examples::

    costgraph report gpt --config gpt2 --format tex -o gpt2.tex
    costgraph report llama --config llama-3-8b --gpus 8 --tp 2 --zero 1 --hardware h100-sxm \\
        --prompt 512 --generate 128 --format html -o llama.html
    costgraph report mixtral --format md
    costgraph report gpt --config gpt2 -o gpt2.md      # the format from the suffix (.tex .html .md)
"""

from __future__ import annotations


def add_parser(sub) -> None:
    from ._analysis import infer_arguments, train_arguments
    from .common import cost_arguments, latex_named
    from .common import model_arguments
    from ._output import output_arguments

    p = sub.add_parser("report", help="a LaTeX, HTML or Markdown report: closed forms per scope and block, "
                                      "symbols, conventions, numbers, training memory and inference")
    model_arguments(p)
    p.add_argument("--format", choices=("tex", "html", "md"), type=latex_named("tex"),
                   help="tex or latex (standalone LaTeX), html (one self-contained page) or md (Markdown); "
                        "default: from -o's suffix (.tex .latex .html .htm .md .markdown)")
    output_arguments(p, help="write to FILE (default: print)")
    p.add_argument("--fragment", action="store_true", help="tex: only the body, to \\input into a paper "
                                                           "(which loads amsmath, array and longtable)")
    cost_arguments(p, scope=False, precision=False)
    p.add_argument("--hardware", help="a hardware preset (costgraph hardware): device memory for the training "
                                      "section, peak and bandwidth for inference")
    train_arguments(p, with_train_flag=True)
    infer_arguments(p)
    p.add_argument("--over", metavar="NAME=VALUES", help="html: the memory plot's sweep, e.g. s=1024:8192:x2 "
                                                         "(default: the values given)")
    p.add_argument("--unit", choices=("GB", "GiB"), default="GB", help="html: bytes axis of the memory plot")


def _plots(args, model, rep, training, inf_rep, capacity) -> list[tuple[str, str]]:
    """Inline SVG plots for the HTML page: FLOPs by block (with numbers), training memory
    (with a layout and numbers), the roofline (with an inference setting)."""
    from ..export import plots
    from ._analysis import parse_over

    out = []
    if rep.numbers:
        share = plots.flops_share(rep.costs, rep.values)
        out.append(("Forward FLOPs by block at the values given.", plots.svg_text(plots.flops_figure(share), True, "flops-")))
    if training is not None and rep.values is not None:
        if args.over is not None:
            symbol, points = parse_over(args.over)
        else:
            symbol = "b" if "b" in model.graph.dims else next(iter(model.symbols))
            info = model.graph.dims[symbol]
            points = [int(rep.values[info.symbol])] if info.symbol in rep.values else []
        if points:
            sweep = plots.memory_sweep_train(model, training, rep.values, symbol, points, capacity)
            out.append((f"Training memory per device by part, over {symbol}.",
                        plots.svg_text(plots.memory_figure(sweep, args.unit), True, "memory-")))
    if inf_rep is not None:
        out.append(("Roofline of the device with the prefill and decode steps.",
                    plots.svg_text(plots.roofline_figure(plots.roofline(inf_rep)), True, "roofline-")))
    return out


#: -o's suffix → the report's format (``report -o gpt2.md`` without ``--format``)
SUFFIX_FORMATS = {".tex": "tex", ".latex": "tex", ".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}


def report_format(fmt: str | None, output: str | None) -> tuple[str, str | None]:
    """``(format, inferred)``: ``--format`` as given, else the one ``-o``'s suffix names
    (:data:`SUFFIX_FORMATS`; ``inferred`` is then the suffix, said in the output).

    Raises
    ------
    CostgraphValueError
        No ``--format`` and no ``-o`` (or ``-o -``), or a suffix that names no format."""
    from pathlib import Path

    from ..errors import CostgraphValueError

    if fmt is not None:
        return fmt, None
    hint = "give --format tex, html or md, or name the file .tex, .html or .md"
    if output is None:
        raise CostgraphValueError("report needs a format: --format, or an -o FILE whose suffix names one", hint=hint)
    suffix = Path(output).suffix.lower()
    if suffix not in SUFFIX_FORMATS:
        shown = repr(suffix[:20]) if suffix else "no suffix"
        raise CostgraphValueError(f"cannot tell the report's format from {str(output)[:80]!r} ({shown})", hint=hint)
    return SUFFIX_FORMATS[suffix], suffix


def run(args) -> str:
    from ..choices import activation_precision
    from ..training.api import training_fits
    from ..errors import CostgraphValueError
    from ..export.reports import build, to_html, to_md, to_tex
    from ._analysis import capacity, infer_given, inference, load, train_given, training

    args.format, inferred = report_format(args.format, args.output)
    if args.fragment and args.format != "tex":
        raise CostgraphValueError("--fragment is for --format tex", hint="a LaTeX body to \\input into a paper")
    if args.over is not None and args.format != "html":
        raise CostgraphValueError("--over sets the sweep of the HTML page's memory plot",
                                  hint="use it with --format html, or costgraph plot --kind memory --over ...")
    if args.over is not None and not train_given(args):
        raise CostgraphValueError("--over sweeps the training-memory plot: it needs a layout",
                                  hint="add --train (one device) or layout options such as --gpus 8 --zero 1")
    model, values = load(args)
    result = fits = None
    cap = capacity(args)
    if train_given(args):
        _, result = training(args, model, values)
        from ..hardware import preset

        from ..training.api import check_reserve

        check_reserve(args.reserve, cap)   # a --reserve no verdict reads refused (trial6: report took 'nan')
        hw = preset(args.hardware) if getattr(args, "hardware", None) else None   # train's runtime reserve
        fits = training_fits(model, result, values, cap, reserve=args.reserve, hw=hw,
                             given=getattr(args, "memory", None) is not None)
    inf_rep = inference(args)[1] if infer_given(args) else None
    rep = build(model, values, config=args.config, convention=args.convention,
                precision=activation_precision(args.precision), causal=args.causal,
                training=result, fits=fits, inference=inf_rep)
    if args.format == "tex":
        text = to_tex(rep, fragment=args.fragment)
    elif args.format == "html":
        text = to_html(rep, _plots(args, model, rep, result, inf_rep, cap))
    else:
        text = to_md(rep)
    if args.output is None:
        return text.rstrip("\n")
    from ._output import write_output

    path = write_output(args, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    said = f", from the suffix {inferred}" if inferred else ""
    return f"wrote {path} ({args.format}{said}, {len(text.encode('utf-8')):,} bytes)"
