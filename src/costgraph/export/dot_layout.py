"""Bounds on what is handed to Graphviz's ``dot`` layout, and the bounded run.

Graphviz's layered layout grows far faster than the graph: an expression
``x + x + ... + x`` of 100 terms (100 nodes, each add reading ``x``) already
keeps ``dot`` busy for minutes, and 10,000 terms reach gigabytes. Before
drawing, costgraph therefore checks (issue 18):

:data:`MAX_LAYOUT_NODES`
    nodes of the picture (operators, inputs, shared storages and the outside
    nodes that feed the scope);
:data:`MAX_LAYOUT_SIZE`
    the layout size: nodes plus the rank crossings of the edges that rank
    the picture (an edge from rank ``r`` to ``r + k`` passes ``k - 1`` ranks, each
    a virtual node to ``dot``), ranks by longest path from the sources;

and runs ``dot`` with a wall-clock limit (:data:`DOT_TIMEOUT_S`) and, on
POSIX, an address-space limit (:data:`DOT_MEMORY_BYTES`, ``RLIMIT_AS``), in
its own process group, killed on timeout. Labels are cut to
:data:`MAX_LABEL_CHARS` characters by :func:`clip`. Every refusal is a
:class:`~costgraph.errors.CostgraphValueError` (exit status 2) with
:data:`LAYOUT_HINT`; the ``dot``, ``json`` and ``graphml`` formats need no
layout and are not bounded here (JSON and GraphML keep full formulas).
"""

from __future__ import annotations

import os

from ..errors import CostgraphError, CostgraphValueError

#: most characters of one label line (a formula, a name, a cluster label)
#: or tooltip handed to dot; bundled models' longest is 44
MAX_LABEL_CHARS = 120
#: most nodes of a picture laid out by dot; bundled models have at most 105
MAX_LAYOUT_NODES = 500
#: most nodes plus rank crossings of edges (see the module docstring)
MAX_LAYOUT_SIZE = 2_000
#: wall-clock seconds dot may run before it is killed
DOT_TIMEOUT_S = 60.0
#: address space dot may use (bytes, POSIX ``RLIMIT_AS``)
DOT_MEMORY_BYTES = 2 * 1024 ** 3
LAYOUT_HINT = ("draw a smaller scope (--scope layer or a block path), or write --format dot, json or graphml, "
               "which need no layout")
INSTALL_HINT = ("install Graphviz's dot program: apt-get install graphviz (Debian/Ubuntu), brew install graphviz "
                "(macOS), conda install graphviz; or write --format dot and lay it out elsewhere")


def clip(text: str, limit: int | None = None) -> str:
    """``text`` unchanged when it has at most ``limit`` (default
    :data:`MAX_LABEL_CHARS`) characters; else its first ``limit`` characters,
    then ``… (+N chars; full text in --format json)`` with N the number cut."""
    limit = MAX_LABEL_CHARS if limit is None else limit
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (+{len(text) - limit:,} chars; full text in --format json)"


def check_node_count(count: int) -> None:
    """Refuse a picture of more than :data:`MAX_LAYOUT_NODES` nodes.

    Raises
    ------
    CostgraphValueError
        ``count`` is over the limit; the message names both, the hint the way out.
    """
    if count > MAX_LAYOUT_NODES:
        raise CostgraphValueError(f"the graph has {count:,} nodes, too many to lay out as a picture "
                                  f"(at most {MAX_LAYOUT_NODES:,})", hint=LAYOUT_HINT)


def layout_size(g) -> int:
    """Nodes of ``g`` (an :func:`~costgraph.export.graph.operator_graph`) plus
    the ranks its tensor edges pass over, ranks being longest paths from the
    sources (tied edges do not rank the picture). A graph with a cycle counts
    its nodes only."""
    import networkx as nx

    ranking = nx.DiGraph()
    ranking.add_nodes_from(g.nodes)
    ranking.add_edges_from((u, v) for u, v, d in g.edges(data=True) if d.get("type") != "tied" and u != v)
    try:
        order = list(nx.topological_sort(ranking))
    except nx.NetworkXUnfeasible:
        return g.number_of_nodes()
    rank = dict.fromkeys(order, 0)
    for n in order:
        for m in ranking.successors(n):
            rank[m] = max(rank[m], rank[n] + 1)
    return g.number_of_nodes() + sum(max(0, rank[v] - rank[u] - 1) for u, v in ranking.edges)


def check_layout(g) -> None:
    """Refuse to lay out ``g`` with more than :data:`MAX_LAYOUT_NODES` nodes or
    a :func:`layout_size` over :data:`MAX_LAYOUT_SIZE`.

    Raises
    ------
    CostgraphValueError
        Either limit is crossed; the message names the count and the limit.
    """
    check_node_count(g.number_of_nodes())
    size = layout_size(g)
    if size > MAX_LAYOUT_SIZE:
        raise CostgraphValueError(
            f"the graph is too large to lay out as a picture: {g.number_of_nodes():,} nodes whose edges cross "
            f"{size - g.number_of_nodes():,} ranks, layout size {size:,} (at most {MAX_LAYOUT_SIZE:,})",
            hint=LAYOUT_HINT)


def _limit_memory() -> None:   # pragma: no cover - runs in the child, between fork and exec
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = DOT_MEMORY_BYTES if hard == resource.RLIM_INFINITY else min(DOT_MEMORY_BYTES, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):   # a platform that refuses it: the timeout still holds
        pass


def run_dot(text: str, fmt: str = "svg") -> str:
    """``text`` (DOT) laid out by Graphviz's ``dot`` program as ``fmt``, within
    :data:`DOT_TIMEOUT_S` seconds and (POSIX) :data:`DOT_MEMORY_BYTES` of
    address space; the child (and its process group) is killed when time
    runs out or the caller is interrupted, and always waited for.

    Raises
    ------
    CostgraphError
        ``dot`` is not on the PATH (the hint says how to install it).
    CostgraphValueError
        ``dot`` ran out of time, or failed (out of its memory limit, or bad input).
    """
    import shutil
    import subprocess

    exe = shutil.which("dot")
    if exe is None:
        raise CostgraphError("drawing SVG needs Graphviz's 'dot' program, which is not installed", hint=INSTALL_HINT)
    posix = os.name == "posix"
    proc = subprocess.Popen([exe, f"-T{fmt}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=posix,
                            preexec_fn=_limit_memory if posix else None)
    try:
        out, err = proc.communicate(text.encode("utf-8"), timeout=DOT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise CostgraphValueError(f"Graphviz's dot did not finish the layout within {DOT_TIMEOUT_S:g} s "
                                  "and was stopped", hint=LAYOUT_HINT) from None
    finally:
        if proc.poll() is None:   # interrupted (KeyboardInterrupt): do not leave dot running
            _kill(proc)
    if proc.returncode != 0:
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
        detail = (err.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:300]   # its last word
        raise CostgraphValueError(f"Graphviz's dot failed ({how}; it may have run out of its memory limit of "
                                  f"{DOT_MEMORY_BYTES / 1024 ** 2:,.0f} MiB)" + (f": {detail}" if detail else ""),
                                  hint=LAYOUT_HINT)
    return out.decode("utf-8", "replace")


def _kill(proc) -> None:
    """Kill ``proc`` (and its process group on POSIX) and reap it."""
    import signal
    import subprocess

    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=5)   # reap it; pipes close once the group is gone
    except subprocess.TimeoutExpired:   # something outside the group holds the pipes
        proc.wait()
