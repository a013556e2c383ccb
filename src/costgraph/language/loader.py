"""Model files and their imports → a :class:`Program` ready to build.

Resolves ``import "path"`` relative to the importing file first, then in the
bundled library (``models/``, e.g. ``import "std/attention.cg"``), detects
import cycles (an import names a ``.cg`` file by a relative path that stays
inside the importing file's folder: absolute paths and ``..`` out of it are
refused, and so is a symbolic link whose real path leaves the model's folder
or the bundled ``models/``), and gathers the blocks each file can call. Bundled files are
read through :mod:`costgraph.language.resources` and named by their path inside
``models/`` in messages.
"""

from __future__ import annotations

import difflib
import os
import posixpath
import stat
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePosixPath, PureWindowsPath

from . import ast
from ..errors import CostgraphError, CostgraphSemanticError, CostgraphValueError, Location
from ..ops import REGISTRY
from ..opened import record
from .limits import MAX_SOURCE_CHARS, check_source_size
from .parse_cache import parsed_bundled
from .resources import MODEL_SUFFIX, bundled_import, bundled_model, bundled_model_names, models_root


@dataclass
class BlockDef:
    """A block and the names its body can call (its file's block table)."""

    node: ast.Block
    table: dict[str, "BlockDef"]


@dataclass
class Program:
    """One model with every block it can reach."""

    file: ast.File
    model: ast.Model
    blocks: dict[str, BlockDef] = field(default_factory=dict)


@dataclass(frozen=True)
class _Source:
    key: str        # identity: resolved path, or "bundled:<path in models/>"
    display: str    # name in messages
    text: str
    directory: Path | None  # for relative imports; None for bundled files
    bundle_dir: str = ""    # a bundled file's folder inside models/ ("std")
    echo: bool = True       # whether messages may quote its text (its real name ends in .cg)


class _Loader:
    def __init__(self):
        self.tables: dict[str, dict[str, BlockDef]] = {}
        self.models: dict[str, dict[str, ast.Model]] = {}
        self.stack: list[str] = []
        self.names: dict[str, str] = {}   # key → name in messages
        self.roots: tuple[Path, ...] = ()  # real folders a file import may reach (the model's folder)

    def load(self, src: _Source) -> tuple[ast.File, dict[str, BlockDef]]:
        self.names[src.key] = src.display
        f = _parse_quietly(src)
        table: dict[str, BlockDef] = {}
        visible_models: dict[str, ast.Model] = {}
        for imp in f.imports:
            dep = self._resolve(imp, src)
            if dep.key in self.stack:
                chain = " → ".join(self.names.get(k, k) for k in [*self.stack[self.stack.index(dep.key):], dep.key])
                raise CostgraphSemanticError(
                    f"import cycle: {chain}", imp.loc, hint="move the shared blocks into a third file")
            if dep.key not in self.tables:
                self.stack.append(dep.key)
                self.load_into_tables(dep)
                self.stack.pop()
            visible_models.update(self.models[dep.key])
            for name, bdef in self.tables[dep.key].items():
                if name in table and table[name] is not bdef:
                    raise CostgraphSemanticError(
                        f"block '{name}' is defined in two imported files", imp.loc)
                table[name] = bdef
        for block in f.blocks:
            seen: set[str] = set()
            for p in block.params:
                if p.name in ("true", "false", "none"):
                    raise CostgraphSemanticError(
                        f"'{p.name}' is a constant (true, false, none) and cannot name a parameter", p.loc)
                if p.name in ("not", "and", "or"):
                    raise CostgraphSemanticError(
                        f"'{p.name}' is an operator word (not, and, or) and cannot name a parameter", p.loc,
                        hint="choose another name")
                if p.name in seen:
                    raise CostgraphSemanticError(
                        f"block '{block.name}' has two parameters named '{p.name}'", p.loc)
                seen.add(p.name)
            if block.name in REGISTRY:
                raise CostgraphSemanticError(
                    f"block '{block.name}' has the name of an operator", block.loc,
                    hint="operators cannot be redefined; name the block otherwise (costgraph ops lists them)")
            if block.name in table and table[block.name].node.loc.file == block.loc.file:
                raise CostgraphSemanticError(f"block '{block.name}' is defined twice", block.loc)
            table[block.name] = BlockDef(block, table)  # a local block shadows an imported one
        f.models = [_extend(m, visible_models) if m.base else m for m in f.models]
        self.models[src.key] = {m.name: m for m in f.models}
        return f, table

    def load_into_tables(self, src: _Source) -> None:
        _, table = self.load(src)
        self.tables[src.key] = table

    def _resolve(self, imp: ast.Import, src: _Source) -> _Source:
        _check_import_path(imp)
        if src.directory is not None:
            candidate = (src.directory / imp.path)
            if _is_file(candidate):
                _check_confined(candidate, self.roots, imp)
                return _file_source(candidate, imported_at=imp.loc)
        # relative to a bundled file's folder, then to models/ itself
        tries = [f"{src.bundle_dir}/{imp.path}"] if src.bundle_dir else []
        for rel in [*tries, imp.path]:
            try:
                entry = bundled_import(rel) if rel.strip() else None
            except (OSError, ValueError):
                entry = None
            if entry is not None:
                return _bundled_source(rel)
        raise CostgraphSemanticError(
            f"cannot find the imported file '{imp.path}'", imp.loc,
            hint="paths are relative to the importing file, or name a bundled library file such as 'std/attention.cg'")


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _check_confined(candidate: Path, roots: tuple[Path, ...], imp: ast.Import) -> None:
    """An imported file's real path (symbolic links followed) stays inside the
    model's folder (or the bundled ``models/``) and names a regular file;
    otherwise a located error (exit 2) that names neither the target nor its text."""
    real = _real(candidate)
    allowed = (*roots, _real(Path(str(models_root()))))
    try:
        regular = stat.S_ISREG(os.stat(real).st_mode)
    except (OSError, ValueError):
        regular = False
    if not any(real.is_relative_to(root) for root in allowed):
        raise CostgraphSemanticError(
            f"the imported file '{imp.path}' is a symbolic link out of the model's folder", imp.loc,
            hint="imports stay inside the model's folder: copy the file there instead of linking to it")
    if not regular or not real.name.endswith(MODEL_SUFFIX):
        raise CostgraphSemanticError(
            f"the imported file '{imp.path}' is not a model file (a link to a file not ending in {MODEL_SUFFIX}, "
            "or not a regular file)", imp.loc, hint=f"import a {MODEL_SUFFIX} file of the model's folder")


def _parse_quietly(src: _Source) -> ast.File:
    """:func:`parse`, except that an error in a file that is not a model file (its
    real name does not end in ``.cg``) keeps its location but never quotes its text."""
    if src.key.startswith("bundled:"):   # the package's own text: its tree may come from the cache
        return parsed_bundled(src.text, src.display)
    from .parser import parse   # lark, imported only when a text is parsed

    if src.echo:
        return parse(src.text, src.display)
    try:
        return parse(src.text, src.display)
    except CostgraphError as e:
        loc = Location(e.loc.file, e.loc.line, e.loc.column) if e.loc else Location(src.display, 1, 1)
        raise type(e)(f"{src.display} is not a model file (its real name does not end in {MODEL_SUFFIX}) "
                      "and does not parse as one; its text is not shown", loc,
                      hint=f"give a model file ending in {MODEL_SUFFIX}") from None


def _check_import_path(imp: ast.Import) -> None:
    """An import names a ``.cg`` file by a relative path inside the importing
    file's folder (or its subfolders): no absolute path, no ``..`` out of it."""
    path = imp.path
    hint = ('write a path relative to the importing file, inside its folder, e.g. import "blocks.cg" '
            'or import "std/attention.cg"')
    if "\\" in path:
        raise CostgraphSemanticError(f"an import path uses '/', not '\\': {path!r}", imp.loc,
                                     hint=f'write import "{path.replace(chr(92), "/")}"')
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute() or path.startswith("~"):
        raise CostgraphSemanticError(f"an import cannot name an absolute path: {path!r}", imp.loc, hint=hint)
    if posixpath.normpath(path).split("/")[0] == "..":
        raise CostgraphSemanticError(f"an import cannot leave the importing file's folder: {path!r}", imp.loc,
                                     hint=hint + "; move the shared file next to the models that use it")
    if not path.endswith(MODEL_SUFFIX) or path.rsplit("/", 1)[-1] == MODEL_SUFFIX:
        raise CostgraphSemanticError(f"an import names a model file ending in {MODEL_SUFFIX}: {path!r}", imp.loc,
                                     hint=f'e.g. import "std/attention{MODEL_SUFFIX}"')


def _extend(model: ast.Model, visible: dict[str, ast.Model]) -> ast.Model:
    """``model mistral extends llama { option ... }``: llama's body with the
    options set otherwise. The base comes from an imported file."""
    base = visible.get(model.base)
    if base is None:
        close = difflib.get_close_matches(model.base, sorted(visible), n=1)
        raise CostgraphSemanticError(
            f"model '{model.name}' extends '{model.base}', which no imported file defines", model.loc,
            hint=f"did you mean '{close[0]}'?" if close else f'import the file that defines it: import "{model.base}.cg"')
    options = {st.name for st in base.body if isinstance(st, ast.Option)}
    overrides = {}
    for st in model.body:
        if not isinstance(st, ast.Option):
            raise CostgraphSemanticError(
                f"a model that extends another only sets options; '{model.name}' has another statement",
                st.loc, hint="set the base model's options here, or write a model of its own")
        if st.name not in options:
            close = difflib.get_close_matches(st.name, sorted(options), n=1)
            raise CostgraphSemanticError(
                f"'{model.base}' has no option '{st.name}'", st.loc,
                hint=f"did you mean '{close[0]}'?" if close else "its options: " + ", ".join(sorted(options)))
        overrides[st.name] = st
    body = tuple(overrides.get(st.name, st) if isinstance(st, ast.Option) else st for st in base.body)
    return ast.Model(model.name, body, model.loc, None)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):   # a name too long, a NUL byte in it...
        return False


def _file_source(path: Path, imported_at: Location | None = None) -> _Source:
    """Read a model file as UTF-8 text; a file that is not text gets a located error."""
    where = f" (imported at {imported_at})" if imported_at else ""
    try:
        record(path)   # the -o writer never replaces it (costgraph/opened.py)
        with path.open("rb") as f:   # no more than can pass the parser's size limit
            data = f.read(4 * MAX_SOURCE_CHARS + 1)
    except OSError as e:
        raise CostgraphValueError(f"cannot read {path}: {e.strerror or e}{where}", imported_at) from None
    if len(data) > 4 * MAX_SOURCE_CHARS:   # more characters than the limit, whatever the encoding
        check_source_size(data.decode("utf-8", "replace"), str(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        start = data.rfind(b"\n", 0, e.start) + 1
        end = data.find(b"\n", e.start)
        shown = data[start:end if end >= 0 else len(data)].decode("utf-8", "replace")
        shown = shown[:200] if _real(path).name.endswith(MODEL_SUFFIX) else ""   # never quote a non-model file
        loc = Location(str(path), line, len(data[start:e.start].decode("utf-8", "replace")) + 1, shown)
        raise CostgraphValueError(
            f"not a UTF-8 text file: {e.reason} 0x{data[e.start]:02x}{where}",
            loc, hint="a model file is text written in the costgraph language, saved as UTF-8") from None
    rel = _bundled_path(path)
    if rel is not None:   # a bundled file given by its path is the bundled file
        return _Source("bundled:" + rel, str(path), text, None, rel.rpartition("/")[0])
    real = _real(path)
    return _Source(str(real), str(path), text, path.parent, echo=real.name.endswith(MODEL_SUFFIX))


def _bundled_path(path: Path) -> str | None:
    """``path``'s place inside the bundled ``models/`` folder, or None."""
    try:
        return path.resolve().relative_to(Path(str(models_root())).resolve()).as_posix()
    except (ValueError, OSError):
        return None


def _bundled_source(rel: str) -> _Source:
    entry = bundled_import(rel)
    return _Source("bundled:" + rel, rel, entry.read_text(encoding="utf-8"), None, rel.rpartition("/")[0])


def source_for(model: str) -> _Source:
    """A model given by bundled name (``gpt``) or by path (``my/model.cg``).

    Raises
    ------
    CostgraphValueError
        If it is neither, with a "did you mean" among the bundled names.
    """
    if not model.strip():
        raise CostgraphValueError("no model given",
                                  hint="name a bundled model (" + ", ".join(bundled_model_names()[:4]) + ", ...) "
                                       "or give the path of a .cg file")
    path = Path(model)
    try:
        exists = path.exists()
    except (OSError, ValueError):
        exists = False
    if path.is_dir() if exists else False:
        raise CostgraphValueError(f"{model} is a directory, not a model file",
                                  hint="give the path of a .cg file, or a bundled model name")
    if path.suffix == MODEL_SUFFIX and not exists and _bundled_name(model):
        return _bundled_source(model)   # std/attention.cg: the bundled file, as std/attention is
    if path.suffix == MODEL_SUFFIX or exists:
        if not _is_file(path):
            raise CostgraphValueError(f"{model} is not a regular file" if exists else f"no such model file: {model}",
                                      hint="give the path of a .cg file, or a bundled model name")
        return _file_source(path)
    try:
        entry = bundled_model(model) if model.strip() else None
    except (OSError, ValueError):
        entry = None
    if entry is None:
        names = bundled_model_names()
        owner = _bundled_configs().get(model)
        if owner is not None:
            raise CostgraphValueError(f"'{model}' is a configuration of the model '{owner}', not a model",
                                      hint=f"costgraph derive {owner} --config {model}")
        close = difflib.get_close_matches(model, names, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise CostgraphValueError(
            f"unknown model '{model}'",
            hint=hint + "bundled models: " + ", ".join(names) + "; or give a path to a .cg file")
    return _bundled_source(f"{model}{MODEL_SUFFIX}")


def _bundled_name(rel: str) -> bool:
    """Whether ``rel`` (``std/attention.cg``) names a bundled file, inside ``models/``."""
    parts = PurePosixPath(rel).parts
    if not parts or ".." in parts or PurePosixPath(rel).is_absolute() or "\\" in rel:
        return False
    try:
        return bundled_import(rel) is not None
    except (OSError, ValueError):
        return False


@cache
def configuration_owner(name: str) -> str | None:
    """The bundled model that defines the configuration ``name`` (``gpt2`` → ``gpt``), or None: how a
    serving line's bare model id that is a bundled configuration is read (``costgraph.commands._launch_hook``)."""
    return _bundled_configs().get(name)


def _bundled_configs() -> dict[str, str]:
    """Configuration name → the bundled model that defines it (``llama-2-7b`` → ``llama``),
    read from the bundled files' syntax trees (only to explain an unknown model name)."""
    out: dict[str, str] = {}
    for name in bundled_model_names():
        try:
            f = parsed_bundled(bundled_model(name).read_text(encoding="utf-8"), f"{name}{MODEL_SUFFIX}")
        except (CostgraphError, OSError):
            continue
        for cfg in f.configs:
            out.setdefault(cfg.name, name)
    return out


def load_program(model: str | None = None, *, text: str | None = None, path: str = "<string>") -> Program:
    """Parse a model (by name or path, or from ``text``) and everything it imports.

    Raises
    ------
    CostgraphSyntaxError, CostgraphSemanticError, CostgraphValueError
    """
    if text is not None:
        key = str(Path(path).resolve()) if path != "<string>" else path
        src = _Source(key, path, text, Path(path).parent if path != "<string>" else Path.cwd())
    else:
        src = source_for(model)
    loader = _Loader()
    if src.directory is not None:   # file imports stay inside the model's real folder
        loader.roots = (_real(src.directory),)
    loader.stack.append(src.key)
    f, table = loader.load(src)
    if not f.models and f.blocks:
        shown = ", ".join(b.name for b in f.blocks[:4]) + (", ..." if len(f.blocks) > 4 else "")
        where = src.key.removeprefix("bundled:") if src.key.startswith("bundled:") else Path(src.display).name
        raise CostgraphSemanticError(
            f"'{where}' is a library of blocks ({shown}) with no model to derive", Location(src.display, 1, 1),
            hint=f'import it in a model file: import "{where}"; bundled models: ' + ", ".join(bundled_model_names()))
    if len(f.models) != 1:
        where = f.models[1].loc if len(f.models) > 1 else Location(src.display, 1, 1)
        raise CostgraphSemanticError(
            f"a model file must define exactly one model, found {len(f.models)}", where,
            hint="write `model NAME { ... }`; put shared blocks in a file of their own and import it")
    return Program(f, f.models[0], table)
