"""Writing a command's ``-o FILE``: the one place every writer goes through
(``report``, ``graph``, ``codegen``, ``sweep``, ``plot``).

The rules (README, "Output files"):

* never over an input: ``-o`` naming a file the command reads (the model, a
  ``config.json``, any other file argument, and every file the run read:
  imports, data tables, hardware files, recorded by :mod:`costgraph.opened`; the
  same file after following links) is refused, ``--force`` or not;
* never a folder: ``-o newdir/`` (a name ending in ``/``) is refused;
* never through a symbolic link: ``-o`` naming a link is refused (the link would
  be followed to a file the user may not mean);
* never over an existing file unless ``--force`` is given (as ``cp -i``/``curl
  -o`` users expect to be asked, and as ``make``-style pipelines expect
  ``--force`` to say so); nor over anything that is not a regular file
  (a folder, ``/dev/null``): leave out ``-o`` to print instead;
* atomically: the text goes to a temporary file in the same folder, then
  :func:`os.replace` puts it in place, so a failed or interrupted write leaves
  the old file (or none), never half of one, nor the temporary file (SIGINT
  and SIGTERM alike: SIGTERM exits with status 143 after the cleanup).

Light at import (standard library only).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..errors import CostgraphValueError


def output_file(text: str) -> str | None:
    """The argparse type of ``-o``: ``-`` is standard output (None: the text is printed, as without
    ``-o``), anything else a file name."""
    return None if text == "-" else text


def output_arguments(p, help: str, required: bool = False) -> None:
    """Add ``-o/--output FILE`` (``-o -``: standard output) and ``--force`` (replace an existing
    FILE) to parser ``p``."""
    p.add_argument("-o", "--output", metavar="FILE", required=required, type=output_file,
                   help=help + "; - for standard output")
    p.add_argument("--force", action="store_true",
                   help="replace FILE if it exists (never an input file; never through a symbolic link)")


def _input_files(args) -> set[str]:
    """Real paths of every argument naming an existing file (the model, a config.json, ...) and of
    every file the run has read (imports, configs, data tables, hardware files: :mod:`costgraph.opened`)."""
    from ..opened import read_files

    out = set(read_files())
    for name, value in vars(args).items():
        if name == "output":
            continue
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, str) and v:
                try:
                    if os.path.isfile(v):
                        out.add(os.path.realpath(v))
                except (OSError, ValueError):
                    pass
    return out


def check_output(args) -> Path:
    """``args.output`` as a path that may be written, or a CostgraphValueError (exit 2)
    saying why not: an input file, a symbolic link, an existing file without
    ``--force``, something not a regular file, or a folder that does not exist."""
    shown = args.output
    if not str(shown).strip():   # Path("") is ".", the working folder
        raise CostgraphValueError("-o is empty", hint="name a file (-o FILE), or -o - for standard output")
    if str(shown).endswith(("/", os.sep)) or (os.altsep and str(shown).endswith(os.altsep)):
        # Path("newdir/") is Path("newdir"): the text would go to a file named newdir
        raise CostgraphValueError(f"-o {shown!r} names a folder; -o takes a file name",
                                  hint=f"name a file inside it: -o {shown}FILE (the folder must exist)")
    path = Path(args.output)
    try:
        link = path.is_symlink()
        info = os.stat(path) if not link and os.path.lexists(path) else None
    except (OSError, ValueError) as e:
        raise CostgraphValueError(f"cannot write {shown!r}: {getattr(e, 'strerror', None) or e}") from None
    if link:
        raise CostgraphValueError(f"-o {shown!r} is a symbolic link; costgraph does not write through links",
                                  hint="name the file itself, or remove the link")
    if os.path.realpath(path) in _input_files(args):
        raise CostgraphValueError(f"-o {shown!r} is an input of this command; it would be replaced by the output",
                                  hint="write to another file")
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise CostgraphValueError(f"-o {shown!r} exists and is not a regular file",
                                  hint="name a file, or -o - for standard output")
    if info is not None and not getattr(args, "force", False):
        raise CostgraphValueError(f"-o {shown!r} exists; costgraph does not overwrite files unless told to",
                                  hint="give --force to replace it, or write to another file")
    if not path.parent.is_dir():
        raise CostgraphValueError(f"cannot write {shown!r}: no folder {str(path.parent)!r} to write it into",
                                  hint="create the folder first, or name a file in an existing one")
    return path


def write_output(args, write: Callable[[Path], None]) -> Path:
    """Check ``args.output`` (:func:`check_output`), then call ``write(tmp)`` to
    write a temporary file beside it (same suffix) and move it into place with
    :func:`os.replace`. An existing file's permissions are kept; a new file
    gets the umask's. Returns the path written.

    Raises
    ------
    CostgraphValueError
        The refusals of :func:`check_output`, or an OSError while writing."""
    path = check_output(args)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode) if path.exists() else _default_mode()
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix or ".tmp")
        os.close(fd)
    except OSError as e:
        raise CostgraphValueError(f"cannot write {args.output!r}: {e.strerror or e}") from None
    previous = _on_sigterm_exit()
    try:
        write(Path(tmp))
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as e:
        raise CostgraphValueError(f"cannot write {args.output!r}: {e.strerror or e}") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        _restore_sigterm(previous)
    return path


#: the exit status of a run ended by SIGTERM while it wrote -o (128 + the signal number, as shells report it)
SIGTERM_STATUS = 128 + 15


def _terminated(signum, frame):
    raise SystemExit(SIGTERM_STATUS)


def _on_sigterm_exit():
    """While ``-o`` is written, SIGTERM (a timeout, ``kill``, a cancelled job) raises
    :class:`SystemExit` (status :data:`SIGTERM_STATUS`) so that :func:`write_output`'s cleanup removes
    the temporary file, as it does on SIGINT (KeyboardInterrupt); without this the default action
    ends the process at once and leaves the hidden file. Returns the previous handler, or None where
    no handler can be set (a thread other than the main one: the web server's)."""
    import signal

    try:
        return signal.signal(signal.SIGTERM, _terminated)
    except (ValueError, OSError, AttributeError):   # not the main thread; a platform without SIGTERM
        return None


def _restore_sigterm(previous) -> None:
    if previous is not None:
        import signal

        signal.signal(signal.SIGTERM, previous)


def _default_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask
