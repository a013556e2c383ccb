"""Formulas print in the field's order, and printing is deterministic."""

import sympy

from costgraph.export.printing import field_order, to_latex, to_python, to_text
from costgraph.engine.symbols import dim

b, s, h, a, l, V, s_max = (dim(n) for n in ("b", "s", "h", "a", "l", "V", "s_max"))


def test_layer_flops_in_field_order():
    e = sympy.expand(24 * b * s * h**2 + 4 * b * s**2 * h)
    assert to_latex(field_order(e)) == "24 b s h^{2} + 4 b s^{2} h"
    assert to_text(field_order(e)) == "24 b s h^2 + 4 b s^2 h"
    assert to_python(field_order(e)) == "24*b*s*h**2 + 4*b*s**2*h"


def test_activations_and_params_order():
    assert to_text(field_order(5 * a * s**2 * b + 34 * s * b * h)) == "34 b s h + 5 b s^2 a"
    assert to_text(field_order(V * h + 12 * h**2 * l + 13 * h * l + h * s_max + 2 * h)) == \
        "12 l h^2 + 13 l h + h V + h s_max + 2 h"


def test_printed_form_is_equal_to_the_expression():
    e = sympy.expand(l * (24 * b * s * h**2 + 4 * b * s**2 * h) + 2 * b * s * h * V + b * s * h**2 / a)
    assert sympy.expand(field_order(e) - e) == 0


def test_python_string_round_trips_through_a_whitelisted_parse():
    # The JSON `expr` is SymPy/Python infix; reading it back (by a consumer, on
    # its own trusted output) gives the same expression.
    e = sympy.expand(24 * b * s * h**2 + 4 * b * s**2 * h)
    back = sympy.parse_expr(to_python(field_order(e)), local_dict={"b": b, "s": s, "h": h})
    assert sympy.expand(back - e) == 0


def test_same_input_prints_same_bytes():
    e = sympy.expand(34 * s * b * h + 5 * a * s**2 * b)
    assert {to_latex(field_order(e)) for _ in range(5)} == {"34 b s h + 5 b s^{2} a"}


# --- units past the largest prefix in scientific notation (costgraph.numbers.units; issue 18) ------------------------

def test_bytes_past_the_largest_prefix_in_scientific_notation():
    from costgraph.numbers.units import PAST_PREFIXES, decimal, nbytes, with_unit

    assert PAST_PREFIXES == 10**33
    assert nbytes(10**33 - 10**30) == "999.00 QB, 788.07 QiB"      # still prefixed: 999·10³⁰ / 2¹⁰⁰
    assert nbytes(2 * 10**99) == "2.000 x 10⁹⁹ bytes"
    assert with_unit("activation_bytes", 16 * 10**99) == f"{16 * 10**99:,} bytes (1.600 x 10¹⁰⁰ bytes)"
    assert decimal(13265616.4, 0) == "13,265,616" and decimal(153.537, 2) == "153.54"
    assert decimal(2.1933888e91) == "2.193 x 10⁹¹"


# --- a FLOP count past the SI prefixes keeps its space (new-user trial) ----------------------------------------------

# sweeps past 2^63: exact in Python integers, refused by name in int64/float64
def _gpt2_forward(s, b=1, l=12, h=768, V=50257):
    """DOMAIN.md §3: l(24bsh² + 4bs²h) + 2bshV ('matmul' convention, full attention)."""
    return l * (24 * b * s * h * h + 4 * b * s * s * h) + 2 * b * s * h * V


def test_flops_past_the_largest_si_prefix_keep_a_space():
    from costgraph.numbers import units

    n = _gpt2_forward(2 ** 63)     # 3.136 × 10⁴² FLOP
    assert units.flops(n) == "3.136 x 10⁴² FLOP"
    assert units.with_unit("flops_forward", n) == f"{n:,} FLOP (3.136 x 10⁴² FLOP)"
    assert units.flops(291_648_307_200) == "291.6 GFLOP"


def test_tables_align_as_rich_draws_them():
    # costgraph.export.tables aligns cells of one-column characters itself (a cold start without rich):
    # the lines are rich's, byte for byte, over random tables of the characters reports print (×, −, ≤, ·, µ,
    # ², …), empty cells, ragged rows, headers or none, either justification, any indent and gap
    import random

    from costgraph.export import tables

    rnd = random.Random(31)
    chars = "abcXYZ019   .,:-_()[]/%×−≤≥·µ²³…→←≈∑ΨΩ"   # spaces at the ends too: rich trims a right-justified cell
    for _ in range(400):
        ncol = rnd.randint(1, 6)
        rows = [["".join(rnd.choice(chars) for _ in range(rnd.choice((0, 1, 3, 12)))) for _ in range(rnd.randint(0, ncol))]
                for _ in range(rnd.randint(1, 5))]
        heads = [f"h{i}" * rnd.randint(0, 3) for i in range(ncol)] if rnd.random() < 0.5 else None
        align = [rnd.choice(("left", "right", "right")) for _ in range(ncol)] if rnd.random() < 0.7 else None
        indent, gap = rnd.randint(0, 4), rnd.randint(1, 3)
        width = max(len(r) for r in ([heads] if heads else []) + rows)
        if not width:
            continue
        full = [r + [""] * (width - len(r)) for r in rows]
        hs = list(heads or []) + [""] * (width - len(heads or []))
        assert tables.table(rows, heads, align=align, indent=indent, gap=gap) == \
            tables._rich(full, hs, bool(heads), align, indent, gap), (rows, heads, align)
    # wide characters are rich's to measure (two columns each)
    assert tables.table([["数据", "1"], ["a", "22"]]) == ["  数据  1", "  a     22"]


def test_a_report_table_does_not_import_rich():
    # issue 31 item 8: the cold derive's tables are aligned without rich (a tenth of a second to import)
    import subprocess
    import sys

    code = ("import sys; from costgraph.export.tables import table; "
            "assert table([['params', '124,439,808'], ['FLOPs', '2.9 × 10¹¹']], ['q', 'v'], align=['left', 'right']); "
            "assert 'rich' not in sys.modules")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
