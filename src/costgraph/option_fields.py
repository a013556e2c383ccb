"""Options declared once, as fields of a frozen dataclass (issue 31 item 1).

An *options dataclass* (:class:`costgraph.train_options.TrainOptions`, ``PlanOptions``,
:class:`costgraph.infer_options.InferOptions`, :class:`costgraph.fit_options.FitOptions`,
:class:`costgraph.layout_options.LayoutOptions`) declares each
option once, with :func:`option`: its field name is the API keyword and the JSON name; its metadata (a
:class:`Spec`) carries the command-line flag, the help line, the choices (a
:class:`costgraph.choices.Choice` or a tuple), the unit, the value check and what ``argparse`` needs
beyond that (``type``, ``action``, ``metavar``, ``required``). Everything else is generated from the
fields, here:

* :func:`add_arguments`: the ``argparse`` arguments of a range of fields (the command's ``--help`` in
  declaration order; ``dest`` is the field name; a ``group`` left out: the layout's LoRA flags);
  :func:`add_argument_of`: one field as another command's optional argument (``report``'s inference
  section); :func:`like`: a field declared again in another class (``plan``'s layout options);
* :func:`from_namespace` / :func:`namespace_values`: the options object (or its values) of a parsed
  command line, each field read under its ``dest``; :func:`cli_defaults` and
  :func:`flag_of`: the command line's defaults and flags by field (``costgraph fit``'s serving group);
* :func:`resolve`: an options object from a base object and keyword overrides, an unknown keyword
  refused with a did-you-mean hint (the check of ``Model.train(**overrides)``, ``Model.plan``);
* :func:`keywords_checked`: the class's constructor refuses an unknown keyword with a did-you-mean hint
  (a command-line name such as ``tp`` hinted as its field, :func:`command_line_names`);
* the planner's search space: a field's :class:`Domain` (read by :func:`costgraph.options.search_options`);
* :func:`check`: every field's value checked, in declaration order, with the messages the commands
  print (``--mfu must be positive``; :mod:`costgraph.arguments`);
* :func:`json_schema`: a JSON Schema object of the options (``costgraph schema train`` embeds it as
  ``$defs/options``), each property with its type, ``enum`` (the choices), unit and description.

A new option is one field (plus the code that uses it): ``tests/test_option_fields.py`` adds one.
This module imports only the standard library and :mod:`costgraph.choices` at import (the CLI builds
``--help`` from it without loading the engine).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import MISSING, dataclass

from .choices import Choice

#: the value checks a field may name (:func:`check`): how each is checked, by :mod:`costgraph.arguments`
CHECKS = ("choice", "flag", "positive", "whole", "size", "number")


@dataclass(frozen=True)
class Spec:
    """What one option field carries beside its default (module docstring). ``flag``: the command-line
    flag, None for an API-only option; ``choices``: a :class:`~costgraph.choices.Choice` or a tuple of
    values; ``unit``: the unit of its value (``FLOP/s``, ``bytes``, ...); ``check``: one of
    :data:`CHECKS` (``optional``: None passes it too); ``domain``: the planner's search domain
    (:mod:`costgraph.options`), where it has one; ``argparse``: further ``add_argument`` keywords;
    ``group``: the mode it belongs to where a command has several (``costgraph fit``: ``serve``);
    ``dest``: the parsed command line's name where it is not the field's (the Layout's ``t``: ``tp``);
    ``given``: a setting ``plan`` takes as given and passes to every row, never searched (the software the cluster
    runs, a convention of the time model: :func:`given_fields`); ``label``: the words a report names it by before
    its flag and value (plan's header: ``links at --link-rate nccl``); ``named``: where a report names it,
    ``changed`` (away from its default only) or ``always`` (its default too, said so)."""

    flag: str | None
    help: str | None = None
    choices: object = None
    unit: str | None = None
    check: str | None = None
    optional: bool = False
    domain: object = None
    argparse: tuple = ()
    group: str | None = None
    dest: str | None = None
    given: bool = False
    label: str | None = None
    named: str = "changed"

    @property
    def values(self) -> tuple | None:
        """The allowed values (of the Choice, or the tuple), or None."""
        return self.choices.values if isinstance(self.choices, Choice) else self.choices


@dataclass(frozen=True)
class Domain:
    """The planner's search domain of an option field (``Spec.domain``; :mod:`costgraph.options` reads
    it): ``kind`` — ``degree`` (a column of the grid), ``option`` (tried on every layout of degrees),
    ``split`` (per pipeline degree ``p``: ``values(space, p)``) or ``variant`` (each value its own closed
    forms); ``values`` — a function of the planner's :class:`~costgraph.options.Space` (the name of one
    of :mod:`costgraph.options`'s functions, or a callable) giving the values tried; ``not_searched`` — why
    its other values are not tried where only its default is; ``extra`` — a variant's ``group`` and
    ``requires`` (field → the values of the others it needs); ``key`` — the name the planner's search
    and its JSON use where it is not the field's (the layer split of ``--decoder-first-pipeline-num-layers``
    and ``--account-for-*``: ``split``); ``flag`` — the flags it stands for, where several."""

    kind: str
    values: object
    not_searched: str = ""
    extra: dict | None = None
    key: str | None = None
    flag: str | None = None


def option(flag: str | None, help: str | None = None, *, default=MISSING, choices=None, unit: str | None = None,
           check: str | None = None, optional: bool = False, domain: Domain | None = None, cli_default=MISSING,
           group=None, dest: str | None = None, given: bool = False, label: str | None = None, named: str = "changed",
           **argparse_kw):
    """A dataclass field declaring one option (module docstring). With a :class:`Choice` and no
    ``default``, the default is the choice's; with no ``help``, each value's meaning. ``cli_default``:
    the command line's default where it differs from the API's (``costgraph infer --weights``: None,
    a config.json's dtype; the API: bf16). ``domain``: the planner's search domain (:class:`Domain`);
    ``dest``: the parsed command line's name where it differs from the field's; ``given``, ``label``, ``named``:
    :attr:`Spec.given`, :attr:`Spec.label`, :attr:`Spec.named`."""
    if cli_default is not MISSING:
        argparse_kw["default"] = cli_default
    if isinstance(choices, Choice):
        default = choices.default if default is MISSING else default
        help = choices.help() if help is None else help
    if check is not None and check not in CHECKS:   # a mistake in a declaration, not the user's
        raise AssertionError(f"unknown check {check!r}; one of {CHECKS}")
    if named not in ("changed", "always"):   # a mistake in a declaration, not the user's
        raise AssertionError(f"named {named!r}: changed or always")
    spec = Spec(flag, help, choices, unit, check, optional, domain, tuple(sorted(argparse_kw.items())), group, dest,
                given, label, named)
    return dataclasses.field(default=default, metadata={"option": spec})


def specs(cls) -> dict[str, tuple[dataclasses.Field, Spec]]:
    """Field name → ``(field, spec)`` of the options dataclass ``cls``, in declaration order (a new dict each
    call, from the class's, read once: :meth:`costgraph.parallel.layout.Layout.resolved` asks on every step time)."""
    return dict(_specs(cls))


@functools.lru_cache(maxsize=None)
def _specs(cls) -> dict[str, tuple[dataclasses.Field, Spec]]:
    return {f.name: (f, f.metadata["option"]) for f in dataclasses.fields(cls) if "option" in f.metadata}


def given_fields(cls) -> tuple[str, ...]:
    """The fields of ``cls`` declared ``given`` (:attr:`Spec.given`), in declaration order: what ``plan`` passes to
    every row, its check command, ``--compare`` and its settings (:mod:`costgraph.training.plan`)."""
    return tuple(name for name, (_, s) in _specs(cls).items() if s.given)


def add_arguments(parser, cls, first: str | None = None, last: str | None = None, without: str | None = None,
                  skip: tuple = ()) -> None:
    """Add the arguments of ``cls``'s fields from ``first`` to ``last`` (both included; None: from the
    first, to the last) that have a flag to ``parser`` (a parser or an argument group), but those whose
    flag ``parser`` has already (added earlier, by a helper several commands share) and those of group
    ``without`` (the layout's LoRA flags, which only ``train`` and ``fit`` take) and the fields named in
    ``skip`` (``costgraph fit`` has no ``--link-rate``: it times nothing): a command's last call runs to the
    last field, so a field added at the end of the class is on its command line."""
    fields = specs(cls)
    names = list(fields)
    lo = 0 if first is None else names.index(first)
    hi = len(names) if last is None else names.index(last) + 1
    for name in names[lo:hi]:
        f, s = fields[name]
        if s.flag is None or s.flag in parser._option_string_actions or (without is not None and s.group == without) \
                or name in skip:
            continue
        _add(parser, name, f.default, s, dict(s.argparse))


def add_argument_of(parser, cls, name: str, help: str | None = None) -> None:
    """Add the argument of ``cls``'s field ``name`` to another command's ``parser`` as an optional one
    (its flag, type, choices and metavar as declared; not required; its default the API's, not a
    command line's ``cli_default``), with the command's own ``help`` line where given: the inference
    section of ``costgraph report`` and ``plot`` (:func:`costgraph.commands._analysis.infer_arguments`)."""
    f, s = specs(cls)[name]
    kw = {k: v for k, v in s.argparse if k not in ("required", "default")}
    _add(parser, name, f.default, s if help is None else dataclasses.replace(s, help=help), kw)


def is_count(s: Spec) -> bool:
    """Whether the option of spec ``s`` is a count (a degree, a batch, a number of layers): declared
    ``type=int`` or checked ``whole``. The command line and the API read a count by one rule
    (:func:`costgraph.arguments.token_count`): the argparse type :func:`count_type`, the API's :func:`resolve`
    and :meth:`costgraph.parallel.layout.Layout.filled`."""
    return s.check == "whole" or dict(s.argparse).get("type") is int


def count_type(flag: str):
    """The ``argparse`` type of the count option ``flag`` (every option :func:`is_count` finds, and ``costgraph
    solve``'s layout flags): the text read as the API reads a count given as text
    (:func:`costgraph.arguments.token_count`: ``1e3``, ``1280.0``, ``1_280`` → an int; ``1_28``, ``2.5``, ``0``
    refused), the API's message (the flag before the value left out: argparse names it first) and hint, exit status 2.

    >>> count_type("--global-batch")("1e3")
    1000"""
    def count(text: str) -> int:
        import argparse

        from .arguments import token_count
        from .errors import CostgraphValueError

        try:
            return token_count(text, flag)
        except CostgraphValueError as e:   # argparse names the flag ("argument --global-batch: '2.5' is not ...")
            raise argparse.ArgumentTypeError(f"{e.message.replace(f'{flag} ' + chr(39), chr(39), 1)} (hint: {e.hint})") \
                from None
    return count


def _add(parser, name: str, default, s: Spec, kw: dict) -> None:
    """``parser.add_argument`` of field ``name`` (its default ``default``, its spec ``s``), ``kw`` the
    further argparse keywords; a count (declared ``type=int``) read by :func:`count_type`."""
    if kw.get("type") is int:
        kw["type"] = count_type(s.flag)
    if s.values is not None:
        kw["choices"] = s.values
        if isinstance(s.choices, Choice) and isinstance(s.choices.default, int):
            kw.setdefault("type", int)   # the ZeRO stage
    if not kw.get("required") and kw.get("action") not in ("store_true", "store_false") and "default" not in kw:
        kw["default"] = None if default is MISSING else default
    action = parser.add_argument(s.flag, dest=s.dest or name, help=s.help, **kw)
    action.field = name   # the API's name (Layout.policy is --precision): an unrecognized --policy names the flag


def like(cls, name: str, **changes):
    """A field declaring again, in another options class, the option that ``cls``'s field ``name``
    declares: its flag, choices, default, unit and argparse keywords, once (``costgraph plan``'s
    ``--attention``, ``--precision``, ``--optimizer``, ``--overlap`` and ``--pipeline-layout`` are the
    layout's, :class:`costgraph.train_options.PlanOptions`); ``changes`` replace the :class:`Spec`'s
    attributes (the command's ``help``, a value ``check``; the planner's search ``domain`` is dropped:
    the class that declares it searches it)."""
    f, s = specs(cls)[name]
    spec = dataclasses.replace(s, **{"domain": None, **changes})
    return dataclasses.field(default=f.default, metadata={"option": spec})


def keywords_checked(also=None, where: str = ""):
    """A class decorator for an options dataclass (applied after ``@dataclass``): its constructor
    refuses a keyword that is none of its fields with a :class:`~costgraph.errors.CostgraphValueError`
    (not Python's TypeError) and a did-you-mean hint over its fields, or, where none is close, over
    ``also``'s (a callable giving another options class: ``TrainOptions(gpuz=8)`` hints the layout's
    ``gpus``, ``where`` saying where that one goes: a format with ``{name}`` and ``{cls}``)."""
    import functools

    def wrap(cls):
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self, *args, **kw):
            unknown = [k for k in kw if k not in cls.__dataclass_fields__]
            if unknown:
                _refuse_keyword(cls, unknown[0], also() if also is not None else None, where)
            init(self, *args, **kw)
        cls.__init__ = __init__
        return cls
    return wrap


def command_line_names(fields) -> dict[str, tuple[str, str]]:
    """A parsed line's name or a flag's words (``tp``, ``micro_batches``, ``no_loss``) → ``(field, flag)``
    for the declared ``fields`` (dataclass fields, a dict of them or a class) whose keyword differs: the
    keyword a command-line habit misses (``Model.train(tp=2)``: ``t``)."""
    if isinstance(fields, type):
        fields = fields.__dataclass_fields__
    out = {}
    for f in (fields.values() if isinstance(fields, dict) else fields):
        s = f.metadata.get("option") if hasattr(f, "metadata") else None
        if s is None or s.flag is None:
            continue
        negated = dict(s.argparse).get("action") == "store_false"
        for alias in (s.dest, s.flag.lstrip("-").replace("-", "_")):
            if alias and alias != f.name:
                out.setdefault(alias, (f.name + ("=False" if negated and alias.startswith("no_") else ""), s.flag))
    return out


def _habit(name: str, *fields) -> str | None:
    """``'tp' is --tp's: the keyword is 't'`` where ``name`` is a command-line name of ``fields``, or None."""
    for group in fields:
        if group is not None and name in command_line_names(group):
            field, flag = command_line_names(group)[name]
            return f"did you mean {field.split('=')[0]!r}? ({name!r} is the command line's {flag}; the keyword: {field})"
    return None


def _refuse_keyword(cls, name: str, also, where: str):
    """Refuse keyword ``name`` of ``cls(...)`` (:func:`keywords_checked`)."""
    from .errors import CostgraphValueError
    from .hints import did_you_mean

    own = [f.name for f in dataclasses.fields(cls)]
    close = _habit(name, cls) or did_you_mean(name, own)
    other = did_you_mean(name, [f.name for f in dataclasses.fields(also)]) if also is not None and not close else None
    if other:
        near = other[len("did you mean '"):-2]
        lead = f"{name!r} is" if near == name else f"{other} It is"   # the very name: no 'did you mean' it
        hint = f"{lead} {where.format(name=near, cls=cls.__name__)}; {cls.__name__}'s settings: " + ", ".join(own)
    else:
        hint = (close + " " if close else "") + "settings: " + ", ".join(own)
    raise CostgraphValueError(f"{cls.__name__}() has no setting {name!r}", hint=hint)


def cli_defaults(cls, group: str | None = None) -> dict:
    """The parsed line's name (``dest``) → its command-line default, for the fields with a flag (of
    ``group``, if given)."""
    return {s.dest or n: dict(s.argparse).get("default", None if f.default is MISSING else f.default)
            for n, (f, s) in specs(cls).items() if s.flag is not None and (group is None or s.group == group)}


def flag_of(cls, name: str) -> str:
    """The flag of field ``name`` (or of the field whose ``dest`` is ``name``) of ``cls`` (a class, or a
    tuple of them searched in turn); for a name that is none of them, ``--name`` with dashes."""
    for c in cls if isinstance(cls, tuple) else (cls,):
        for n, (_, s) in specs(c).items():
            if name in (n, s.dest) and s.flag:
                return s.flag
    return "--" + name.replace("_", "-")


def from_namespace(cls, args, **given):
    """The ``cls`` object of a parsed command line ``args`` (each field with a flag that ``args`` has;
    the others at their defaults), ``given`` replacing fields (``command``, an API-only field)."""
    return cls(**{**namespace_values(cls, args), **given})


def namespace_values(cls, args, unset_default: bool = False) -> dict:
    """Field → its value in the parsed command line ``args``, for ``cls``'s fields with a flag that
    ``args`` has (under the field's ``dest``). ``unset_default``: a None left out where the field's
    default is not None (a value the namespace left unset, ``--launch``'s readers or a command without
    the flag's default: the field's default)."""
    out = {}
    for n, (f, s) in specs(cls).items():
        d = s.dest or n
        if s.flag is not None and hasattr(args, d):
            value = getattr(args, d)
            if value is not None or not unset_default or f.default is None or f.default is MISSING:
                out[n] = value
    return out


def resolve(cls, options, overrides: dict, what: str, also=()):
    """``(options, rest)``: ``options`` (a ``cls``, or None for the defaults) with the fields that
    ``overrides`` names replaced; ``rest``: the keywords that name one of ``also`` (a Layout's fields).

    Raises
    ------
    CostgraphValueError
        ``options`` not a ``cls``; a keyword neither a field nor in ``also`` (the closest names hinted);
        a required field missing."""
    from .errors import CostgraphValueError
    from .hints import did_you_mean

    fields = specs(cls)
    also = also if isinstance(also, dict) else tuple(also)
    if options is not None and not isinstance(options, cls):
        from .arguments import shown

        raise CostgraphValueError(f"{what}() takes options as a {cls.__name__}, not {shown(options)}",
                                  hint=f"costgraph.{cls.__name__}(...), or the options as keywords")
    unknown = [k for k in overrides if k not in fields and k not in also]
    if unknown:
        names = sorted(set(fields) | set(also))
        close = _habit(unknown[0], cls, also if isinstance(also, dict) else None) or did_you_mean(unknown[0], names)
        raise CostgraphValueError(f"{what}() has no setting {unknown[0]!r}",
                                  hint=(close + " " if close else "") + "settings: " + ", ".join(names))
    mine = {k: _count(v, fields[k][1], k) for k, v in overrides.items() if k in fields}
    rest = {k: v for k, v in overrides.items() if k not in fields}
    if options is not None:
        return dataclasses.replace(options, **mine), rest
    missing = [n for n, (f, _) in fields.items() if f.default is MISSING and n not in mine]
    if missing:
        raise CostgraphValueError(f"{what}() needs {', '.join(missing)}",
                                  hint=", ".join(f"{n}=..." for n in missing))
    return cls(**mine), rest


def _count(value, s: Spec, name: str):
    """A count keyword (:func:`is_count`) given as text or a whole float, read as the command line reads
    it (:func:`costgraph.arguments.token_count`: ``"1_280"`` → 1280, ``"1_28"`` refused); anything else as given."""
    if not is_count(s) or isinstance(value, bool) or not isinstance(value, (str, float)):
        return value
    from .arguments import token_count

    return token_count(value, s.flag or "--" + name.replace("_", "-"))   # an API-only field: the flag it stands for


def check(options) -> None:
    """Check each field of ``options`` by its spec's ``check``, in declaration order, with the
    messages of the command line (the flag named: :mod:`costgraph.arguments`).

    Raises
    ------
    CostgraphValueError
        The first value that fails its check."""
    from . import arguments

    for name, (f, s) in specs(type(options)).items():
        value = getattr(options, name)
        if s.check is None or (value is None and (s.optional or f.default is None)):
            continue
        label = s.flag or name
        if s.check == "choice":
            if isinstance(s.choices, Choice):
                arguments.named_choice(value, s.choices, name)
            else:
                arguments.choice(value, name, s.values)
        elif s.check == "flag":
            arguments.flag(value, name)
        elif s.check == "positive":
            arguments.positive_number(value, label)
        elif s.check == "number":   # any exact number (its range checked where it is used); None is none
            if value is None:
                from .errors import CostgraphValueError

                raise CostgraphValueError(f"{label} must be a number, not None",
                                                    hint=f"leave {name} out (its default is {f.default!r}), or give "
                                                         + arguments.NUMBER_HINT)
            arguments.rational(value, label)
        elif s.check == "whole" or (s.check == "size" and not isinstance(value, str)):
            arguments.whole(value, label)


def json_schema(cls) -> dict:
    """A JSON Schema (draft 2020-12) object of ``cls``'s options: each field by its name, with its
    ``enum`` (the choices), ``description`` (the help, the flag and the unit), ``default`` and, from the
    default or the check, its JSON type; ``required``: the fields without a default."""
    props = {}
    for name, (f, s) in specs(cls).items():
        words = [s.help or name] + ([f"flag {s.flag}"] if s.flag else ["API only"]) + ([f"unit: {s.unit}"] if s.unit else [])
        prop = {"description": "; ".join(words) + "."}
        if s.values is not None:
            prop["enum"] = list(s.values) + ([None] if f.default is None or s.optional else [])
        elif isinstance(f.default, bool) and s.unit is None:   # a unit: a value too (--offload-activations F)
            prop["type"] = "boolean"
        elif s.check == "whole":
            prop.update(type=["integer", "null"] if f.default is None else "integer", minimum=1)
        if f.default is not MISSING:
            prop["default"] = f.default
        props[name] = prop
    required = [n for n, (f, _) in specs(cls).items() if f.default is MISSING]
    return {"type": "object", "description": f"The options of {cls.__name__} (costgraph.{cls.__module__.split('.')[-1]}): "
            "one field each, the API keyword and the JSON name; generated from the declaration.",
            "properties": props, **({"required": required} if required else {}), "additionalProperties": False}
