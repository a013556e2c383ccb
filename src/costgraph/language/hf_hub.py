"""Where a model named by the user lives: a Hugging Face Hub id resolved from the local
cache, a snapshot folder, or a ``config.json`` path — always to the path of a
``config.json`` file (or None: a bundled model name or a ``.cg`` file).

* ``org/name`` or ``org/name@revision`` (a branch, a tag or a commit hash) that is not
  a path on disk: ``config.json`` of that repository in the local Hugging Face cache
  (``HF_HUB_CACHE``, else ``HF_HOME/hub``: ``models--org--name/refs/main`` →
  ``snapshots/<commit>/config.json``), found by ``huggingface_hub``'s own
  :func:`~huggingface_hub.try_to_load_from_cache`; with ``download=True``, and when
  ``HF_HUB_OFFLINE`` is not set, only ``config.json`` is fetched
  (:func:`~huggingface_hub.hf_hub_download`), never the weights.
* a folder: its ``config.json`` (a snapshot folder, a ``save_pretrained`` output);
* a path ending in ``.json``: itself.

``huggingface_hub`` is the optional extra ``hub`` (``pip install 'costgraph[hub]'``),
needed for Hub ids only. Nothing here is evaluated as code.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import CostgraphValueError

#: ``org/name[@revision]`` as the Hub spells repository ids (letters, digits, ``-``, ``_``, ``.``)
HUB_ID = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]{0,95})/([A-Za-z0-9][A-Za-z0-9_.-]{0,95})(?:@([A-Za-z0-9_./-]{1,200}))?$")

#: the flag of the command line that allows fetching config.json (shown in hints)
DOWNLOAD_FLAG = "--download"


def is_hub_id(text: str) -> bool:
    """True when ``text`` reads as a Hub id (``org/name`` or ``org/name@rev``) and is no path on disk
    (a folder ``org/name`` in the working directory wins: it is what the user pointed at) nor a
    bundled library file named without its suffix (``std/attention``)."""
    from .resources import MODEL_SUFFIX, bundled_import

    return isinstance(text, str) and HUB_ID.match(text) is not None and not os.path.exists(text) \
        and not text.endswith((".cg", ".json")) and bundled_import(text + MODEL_SUFFIX) is None


def with_revision(source: str, revision: str | None, name: str = "--revision") -> str:
    """``source`` at ``revision`` (``--revision REV``, ``revision=``, as ``hf download`` and
    ``from_pretrained`` spell it): ``org/name`` becomes ``org/name@REV``; None leaves it as it is.

    Raises
    ------
    CostgraphValueError
        ``source`` is no Hub id (a revision names a commit of a Hub repository), or it already names
        another revision after ``@``."""
    if revision is None:
        return source
    if not isinstance(revision, str) or not revision:
        raise CostgraphValueError(f"{name} takes a branch, a tag or a commit hash, not {revision!r}",
                                  hint=f"{name} main, {name} 0e9e39f2...")
    m = HUB_ID.match(source) if isinstance(source, str) else None
    if m is None or not is_hub_id(source):
        raise CostgraphValueError(f"{name} {revision[:60]!r} applies to a Hub id (org/name); "
                                  f"{str(source)[:80]!r} is none",
                                  hint=f"leave {name} out for a model file, a config.json or a folder")
    if m.group(3) is not None and m.group(3) != revision:
        raise CostgraphValueError(f"{source} names revision {m.group(3)!r} and {name} names {revision[:60]!r}",
                                  hint=f"give the revision once: {m.group(1)}/{m.group(2)} {name} {revision[:60]}")
    return f"{m.group(1)}/{m.group(2)}@{revision}"


def config_path(source: str, *, download: bool = False, api: bool = False) -> str | None:
    """The ``config.json`` path ``source`` names (module docstring), or None for a bundled model
    name or a model file (anything else). ``download``: fetch a Hub id's ``config.json`` when it is
    not in the cache (``api``: say ``allow_download=True`` in hints rather than ``--download``).

    Raises
    ------
    CostgraphValueError
        A folder without a ``config.json``; a Hub id not in the cache (with the flag or the
        ``hf download`` command that fetches it); a download refused (offline,
        unknown repository, gated, no network); ``huggingface_hub`` not installed."""
    if os.path.isdir(source):   # a folder without one: the model-file loader refuses it, as before
        path = os.path.join(source, "config.json")
        return path if os.path.isfile(path) else None
    if source.endswith(".json"):
        return source
    if not is_hub_id(source):
        return None
    return _from_hub(source, download, api)


def _hub():
    try:
        import huggingface_hub
        import huggingface_hub.constants   # not loaded by the package's lazy import
    except ImportError:
        raise CostgraphValueError("reading a model by its Hub id needs huggingface_hub, which is not installed",
                                  hint="pip install 'costgraph[hub]' (the optional extra 'hub'), or give the "
                                       "path of the model's config.json") from None
    return huggingface_hub


def _from_hub(source: str, download: bool, api: bool) -> str:
    hub = _hub()
    m = HUB_ID.match(source)
    repo, revision = f"{m.group(1)}/{m.group(2)}", m.group(3)
    if revision is not None and any(part == "" or part.startswith(".") for part in revision.split("/")):
        # git refuses such ref names; huggingface_hub would open refs/<revision>, outside refs/ for '..'
        raise CostgraphValueError(f"{source}: {revision!r} is not a revision name",
                                  hint="after @ give a branch, a tag or a commit hash (path parts may not be "
                                       "empty or start with '.')")
    found = hub.try_to_load_from_cache(repo, "config.json", revision=revision)
    if isinstance(found, str):
        return found
    at = "" if revision is None else f" at revision {revision}"
    if not download:
        # huggingface_hub 1.x's CLI (``hf``; the older ``huggingface-cli`` was removed in 1.0)
        fetch = f"hf download {repo} config.json" + ("" if revision is None else f" --revision {revision}")
        allow = "allow_download=True" if api else DOWNLOAD_FLAG
        raise CostgraphValueError(f"{source}: no such file, and no config.json of {repo}{at} in the Hugging Face cache "
                                  f"({hub.constants.HF_HUB_CACHE})",
                                  hint=f"add {allow} to fetch its config.json (only that file), or run: {fetch}")
    if hub.constants.is_offline_mode():
        raise CostgraphValueError(f"{source}: not in the Hugging Face cache, and HF_HUB_OFFLINE is set",
                                  hint="unset HF_HUB_OFFLINE to fetch its config.json, or give a config.json path")
    try:
        return hub.hf_hub_download(repo, "config.json", revision=revision)
    except Exception as e:   # repository or revision not found, gated, no network: the library's words
        raise CostgraphValueError(f"{source}: cannot fetch config.json{at}: {type(e).__name__}: "
                                  f"{str(e).splitlines()[0][:200] if str(e) else ''}",
                                  hint="check the id (org/name), your network and access to the repository "
                                       "(hf auth login for a gated one)") from None


#: the folders of a Hugging Face cache entry (``models--org--name``, ``datasets--...``, ``spaces--...``)
_HUB_ENTRY = ("models--", "datasets--", "spaces--")


def _link_root(path: Path) -> Path:
    """Where a ``config.json`` that is a symbolic link may lead: inside a Hugging Face cache
    snapshot (``<cache>/models--org--name/snapshots/<commit>/...``), that entry's ``blobs/``
    (huggingface_hub's layout: each snapshot file links to ``../../blobs/<hash>``); elsewhere the
    folder the link is in."""
    parts = Path(os.path.abspath(path)).parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "snapshots" and parts[i - 1].startswith(_HUB_ENTRY):
            return Path(*parts[:i]) / "blobs"
    return Path(os.path.abspath(path)).parent


def check_link(path: Path, shown_path: str) -> None:
    """Refuse a ``config.json`` that is a symbolic link leading out of where it may lead
    (:func:`_link_root`): a link planted to ``/etc/passwd`` or ``/proc/self/environ`` is never
    read, so no error can quote it. A file that is no link, or a link inside its folder, passes."""
    try:
        if not path.is_symlink():
            return
        target, root = Path(os.path.realpath(path)), Path(os.path.realpath(_link_root(path)))
    except (OSError, ValueError):
        return   # the read that follows reports it
    if target != root and root not in target.parents:
        hub = root.name == "blobs" and root.parent.name.startswith(_HUB_ENTRY)
        where = f"the cache's {root}" if hub else f"its folder ({root})"
        raise CostgraphValueError(
            f"{shown_path} is a symbolic link that leads out of {where}; it is not read",
            hint="give the path of the config.json itself" if not hub else
                 "a Hugging Face cache snapshot links only into its blobs/ folder: download the file again")
