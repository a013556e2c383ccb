"""Writing a command's ``-o FILE``: the one place every writer goes through
(``report``, ``graph``, ``codegen``, ``sweep``, ``plot``).

The rules (README, "Output files"):

* never over an input: ``-o`` naming a file the command reads (the model, a
  ``config.json``, any other file argument; the same file after following links)
  is refused, ``--force`` or not;
* never through a symbolic link: ``-o`` naming a link is refused (the link would
  be followed to a file the user may not mean);
* never over an existing file unless ``--force`` is given (as ``cp -i``/``curl
  -o`` users expect to be asked, and as ``make``-style pipelines expect
  ``--force`` to say so); nor over anything that is not a regular file
  (a folder, ``/dev/null``): leave out ``-o`` to print instead;
* atomically: the text goes to a temporary file in the same folder, then
  :func:`os.replace` puts it in place, so a failed or interrupted write leaves
  the old file (or none), never half of one.

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
    """Real paths of every argument naming an existing file (the model, a config.json, ...)."""
    out = set()
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
        raise CostgraphValueError("-o is empty", hint="name a file (-o FILE); leave out -o to print to standard output")
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
                                  hint="name a file; leave out -o to print to standard output")
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
    try:
        write(Path(tmp))
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as e:
        raise CostgraphValueError(f"cannot write {args.output!r}: {e.strerror or e}") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return path


def _default_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask
