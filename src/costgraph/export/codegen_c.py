"""C emitter of :mod:`costgraph.export.codegen`: checked integer arithmetic.

The generated file is a header with ``static inline`` functions (include it
in one or more translation units; C99, GCC ≥ 5 or Clang ≥ 3.8 for
``__builtin_add_overflow`` and friends). Integers are ``int64_t``, or
``__int128`` when compiled with ``-DCOSTGRAPH_INT128``. Every addition,
subtraction, multiplication, power and division is checked; a function
returns a status and writes its value only when it is exact:

* ``CG_OK`` (0): ``*cg_out`` holds the exact value;
* ``CG_OVERFLOW``: some intermediate left the type's range;
* ``CG_NOT_WHOLE``: the value is a fraction (sizes that do not divide evenly);
* ``CG_BAD_ARGUMENT``: a dimension is not positive;
* ``CG_DIVISION_BY_ZERO``: a floor division by zero.

The range is thus stated by the type, not by a hand-made bound: whatever
the sizes, the answer is exact or refused.
"""

from __future__ import annotations

import sympy
from sympy.printing.c import C99CodePrinter

from ..errors import CostgraphValueError
from .printing import field_order
from .codegen_program import Program, comment_doc, header_lines
from .codegen_printing import MinMaxAsCalls, NamedSymbols

INT64_MAX = 2 ** 63 - 1


class CheckedCPrinter(NamedSymbols, MinMaxAsCalls, C99CodePrinter):
    """Each operation as a call of a checked helper that ORs a failure into
    ``*cg_st``: ``cg_add(a, b, &cg_st)``, ``cg_mul``, ``cg_sub``,
    ``cg_pow``, ``cg_min``, ``cg_max``, ``cg_floordiv``; integers as
    ``CG_C(n)``."""

    MIN_CALL, MAX_CALL = "cg_min", "cg_max"

    def _print_Integer(self, e):
        if abs(int(e)) > INT64_MAX:
            raise CostgraphValueError(f"the constant {e} does not fit a 64-bit C literal")
        return f"CG_C({int(e)})"

    def _print_Rational(self, e):
        raise ValueError(f"a fraction {e} in an integer formula")   # exact_parts leaves none

    def _print_Add(self, e, order=None):
        terms = list(e.args)
        out = self._print(terms[0])
        for t in terms[1:]:
            c, rest = t.as_coeff_Mul()
            if c.is_Number and c < 0:
                out = f"cg_sub({out}, {self._print(-t)}, &cg_st)"
            else:
                out = f"cg_add({out}, {self._print(t)}, &cg_st)"
        return out

    def _print_Mul(self, e):
        c, rest = e.as_coeff_Mul()
        factors = list(sympy.Mul.make_args(rest)) if rest != 1 else []
        if c == -1 and factors:
            out = self._print(factors[0])
            for f in factors[1:]:
                out = f"cg_mul({out}, {self._print(f)}, &cg_st)"
            return f"cg_neg({out}, &cg_st)"
        out = self._print(c) if c != 1 or not factors else self._print(factors.pop(0))
        for f in factors:
            out = f"cg_mul({out}, {self._print(f)}, &cg_st)"
        return out

    def _print_Pow(self, e):
        if not (e.exp.is_Integer and e.exp >= 0):
            raise ValueError(f"power {e} in an integer formula")
        return f"cg_pow({self._print(e.base)}, {int(e.exp)}, &cg_st)"

    def _print_cg_floordiv(self, e):
        n, d = e.args
        return f"cg_floordiv({self._print(n)}, {self._print(d)}, &cg_st)"


HELPERS = r"""#ifndef COSTGRAPH_CG_HELPERS
#define COSTGRAPH_CG_HELPERS
#include <stdint.h>

#ifdef COSTGRAPH_INT128
typedef __int128 cg_int;
#else
typedef int64_t cg_int;
#endif
#define CG_C(n) ((cg_int)(n##LL))

enum {
    CG_OK = 0,
    CG_OVERFLOW = 1,          /* an intermediate left cg_int's range */
    CG_NOT_WHOLE = 2,         /* the value is a fraction: sizes that do not divide evenly */
    CG_BAD_ARGUMENT = 4,      /* a dimension is not positive */
    CG_DIVISION_BY_ZERO = 8   /* a floor division by zero */
};

static inline cg_int cg_add(cg_int a, cg_int b, unsigned *st) {
    cg_int r;
    if (__builtin_add_overflow(a, b, &r)) *st |= CG_OVERFLOW;
    return r;
}

static inline cg_int cg_sub(cg_int a, cg_int b, unsigned *st) {
    cg_int r;
    if (__builtin_sub_overflow(a, b, &r)) *st |= CG_OVERFLOW;
    return r;
}

static inline cg_int cg_mul(cg_int a, cg_int b, unsigned *st) {
    cg_int r;
    if (__builtin_mul_overflow(a, b, &r)) *st |= CG_OVERFLOW;
    return r;
}

static inline cg_int cg_neg(cg_int a, unsigned *st) {
    return cg_sub(CG_C(0), a, st);
}

static inline cg_int cg_pow(cg_int a, int k, unsigned *st) {
    cg_int r = CG_C(1);
    while (k-- > 0) r = cg_mul(r, a, st);
    return r;
}

static inline cg_int cg_min(cg_int a, cg_int b) { return a < b ? a : b; }

static inline cg_int cg_max(cg_int a, cg_int b) { return a > b ? a : b; }

/* floor(n / d), rounding towards minus infinity (C's / truncates towards zero) */
static inline cg_int cg_floordiv(cg_int n, cg_int d, unsigned *st) {
    if (d == 0) { *st |= CG_DIVISION_BY_ZERO; return 0; }
    if (d == -1) return cg_neg(n, st);
    cg_int q = n / d, r = n % d;
    return (r != 0 && ((r < 0) != (d < 0))) ? q - 1 : q;
}

/* n / d, which must be whole */
static inline cg_int cg_exactdiv(cg_int n, cg_int d, unsigned *st) {
    if (d == 0) { *st |= CG_DIVISION_BY_ZERO; return 0; }
    if (d == -1) return cg_neg(n, st);
    if (n % d != 0) *st |= CG_NOT_WHOLE;
    return n / d;
}

static inline unsigned cg_dim(cg_int v) { return v > 0 ? CG_OK : CG_BAD_ARGUMENT; }

/* v in decimal into buf (at least 41 chars: enough for __int128); returns buf */
static inline char *cg_to_decimal(cg_int v, char *buf) {
    char tmp[41];
    int i = 0, neg = v < 0;
    do {
        int digit = (int)(v % 10);
        tmp[i++] = (char)('0' + (digit < 0 ? -digit : digit));
        v /= 10;
    } while (v != 0);
    int j = 0;
    if (neg) buf[j++] = '-';
    while (i > 0) buf[j++] = tmp[--i];
    buf[j] = '\0';
    return buf;
}
#endif /* COSTGRAPH_CG_HELPERS */
"""


def c_source(program: Program) -> str:
    """A C99 header of ``static inline`` functions ``<model>_<scope>_<quantity>``."""
    names = program.arg_names("c")
    pr = CheckedCPrinter(names)
    guard = f"COSTGRAPH_{program.ident.upper()}_H"
    prefix = program.ident
    out = ["/*"]
    out += [(" * " + ln).rstrip() for ln in header_lines(program)]
    out += [" *",
            " * Each function returns a status (CG_OK = 0 when *cg_out holds the exact value;",
            " * CG_OVERFLOW, CG_NOT_WHOLE, CG_BAD_ARGUMENT, CG_DIVISION_BY_ZERO otherwise) and",
            " * writes *cg_out only when it succeeds. Integers are int64_t, or __int128 with",
            " * -DCOSTGRAPH_INT128; every operation is checked (__builtin_*_overflow, GCC >= 5 or",
            " * Clang >= 3.8), so the range is: every intermediate within the type, else CG_OVERFLOW.",
            " */", f"#ifndef {guard}", f"#define {guard}", "", HELPERS]
    if program.defaults:
        out.append("/* the configuration's values */")
        for d, v in program.defaults.items():
            out.append(f"#define {prefix.upper()}_DEFAULT_{names[d]} CG_C({v})")
        out.append("")
    for f in program.functions:
        doc = comment_doc(program, f, names, lambda n, rename, meaning: f"{n}{rename}: {meaning or '(no description)'}")
        out += ["/*"] + [(" * " + ln).rstrip() for ln in doc] + [" */"]
        params = ", ".join([f"cg_int {names[a]}" for a in f.args] + ["cg_int *cg_out"])
        out.append(f"static inline int {prefix}_{f.name}({params}) {{")
        out.append("    unsigned cg_st = CG_OK;")
        for a in f.args:
            out.append(f"    cg_st |= cg_dim({names[a]});")
        out.append("    if (cg_st) return (int)cg_st;")
        out.append(f"    cg_int cg_num = {pr.doprint(field_order(f.num, expanded=True))};")
        if f.den != 1:
            out.append(f"    cg_int cg_den = {pr.doprint(f.den)};")
            out.append("    if (cg_st) return (int)cg_st;")
            out.append("    cg_int cg_value = cg_exactdiv(cg_num, cg_den, &cg_st);")
            out.append("    if (cg_st) return (int)cg_st;")
            out.append("    *cg_out = cg_value;")
        else:
            out.append("    if (cg_st) return (int)cg_st;")
            out.append("    *cg_out = cg_num;")
        out.append("    return CG_OK;")
        out.append("}")
        out.append("")
    out.append(f"#endif /* {guard} */")
    return "\n".join(out) + "\n"


__all__ = ["c_source", "CheckedCPrinter"]
