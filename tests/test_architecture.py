"""The shape of the house: no import cycle between modules, and size limits.

Issue 15, item 6: "No import cycle between modules (function-level imports
included); no module over 600 lines, no class over 400, no function over 80."

The import graph is read from the source with :mod:`ast`, not by importing:
every ``import`` statement counts wherever it stands (module level, inside a
function, under ``if TYPE_CHECKING:``), relative imports are resolved against
the importing module's package, importing a package counts as importing its
``__init__``, and ``from pkg import name`` counts as importing the submodule
``pkg.name`` when there is one (otherwise it imports ``pkg``). Importing a
submodule does not count as importing its parent packages' ``__init__``
(Python runs them first, but a package that imports its own submodules would
otherwise always be a cycle); ``from . import __version__`` does.

Sizes are measured in source lines: a module by its line count, a class or a
function from its ``def``/``class`` line to the last line of its body
(decorators excluded).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "costgraph"

MAX_MODULE_LINES = 500   # issue 31 item 4: no module over 500 lines
MAX_CLASS_LINES = 400
MAX_FUNCTION_LINES = 80

# Import cycles that are known and owned by another helper. Each entry is the
# sorted tuple of the modules of one strongly connected component. The list
# can only shrink: an entry that is no longer a cycle fails the test.
ALLOWED_CYCLES: dict[tuple[str, ...], str] = {}

# Size violations that are known: "module" (whole file), "module:Class" or
# "module:function" / "module:Class.method" -> why it is tolerated. The list
# can only shrink: an entry that no longer violates fails the test.
ALLOWED_SIZES: dict[str, str] = {
    # a module allowed over the limits, with its reason: none (issue 31 item 4: every module at most 500 lines)
}


def _module_name(path: Path) -> str:
    """Dotted module name of a file under the package (``__init__`` → the package)."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return modules[name].name == "__init__.py"


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules that module ``name`` imports, anywhere in its body."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if _is_package(name, modules) else name.rpartition(".")[0]
    found: set[str] = set()

    def add(target: str) -> None:
        # "import a.b.c" counts as importing the deepest module it names;
        # the parent packages' __init__ run first, but a submodule does not
        # depend on them (otherwise every package would be a cycle).
        parts = target.split(".")
        for i in range(len(parts), 0, -1):
            prefix = ".".join(parts[:i])
            if prefix in modules:
                found.add(prefix)
                return

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # "from pkg import name": the submodule pkg.name when there is
            # one, otherwise a name defined in pkg (its __init__ if a package).
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                add(submodule if submodule in modules else source)
    found.discard(name)
    return found


def import_graph() -> nx.DiGraph:
    """The package's module import graph: an edge a → b when a imports b."""
    modules = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        for target in _imports(name, path, modules):
            graph.add_edge(name, target)
    return graph


def _cycles(graph: nx.DiGraph) -> list[tuple[str, ...]]:
    """The strongly connected components with more than one module."""
    components = [tuple(sorted(c)) for c in nx.strongly_connected_components(graph)]
    return sorted(c for c in components if len(c) > 1)


def _describe(graph: nx.DiGraph, component: tuple[str, ...]) -> str:
    cycle = nx.find_cycle(graph.subgraph(component))
    path = " → ".join([edge[0] for edge in cycle] + [cycle[0][0]])
    return f"{', '.join(component)}\n    e.g. {path}"


def test_import_graph_sees_every_kind_of_import():
    """The walker is not blind: a known edge of each kind is found."""
    graph = import_graph()
    # "from . import ast": the submodule costgraph.language.ast, not the package's __init__.
    assert graph.has_edge("costgraph.engine.builder", "costgraph.language.ast")
    assert not graph.has_edge("costgraph.engine.builder", "costgraph")
    # "from .ops import REGISTRY": a name defined in a package's __init__.
    assert graph.has_edge("costgraph.engine.builder_calls", "costgraph.ops")
    # "from ..graph import ...": a relative import two levels up.
    assert graph.has_edge("costgraph.training.memory", "costgraph.engine.graph")
    # An import inside a function (present.model_html, which Model._repr_html_ reaches through costgraph.results).
    assert graph.has_edge("costgraph.export.present", "costgraph.export.graph")
    # An import inside a method (Model.train).
    assert graph.has_edge("costgraph.model", "costgraph.training.api")
    # An import under "if TYPE_CHECKING:" (the package's __init__).
    assert graph.has_edge("costgraph", "costgraph.language.hf_config")


def test_cycles_are_found():
    """A two-module cycle and a longer one are reported, each as one component."""
    graph = nx.DiGraph([("a", "b"), ("b", "a"), ("c", "d"), ("d", "e"), ("e", "c"), ("e", "f")])
    assert _cycles(graph) == [("a", "b"), ("c", "d", "e")]
    assert _cycles(nx.DiGraph([("a", "b"), ("b", "c")])) == []


def test_no_import_cycles():
    graph = import_graph()
    cycles = _cycles(graph)
    unexpected = [c for c in cycles if c not in ALLOWED_CYCLES]
    stale = [c for c in ALLOWED_CYCLES if c not in cycles]
    message = []
    if unexpected:
        message.append("import cycles:\n  " + "\n  ".join(_describe(graph, c) for c in unexpected))
    if stale:
        message.append("no longer cycles, remove from ALLOWED_CYCLES:\n  "
                       + "\n  ".join(", ".join(c) for c in stale))
    assert not message, "\n".join(message)


def _line_span(node: ast.AST) -> int:
    """Lines from the def/class line to the last line of the body, decorators excluded."""
    return node.end_lineno - node.lineno + 1


def size_violations() -> dict[str, str]:
    """Every module, class and function over its limit, as key → "N lines > limit"."""
    found: dict[str, str] = {}
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found[name] = f"module {lines} lines > {MAX_MODULE_LINES}"

        def visit(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef):
                    key = f"{name}:{prefix}{child.name}"
                    span = _line_span(child)
                    if span > MAX_CLASS_LINES:
                        found[key] = f"class {span} lines > {MAX_CLASS_LINES}"
                    visit(child, f"{prefix}{child.name}.")
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    key = f"{name}:{prefix}{child.name}"
                    span = _line_span(child)
                    if span > MAX_FUNCTION_LINES:
                        found[key] = f"function {span} lines > {MAX_FUNCTION_LINES}"
                    visit(child, f"{prefix}{child.name}.")
                else:
                    visit(child, prefix)

        visit(ast.parse(text, filename=str(path)), "")
    return found


def test_size_limits():
    found = size_violations()
    unexpected = {k: v for k, v in found.items() if k not in ALLOWED_SIZES}
    stale = [k for k in ALLOWED_SIZES if k not in found]
    message = []
    if unexpected:
        message.append("over the size limits:\n  "
                       + "\n  ".join(f"{k}: {v}" for k, v in sorted(unexpected.items())))
    if stale:
        message.append("within the limits now, remove from ALLOWED_SIZES:\n  "
                       + "\n  ".join(sorted(stale)))
    assert not message, "\n".join(message)


@pytest.mark.parametrize("source, expected", [
    ("def f():\n    return 1\n", 2),
    ("@decorator\ndef f():\n    x = 1\n    return x\n", 3),
])
def test_line_span_excludes_decorators(source, expected):
    node = ast.parse(source).body[0]
    assert _line_span(node) == expected


#: Comparisons of a node's operator with an operator's name that stay in analyses, each the
#: operator's identity rather than a fact about it (issue 31 item 3: facts are roles on ``@op``).
_NAMED_OPERATORS_ALLOWED = {
    ("engine/recompute.py", "matmul"): "the attention products recomputed under selective recompute",
    ("engine/recompute.py", "linear"): "Megatron's recompute counts linear layers by their module",
    ("export/text_report.py", "dropout"): "whether the model calls dropout at all",
    ("inference/runtime_weights.py", "rope"): "reads rope's own arguments (vLLM's rotary cache keys)",
    ("parallel/communication.py", "matmul"): "the attention product after QKᵀ (CP's V)",
    ("parallel/tensor.py", "matmul"): "the attention scores' heads",
    ("training/fp8.py", "matmul"): "the attention products (FP8 attention)",
    ("training/kernel_time.py", "matmul"): "the attention products' kernel (flash)",
    ("training/cross_entropy.py", "add"): "a residual sum x + f(x), a hidden state the token-head search stops at",
    ("training/overlap.py", "matmul"): "the attention product after QKᵀ",
}


def test_operator_facts_are_roles_not_names():
    """No analysis tests a node's operator against an operator's name (``d["kind"] == "cache"``)
    to learn a fact about it: the fact is a role declared on the operator (``has_role(kind,
    "cache")``), checked at registration; only the identities in _NAMED_OPERATORS_ALLOWED stay."""
    from costgraph.ops.registry import catalogue

    ops = {s.name for s in catalogue()}
    pat = re.compile(r'''(?:\["kind"\]|(?<![.\w`])kind)\s*(?:==|!=|not in|in)\s*(\([^)]*\)|\{[^}]*\}|"[^"]*")''')
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.split("/")[0] in ("ops", "language", "drafting"):
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            for m in pat.finditer(line):
                found |= {(rel, name) for name in re.findall(r'"([^"]*)"', m.group(1)) if name in ops}
    assert found - set(_NAMED_OPERATORS_ALLOWED) == set()
    assert set(_NAMED_OPERATORS_ALLOWED) - found == set(), "an allowed comparison is gone: drop it from the list"


#: The floors of the package, lowest first (issue 31 item 4): a module may import from its own floor
#: and the floors below, never from a floor above, except the arrows of _UPWARD_ALLOWED. Each
#: top-level module or package of costgraph has one floor; a new one must be given its floor here.
FLOORS = (
    {"version", "errors", "hints", "opened", "choices", "arguments", "datafiles", "data_schema", "data_entries",
     "runtime_memory", "optional",
     "cli_errors", "user_cache", "option_fields", "train_options", "infer_options", "fit_options", "layout_options",
     "results", "result_fields"},                                             # facts and checks shared by all
    {"language"},                                               # text → syntax → program
    {"engine", "ops", "numbers", "symbolic"},                   # the graph, its operators, exact numbers
    {"parallel"},                                               # who holds what
    {"training", "inference", "hardware", "diffusion", "options"},  # the analyses (options: the planner's space)
    {"model", "costs", "model_values", "sources", "verdict", "verify", "drafting", "launch", "torch_measure", "torch_saved", "torch_meta", "torch_vision", "torch_speech",
     "torch_vlm", "torch_diffusion"},                           # the API and its PyTorch tier
    {"export"},                                                 # renderers
    {"commands", "cli", "completion", "__main__", "costgraph"},  # the command line and the package's face
)

#: Upward arrows that remain (package → package above), each with why; none may be added.
_UPWARD_ALLOWED = {
    ("language", "ops"): "the loader refuses a block named as an operator (the catalogue's names, read without SymPy)",
    ("language", "model"): "hf_config.py builds Models from config.json (the front door belongs beside sources.py)",
    ("language", "drafting"): "hf_config.py drafts an unmapped model_type (the same front door)",
    ("engine", "parallel"): "activations.py splits the kept tensors under TP/SP",
    ("parallel", "training"): "communication.py reads the precision policy's bytes (training/data.py)",
    ("inference", "model"): "loading.py loads a draft model by name",
}


#: Packages that never import a renderer (issue 31 item 2): their typed results reach ``export/`` through
#: the one door of ``costgraph.results``, which the package's face opens.
NEVER_RENDER = ("language", "engine", "ops", "numbers", "symbolic", "parallel", "training", "inference")

#: At most this many upward arrows (issue 31 item 4: from 18 to at most 10).
MAX_UPWARD = 10


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_layering_never_runs_up():
    """No import runs from a floor to one above it, except the arrows listed (with their reasons)."""
    floor = {name: i for i, names in enumerate(FLOORS) for name in names}
    graph = import_graph()
    unplaced = sorted({_top(m) for m in graph.nodes} - set(floor))
    assert not unplaced, f"give these modules a floor in FLOORS: {unplaced}"
    upward = {(_top(a), _top(b)) for a, b in graph.edges() if floor[_top(a)] < floor[_top(b)]}
    assert upward - set(_UPWARD_ALLOWED) == set(), "an import runs up a floor"
    assert set(_UPWARD_ALLOWED) - upward == set(), "an allowed arrow is gone: drop it from the list"
    assert len(_UPWARD_ALLOWED) <= MAX_UPWARD


def test_analyses_never_import_a_renderer():
    """The graph, the placement and the analyses import nothing from ``export/``, at module level or in a
    function: a result renders through :mod:`costgraph.results` (issue 31 item 2)."""
    graph = import_graph()
    found = sorted((a, b) for a, b in graph.edges() if _top(a) in NEVER_RENDER and _top(b) == "export")
    assert found == []
