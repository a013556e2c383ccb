"""Checks of the arguments given to the public API.

A wrong type given to :func:`costgraph.load`, :meth:`Model.costs`,
:meth:`Costs.evaluate`, :func:`costgraph.from_hf_config` ... raises a
:class:`~costgraph.errors.CostgraphValueError` that names the argument and
what it expects, instead of failing later inside the engine (``loads(None)``
used to end in ``AttributeError``; ``dropout="no"`` was taken as true).

Each check returns the value it accepted, so a public function starts with
one line per argument. This module imports nothing heavy (no SymPy).
"""

from __future__ import annotations

import math
import os
import re
from fractions import Fraction
from typing import Mapping

from .errors import CostgraphValueError


class NumberFormError(CostgraphValueError):
    """A number written in a form no reader takes (:func:`ascii_number`: another script's digits, a misplaced
    ``_``, a leading ``+``); its hint writes the number as meant, so a reader re-raising keeps it."""

# Widest value repeated in a message; a longer one is cut short.
_SHOWN = 60
# Whole numbers are capped as the numbers of a model file are (parser.MAX_DIGITS).
MAX_DIGITS = 100
_LIMIT = 10 ** MAX_DIGITS


def shown(value: object) -> str:
    """A short, printable ``repr`` of ``value`` for messages (never fails:
    huge ints, deep nesting and odd objects are summarized)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * _SHOWN:
        return f"a whole number of about {int(value.bit_length() * 0.30103) + 1} digits"
    try:
        text = repr(value)
    except Exception:   # RecursionError on deep nesting, a broken __repr__...
        return f"a {type(value).__name__}"
    text = "".join(c if c.isprintable() else "\N{REPLACEMENT CHARACTER}" for c in text)
    return text if len(text) <= _SHOWN else text[:_SHOWN - 1] + "…"


def _kind(value: object) -> str:
    return "None" if value is None else type(value).__name__


def _fail(where: str, expected: str, value: object, hint: str | None = None):
    raise CostgraphValueError(f"{where} must be {expected}, got {shown(value)} ({_kind(value)})", hint=hint)


def text(value: object, name: str, *, hint: str | None = None) -> str:
    """``value`` if it is a ``str``."""
    if not isinstance(value, str):
        _fail(f"argument '{name}'", "a string", value, hint)
    return value


def optional_text(value: object, name: str, *, hint: str | None = None) -> str | None:
    """``value`` if it is None or a ``str``."""
    return None if value is None else text(value, name, hint=hint)


def path_like(value: object, name: str, *, hint: str | None = None) -> str:
    """``value`` as a string path if it is a ``str`` or :class:`os.PathLike` of ``str``."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        _fail(f"argument '{name}'", "a string or a path", value, hint)
    return value


def flag(value: object, name: str) -> bool:
    """``value`` if it is ``True`` or ``False`` (not a string such as ``"no"``,
    which Python would take as true)."""
    if not isinstance(value, bool):
        _fail(f"argument '{name}'", "True or False", value)
    return value


def choice(value: object, name: str, choices) -> str:
    """``value`` if it is one of ``choices`` (strings)."""
    names = ", ".join(choices)
    if not isinstance(value, str):
        _fail(f"argument '{name}'", f"one of {names}", value)
    if value not in choices:
        raise CostgraphValueError(f"unknown {name} {shown(value)}", hint="choose one of: " + names)
    return value


def options(value: object, name: str = "options") -> dict[str, object]:
    """A mapping of option name → value (None: no options). The values are
    checked true/false by the builder, which locates the option they set."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        _fail(f"argument '{name}'", "a mapping of option names to True/False, e.g. {'bias': False}", value)
    out = {}
    for k, v in value.items():
        if not isinstance(k, str):
            _fail(f"a key of '{name}'", "an option name (a string)", k)
        out[k] = v
    return out


def whole(value: object, name: str) -> int:
    """``value`` if it is a positive whole number (an ``int``, not a bool) of at
    most :data:`MAX_DIGITS` digits."""
    if not isinstance(value, (bool, int)) and type(value).__name__ in ("int8", "int16", "int32", "int64", "uint8",
                                                                       "uint16", "uint32", "uint64"):
        value = int(value)   # a NumPy integer (sweeps); anything else keeps its type for the message
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        flag = name.startswith("-")   # an option (--tp), or a dimension (h) given with --set
        _fail(f"'{name}'", "a positive whole number", value,
              hint=f"give {name} a whole number above 0 " + (f"(e.g. {name} 2; in Python {name.lstrip('-').replace('-', '_')}=2)"
                                                             if flag else f"(--set {name}=N, or {name}=N in Python)"))
    if value >= _LIMIT:
        raise CostgraphValueError(f"'{name}' is too large: {shown(value)} (at most {MAX_DIGITS} digits)",
                                  hint=f"a whole number of at most {MAX_DIGITS} digits")
    return value


def model_values(model, values: object, name: str = "values") -> dict | None:
    """``values`` of the analyses of :class:`costgraph.Model` (``train``, ``infer``, ``plan``):
    None, or a mapping of the model's dimensions — their symbols (``model.values(...)``) or
    names (``"h"``) — to positive whole numbers; returned keyed by symbol, as SymPy Integers.

    Raises
    ------
    CostgraphValueError
        Not a mapping, a key that names no dimension of the model, or a value that is not a
        positive whole number (as ``--set`` refuses it)."""
    import sympy

    if values is None:
        return None
    if not isinstance(values, Mapping):
        _fail(f"argument '{name}'", "a mapping of dimensions to whole numbers, e.g. model.values('gpt2')", values)
    dims = model.graph.dims
    by_symbol = {d.symbol: d for d in dims.values()}
    out = {}
    for k, v in values.items():
        dim = dims.get(k) if isinstance(k, str) else by_symbol.get(k)
        if dim is None:
            raise CostgraphValueError(f"'{name}' names {shown(k)}, which is no dimension of model '{model.name}'",
                                      hint="dimensions: " + ", ".join(sorted(dims)))
        if hasattr(v, "is_Integer") and getattr(v, "is_Integer", False):
            v = int(v)   # a SymPy Integer, as model.values() gives
        out[dim.symbol] = sympy.Integer(whole(v, dim.name))
    return out


def named_choice(value: object, choice, name: str | None = None) -> object:
    """``value`` if it is one of a :class:`costgraph.choices.Choice`'s values, else the one refusal of a
    named setting, whichever path asks (``train``'s layout, :func:`costgraph.parallel.layout.Layout.filled`;
    ``plan``'s and the other commands' option checks, :func:`costgraph.option_fields.check`): ``unknown
    NAME VALUE (WHAT)`` — the keyword the API and JSON use (``name``, the field's, else the choice's), the
    value, what the setting is — its values as
    the hint (``unknown link_rate 'fast' (link bandwidth convention)``, hint ``one of: nccl, line``).

    Raises
    ------
    CostgraphValueError
        ``value`` is none of ``choice``'s values (a bool never is)."""
    try:
        return choice.check(value)   # a bool refused too (True == 1 is no stage)
    except (ValueError, TypeError):
        name = choice.name if name is None else name
        what = "" if choice.what == name.replace("_", " ") else f" ({choice.what})"
        raise CostgraphValueError(f"unknown {name} {shown(value)}{what}", hint=choice.hint()) from None


def positive_number(value: object, name: str) -> object:
    """``value`` if it is None or a positive number (an int, a float or text read by
    :func:`rational`); not a bool."""
    if value is None:
        return None
    if rational(value, name) <= 0:
        raise CostgraphValueError(f"{name} must be positive, not {shown(value)}",
                                  hint="a positive number: an int, a float or text such as '1e9'")
    return value


def dim_values(values: Mapping[str, object]) -> dict[str, int]:
    """Keyword dimension values (``h=768``): each a positive whole number."""
    return {k: whole(v, k) for k, v in values.items()}


def dims_given(dims: Mapping, config: object, given: object, keywords: dict) -> tuple[str | None, dict[str, int]]:
    """``(config, values)`` of :meth:`Model.values`/``evaluate``/``compile``: ``given`` a mapping
    (name or symbol → value; None for none) then the keyword values. A keyword ``config`` names the
    configuration, as before, unless the model has a dimension named ``config`` (then it is that
    dimension's value; pass the configuration positionally)."""
    keywords = dict(keywords)
    if config is None and "config" in keywords and "config" not in dims:
        config = keywords.pop("config")
    if given is not None and not isinstance(given, Mapping):
        _fail("argument 'given'", "a mapping of dimension names to values", given, None)
    merged = {str(k): v for k, v in (given or {}).items()}
    return optional_text(config, "config"), dim_values({**merged, **keywords})


def missing_values_hint(configs: Mapping) -> str:
    """The hint when :meth:`Costs.evaluate` lacks values: keywords or a configuration, in API terms."""
    named = ", ".join(repr(c) for c in configs)
    return ("give them as keywords, evaluate(h=4096, ...), or name a configuration"
            + (f": evaluate({next(iter(configs))!r}); its configurations: {named}" if configs else ""))


def finite(value: float, name: str) -> float:
    """``value`` if it is a finite number."""
    if isinstance(value, float) and not math.isfinite(value):
        _fail(f"'{name}'", "a finite number", value)
    return value


def costs_args(scope: object, convention: object, precision: object, causal: object,
               precision_type: type = str) -> None:
    """The arguments of :meth:`Model.costs`: strings (``precision`` may also be a
    ``precision_type``, the caller's :class:`~costgraph.engine.precision.Precision`: this floor
    imports no engine); their values are checked there."""
    text(scope, "scope", hint="model, layer, or the path of a repeat group, block or node")
    text(convention, "convention", hint="matmul or all")
    if not isinstance(precision, (str, precision_type)):
        _fail("argument 'precision'", "a precision name (bf16, fp16, fp32) or a Precision", precision)
    text(causal, "causal", hint="full, half or exact")


def model_text(value: object, name: str = "text") -> str:
    """The text of a model file, as a ``str``."""
    if isinstance(value, (bytes, bytearray)):
        raise CostgraphValueError(f"argument '{name}' must be text (a str), got bytes",
                                  hint="decode it first: data.decode('utf-8')")
    return text(value, name, hint="the text of a model file, e.g. open('model.cg').read()")


def digits(text: str) -> bool:
    """``text`` is one or more ASCII digits 0-9 (``str.isdigit`` is also true of '１', '١' and '²', which
    ``int`` reads or fails on)."""
    return text.isascii() and text.isdigit()


def ascii_number(text: str, what: str, *, pair: bool = False) -> str:
    """``text`` as given when it is a number as the command line writes it: the ASCII digits 0-9 (Python's
    ``int('１６')`` and ``float('١٦')`` read other scripts' digits; the readers of sizes, rates and ``--set``
    do not), ``_`` only between groups of three digits, as a thousands separator (``1_024``,
    ``7_500_000_000``; ``int('7_68')`` is 768: ``--set h=7_68`` read 768) and no leading ``+`` (``int('+8')``
    is 8: ``--gpus +8`` ran while ``--set h=+768`` was refused): one rule for every number the command line
    and the API read (issue 30; issue 31's review). ``pair``: ``text`` is ``NAME=VALUES`` (``--set``,
    ``--over``), whose name may hold ``_``: the separator and the sign are looked for after the ``=`` (a value
    of a list, after a ``,``, is one too; ``--over``'s arithmetic step ``a:b:+K`` is no sign).

    Raises
    ------
    CostgraphValueError
        A character that is not ASCII (a full-width digit, a non-breaking space, '−'), named with its
        Unicode name; the hint writes the number in ASCII where Unicode can (each decimal digit's value,
        then the compatibility form NFKC: '１．５' → 1.5). A ``_`` or a leading ``+``: the hint writes the
        number without it."""
    if not isinstance(text, str):
        return text
    if not text.isascii():
        _not_ascii(text, what)
    head, eq, body = text.partition("=") if pair else ("", "", text)
    separated = any(not _THOUSANDS.fullmatch(m[0]) or (m.start() and body[m.start() - 1] in ".eE")
                    for m in _SEPARATED.finditer(body))
    if not separated and not _SIGNED.search(body):
        return text
    bad = "'_'" if separated else "a sign '+'"
    plain = head + eq + _SEPARATOR.sub("", _SIGNED.sub(lambda m: m[0][:-1], body))
    shown_as = f"{what} {plain}" if what.startswith("-") else plain   # a flag's value as the command line writes it
    example = f": {shown_as}" if plain.isprintable() and len(plain) <= 40 else ""
    why = ("'_' in a number only separates groups of three digits (1_024, 7_500_000_000)" if separated
           else "a number is written without a sign '+'")
    raise NumberFormError(f"{what} {shown(text)}: {why}".lstrip(), hint=f"write it without {bad}{example}")


#: a leading '+' of a number, or of a value of a list (``--over s=1,+2``)
_SIGNED = re.compile(r"(?:^|,)\s*\+(?=[0-9.])")
#: '_' beside a digit: Python's separator (``7_68``; ``__import__`` is no number, left to the reader's grammar)
_SEPARATOR = re.compile(r"(?<=[0-9])_+|_+(?=[0-9])")
#: a run of digits with '_' beside them (``1_024``, ``7_68``, ``1__0``, ``5_``)
_SEPARATED = re.compile(r"_*[0-9]+(?:_+[0-9]*)+|_+[0-9]+")
#: thousands separators: 1 to 3 digits, then groups of exactly three (a fraction or exponent takes none)
_THOUSANDS = re.compile(r"[0-9]{1,3}(?:_[0-9]{3})+")


def _not_ascii(text: str, what: str):
    """Raise :func:`ascii_number`'s error for ``text`` with a character that is not ASCII."""
    import unicodedata

    ch = next(c for c in text if not c.isascii())
    name = unicodedata.name(ch, f"U+{ord(ch):04X}")
    kind = "digit" if ch.isdigit() else "character"
    plain = "".join(str(unicodedata.decimal(c)) if unicodedata.decimal(c, None) is not None else c for c in text)
    plain = unicodedata.normalize("NFKC", plain).replace("\u2212", "-").strip()
    shown_as = f"{what} {plain}" if what.startswith("-") else plain   # a flag's value as the command line writes it
    example = f": {shown_as}" if plain.isascii() and plain.isprintable() and len(plain) <= 40 else ""
    raise NumberFormError(f"{what} {shown(text)}: {ch!r} ({name}) is not an ASCII {kind}".lstrip(),
                              hint=f"write numbers with the ASCII digits 0-9{example}")


_DECIMAL = re.compile(r"\s*([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]{1,2}))?\s*")
#: a whole number in plain ASCII digits, signed or not (token_count: its range is the option's check)
_INT = re.compile(r"\s*-?[0-9]{1,%d}\s*" % MAX_DIGITS)
_COUNT = re.compile(r"\s*([0-9][0-9_]*)(?:\.([0-9]+))?(?:[eE]([0-9]{1,2}))?\s*")


def parse_rational(text: str, what: str):
    """``0.45``, ``140e12``, ``2.5`` → an exact SymPy Rational (never evaluated as code).
    ``what`` names the value in the message (``--mfu``).

    Raises
    ------
    CostgraphValueError
        Text not of that form, or longer than 40 characters."""
    import sympy

    ascii_number(text, what)
    plain = text.replace("_", "") if isinstance(text, str) else text   # thousands separators only (ascii_number)
    m = _DECIMAL.fullmatch(plain or "")
    if not m and len(text or "") <= 40 and _DECIMAL.fullmatch(plain.strip().removeprefix("-")):
        raise CostgraphValueError(f"{what} {text.strip()!r} is negative",
                                  hint="a number without a minus sign, such as 0.45, 2.5 or 140e12")
    if not m or len(text) > 40:
        raise CostgraphValueError(f"cannot read {what} {text[:40]!r}", hint="a number such as 0.45, 2.5 or 140e12")
    frac = m.group(2) or ""
    return sympy.Rational(int(m.group(1) + frac), 10 ** len(frac)) * sympy.Rational(10) ** int(m.group(3) or 0)


_FRACTION = re.compile(r"\s*([0-9]{1,20})\s*/\s*([0-9]{1,20})\s*")


def parse_fraction(text: str, what: str):
    """``1/3`` (an exact fraction ``p/q`` of whole numbers, read by a strict pattern and
    :class:`fractions.Fraction`, never evaluated) or a decimal as :func:`parse_rational` reads it
    (``0.45``) → an exact SymPy Rational.

    Raises
    ------
    CostgraphValueError
        Text of neither form, or a zero denominator."""
    import sympy

    ascii_number(text, what)
    m = _FRACTION.fullmatch(text or "")
    if m is None:
        try:
            return parse_rational(text, what)
        except CostgraphValueError as e:
            raise CostgraphValueError(e.message, hint="a number such as 0.45 or an exact fraction such as 1/3") \
                from None
    if int(m.group(2)) == 0:
        raise CostgraphValueError(f"{what} {text.strip()!r} divides by zero", hint="a fraction p/q with q > 0, e.g. 1/3")
    f = Fraction(int(m.group(1)), int(m.group(2)))
    return sympy.Rational(f.numerator, f.denominator)


#: what :func:`rational` accepts, the hint of each of its refusals
NUMBER_HINT = ("a finite number: an int, a float, decimal text such as '0.45' or '140e12', a Fraction or a SymPy "
               "Rational (not nan, inf or a bool)")


def rational(value: object, what: str):
    """A number given to the API as an exact SymPy Rational: an ``int`` or a SymPy Rational as is,
    a ``float`` by its shortest decimal (``0.45`` → 9/20, as the CLI reads ``--mfu 0.45``), a
    ``str`` by :func:`parse_rational`; None stays None.

    Raises
    ------
    CostgraphValueError
        Any other type, a float that is not finite, or text :func:`parse_rational` refuses."""
    import sympy

    if value is None:
        return None
    if isinstance(value, str):
        return parse_rational(value, what)
    if isinstance(value, bool):
        _fail(what, "a number", value, hint=NUMBER_HINT)
    if isinstance(value, int):
        return sympy.Integer(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            _fail(what, "a finite number", value, hint=NUMBER_HINT)
        return sympy.Rational(repr(value))
    if isinstance(value, sympy.Rational):
        return value
    if isinstance(value, Fraction):
        return sympy.Rational(value.numerator, value.denominator)
    _fail(what, "a number (int, float, decimal text, Fraction or SymPy Rational)", value, hint=NUMBER_HINT)


def share(value, what: str, given: object = None):
    """``value`` (an exact number, as :func:`rational` gives it) if it is a share in (0, 1] (``--mfu``,
    ``--efficiency``: of the peak); ``given``: the value as the user wrote it, for the message.

    Raises
    ------
    CostgraphValueError
        A value of 0 or less, or above 1; the hint names what is accepted."""
    if value is not None and not 0 < value <= 1:
        raise CostgraphValueError(f"{what} {str(value if given is None else given)[:40]} is not a fraction in (0, 1]",
                                  hint=f"a share of the peak above 0 and at most 1, e.g. {what} 0.45 (45 %); "
                                       "in Python a float, a Fraction or text such as '0.45'")
    return value


def token_count(value: object, name: str) -> object:
    """A count as the API takes it: text read by :func:`parse_count` (``"1e12"``, ``"1_280"``: the command
    line's rule, ``_`` only between groups of three digits, no ``+``), a whole float as its int (``1e12``);
    plain ASCII digits (``"0"``, ``"-1"``) as their int, its range checked where it is used, as anything else
    (a fractional float) is. Every count keyword of the API and flag of the command line is read so (the
    options' fields checked ``whole``: :func:`costgraph.option_fields.resolve`; the layout's degrees:
    :meth:`costgraph.parallel.layout.Layout.filled`; ``infer``'s ``prompt``, ``generate``, ``batch``; the flags'
    argparse type :func:`costgraph.option_fields.count_type`)."""
    if isinstance(value, str):   # the example: a count of tokens (--prompt 1e6), else a small one (--tp 2)
        if value.isascii() and _INT.fullmatch(value):   # "0", "-1": an int, its range the option's check
            return int(value)
        return parse_count(value, name, "1e6 or 1_000_000" if name in ("--prompt", "--generate", "--tokens")
                           else f"{name} 2" if name.startswith("-") else "2")
    return int(value) if isinstance(value, float) and value.is_integer() else value


def parse_count(text: str, flag: str = "--params", example: str = "7.5e9 or 7500000000") -> int:
    """``7.5e9``, ``7500000000`` or ``7_500_000_000`` → 7500000000 (a positive whole number; ``_`` only
    between groups of three digits, no ``+``: :func:`ascii_number`); errors name ``flag``.

    Raises
    ------
    CostgraphValueError
        Text not of that form, more than 30 digits, or not a positive whole number."""
    ascii_number(text, flag)
    m = _COUNT.fullmatch(text or "")
    if not m:
        raise CostgraphValueError(f"cannot read {flag} {text[:40]!r}", hint=f"a whole number, e.g. {example}")
    whole, frac, exp = m.group(1).replace("_", ""), m.group(2) or "", int(m.group(3) or 0)
    if len(whole) + len(frac) > 30:
        raise CostgraphValueError(f"{flag} is too large", hint="a whole number of at most 30 digits, e.g. 7.5e9")
    num, den = int(whole + frac) * 10 ** exp, 10 ** len(frac)
    if num % den or num == 0:
        raise CostgraphValueError(f"{flag} {text!r} is not a positive whole number",
                                  hint=f"a whole number above 0, e.g. {example}")
    return num // den


def whole_at_prompt(model, values, prompt: int, batch: int) -> None:
    """Every size of ``model`` must come out a positive whole number at the prompt (``s`` =
    ``prompt``, ``b`` = ``batch``, the other dimensions from ``values``, keyed by symbol), as
    ``derive --set s=P`` checks: LLaVA's text tokens ``t = s − ni`` refuse a prompt shorter than its
    image tokens. Nothing is checked without ``values`` or without both ``s`` and ``b``.

    Raises
    ------
    CostgraphValueError
        The located message of the first size that is not whole and positive (a bound on ``s`` worded as
        one on the prompt)."""
    dims = model.graph.dims
    if values is None or "s" not in dims or "b" not in dims:
        return
    named = {d.symbol: name for name, d in dims.items()}
    given = {named[k]: int(v) for k, v in values.items() if named.get(k) not in (None, "s", "b")}
    try:
        model._check_whole({**given, "s": prompt, "b": batch})
    except CostgraphValueError as e:   # s is the prompt here: the hint says so (issue 30: the 576 image tokens)
        if e.hint and e.hint.startswith("s must be"):
            raise CostgraphValueError(e.message, e.loc, hint=f"the prompt s (--prompt {prompt}; prompt= in Python)"
                                                            + e.hint[1:]) from None
        raise


def value_warnings(values: Mapping | None) -> list[str]:
    """Values that are legal but probably not meant: a sequence longer than a learned position
    table (``s > s_max``). ``values``: dimension symbol (or name) → whole number."""
    out = []
    v = {str(k): int(x) for k, x in (values or {}).items()}
    if "s" in v and "s_max" in v and v["s"] > v["s_max"]:
        out.append(f"s = {v['s']:,} is longer than s_max = {v['s_max']:,}: the learned position table "
                   f"has s_max rows, so the model cannot read that many tokens as built")
    return out
