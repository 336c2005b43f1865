"""The house rules a reader relies on, read from the source itself (the AST, nothing imported):

- no function in src/ is longer than 60 lines, no module longer than 300;
- no import cycle between modules, except the check registry's own (checks/__init__ imports
  checks/registry_all, which imports the package to discover its check modules);
- lower layers never import trainready.commands (only the CLI does);
- the layers (LAYERS, lowest first): a package imports only itself and the packages listed before it, type-only
  imports included (an annotation is a dependency too), so no two packages import each other;
- options travel as typed dataclasses: no `dict[str, Any]` of options, no string-keyed look-ups of
  options (`ctx.options["resume"]`, `opts.get("data")`), no untyped extras on `CheckContext`;
- every `Check` subclass lives in src/trainready/checks/.

Each detector is first shown catching a planted violation in a small tree of its own, so a rule
cannot pass because its detector sees nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 60
MAX_MODULE_LINES = 300
MAX_DEPTH = 4  # nested blocks (if/for/while/with/try/match) in one function; an elif is not deeper than its if
BLOCKS = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith, ast.Match,
          getattr(ast, "TryStar", ast.Try))
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# The one cycle allowed: the registry discovers its check modules by importing its own package.
REGISTRY_EDGES = {("trainready.checks.registry_all", "trainready.checks")}
# The only modules outside trainready.commands that may import it: the command line itself.
COMMAND_IMPORTERS = {"trainready.cli"}


@dataclass(frozen=True)
class Module:
    name: str
    rel: str  # path under src/, e.g. trainready/suite/base.py
    tree: ast.Module
    is_package: bool


def modules(src: Path = SRC) -> dict[str, Module]:
    """Every module under src/trainready, by dotted name."""
    out = {}
    for path in sorted((src / "trainready").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        out[name] = Module(name, path.relative_to(src).as_posix(), ast.parse(path.read_text(encoding="utf-8")),
                           is_package)
    return out


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of import nodes inside `if TYPE_CHECKING:` (never run, so no edge at run time)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def _imported(mod: Module, node: ast.AST) -> list[str]:
    """Dotted names an import statement reaches (for `from X import y`: X.y when y is a module, else X)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        pkg = mod.name if mod.is_package else mod.name.rpartition(".")[0]
        for _ in range(node.level - 1):
            pkg = pkg.rpartition(".")[0]
        base = f"{pkg}.{base}" if base else pkg
    return [f"{base}.{a.name}" for a in node.names] + [base]


def import_graph(mods: dict[str, Module], type_only: bool = False) -> dict[str, set[str]]:
    """module → the trainready modules it imports anywhere in its body (functions included); with `type_only`,
    the imports under `if TYPE_CHECKING:` too."""
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for mod in mods.values():
        skip = set() if type_only else _type_checking_only(mod.tree)
        for node in ast.walk(mod.tree):
            if id(node) in skip:
                continue
            names = _imported(mod, node)
            if isinstance(node, ast.ImportFrom):  # `from X import y`: X.y if it is a module, else X
                names = [n for n in names[:-1] if n in mods] or names[-1:]
            for name in names:
                while name and name not in mods:
                    name = name.rpartition(".")[0]
                if name and name != mod.name:
                    graph[mod.name].add(name)
    return graph


def cycles(graph: dict[str, set[str]], allowed: set[tuple[str, str]] = frozenset()) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), `allowed` edges left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if (v, w) in allowed or w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


# The layers, lowest first.  A package (or a module of the root: errors, records, cli ...) imports only itself
# and those listed before it.  The root `trainready` (its __version__) is below everything.  cluster's rooms are
# layers of their own: the control plane, the plants the tasks read, the tasks, the verdict, the repair loop, the
# node's health check, the drivers on top (modules directly in cluster/), and the pairs search above them;
# `image distribute` (distribute/) stands on the control plane.  docs/architecture.md draws this table.
LAYERS = (
    "trainready", "trainready.errors", "trainready.util", "trainready.records", "trainready.fabric",
    "trainready.manifest", "trainready.hostsettings", "trainready.hardware", "trainready.spec",
    "trainready.fabric.judge", "trainready.devices", "trainready.numerics",
    "trainready.workload", "trainready.data", "trainready.ckpt", "trainready.plan", "trainready.ranks",
    "trainready.fingerprint",
    "trainready.comm", "trainready.resume", "trainready.burnin", "trainready.compare", "trainready.report",
    "trainready.bundle", "trainready.image", "trainready.suite", "trainready.checks",
    "trainready.cluster.control", "trainready.distribute", "trainready.cluster.plants", "trainready.cluster.tasks",
    "trainready.cluster.judge", "trainready.cluster.repair", "trainready.cluster.health",
    "trainready.cluster", "trainready.cluster.pairs", "trainready.cluster.sweep",
    "trainready.selftest", "trainready.commands", "trainready.cli", "trainready.healthfast", "trainready.entry",
    "trainready.__main__",
)


def layer_of(module: str, layers: tuple[str, ...] = LAYERS) -> str | None:
    """The most specific entry of `layers` a module belongs to (None: in no layer)."""
    hits = [p for p in layers if module == p or module.startswith(p + ".")]
    return max(hits, key=len) if hits else None


def layer_violations(mods: dict[str, Module], layers: tuple[str, ...] = LAYERS) -> list[str]:
    """'a imports b (layer A below B)' for each import that reaches up the layers, type-only imports included;
    'm: in no layer' for a module the table does not place."""
    rank = {p: i for i, p in enumerate(layers)}
    out = [f"{m}: in no layer" for m in mods if layer_of(m, layers) is None]
    for m, targets in import_graph(mods, type_only=True).items():
        low = layer_of(m, layers)
        for t in targets:
            high = layer_of(t, layers)
            if low and high and rank[high] > rank[low]:
                out.append(f"{m} imports {t} ({low} is below {high})")
    return sorted(out)


def long_functions(mods: dict[str, Module], limit: int = MAX_LINES) -> list[tuple[int, str]]:
    """(lines, 'path:line name') of every function or method longer than `limit` lines (def to last line)."""
    out = []
    for mod in mods.values():
        for node in ast.walk(mod.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    out.append((lines, f"{mod.rel}:{node.lineno} {node.name}"))
    return sorted(out, reverse=True)


def _depth(node: ast.AST, d: int = 0) -> int:
    """The deepest nesting of blocks below `node` (nested functions and classes count on their own)."""
    best = d
    for child in ast.iter_child_nodes(node):
        if isinstance(child, SCOPES):
            continue
        elif_ = isinstance(node, ast.If) and len(node.orelse) == 1 and child is node.orelse[0]
        best = max(best, _depth(child, d if elif_ or not isinstance(child, BLOCKS) else d + 1))
    return best


def deep_functions(mods: dict[str, Module], limit: int = MAX_DEPTH) -> list[str]:
    """'path:line name depth' of every function whose blocks nest deeper than `limit`."""
    return sorted(f"{mod.rel}:{node.lineno} {node.name} {depth}" for mod in mods.values()
                  for node in ast.walk(mod.tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and (depth := _depth(node)) > limit)


def rows_read_by_position(mods: dict[str, Module]) -> list[str]:
    """A result row read by position, `x[i][j][5]`: a constant index >= 1 at the end of three subscripts, none
    of them a key (a JSON document's `doc['nvml']['gpus'][2]` is read by name)."""
    out = []
    for mod in mods.values():
        for node in ast.walk(mod.tree):
            chain, cur = 0, node
            while isinstance(cur, ast.Subscript) and not (isinstance(cur.slice, ast.Constant)
                                                          and isinstance(cur.slice.value, str)):
                chain, cur = chain + 1, cur.value
            last = node.slice if isinstance(node, ast.Subscript) else None
            if chain >= 3 and isinstance(last, ast.Constant) and isinstance(last.value, int) and last.value >= 1:
                out.append(f"{mod.rel}:{node.lineno} {ast.unparse(node)}")
    return sorted(set(out))


OPTION_NAMES = ("options", "opts")
UNTYPED = ("dict[str, Any]", "Dict[str, Any]", "Mapping[str, Any]", "dict[str, object]", "Any")


def _is_option_name(name: str) -> bool:
    return name in OPTION_NAMES or name.endswith(tuple(f"_{n}" for n in OPTION_NAMES))


def _leaf(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def untyped_options(mods: dict[str, Module]) -> list[str]:
    """Where options are an untyped mapping or are looked up by a string key."""
    out = []
    for mod in mods.values():
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.arg) and node.annotation is not None:
                named, ann = node.arg, node.annotation
            elif isinstance(node, ast.AnnAssign) and node.annotation is not None:
                named, ann = _leaf(node.target), node.annotation
            else:
                named, ann = "", None
            if ann is not None and _is_option_name(named) and ast.unparse(ann) in UNTYPED:
                out.append(f"{mod.rel}:{node.lineno} {named}: {ast.unparse(ann)}")
            key = _string_lookup(node) or _dict_handed_to_context(node)
            if key:
                out.append(f"{mod.rel}:{node.lineno} {key}")
    return out


def _dict_handed_to_context(node: ast.AST) -> str:
    """`CheckContext(spec, dir, faults, {...})` or `options={...}`: a mapping where the typed options go."""
    if not (isinstance(node, ast.Call) and _leaf(node.func) == "CheckContext"):
        return ""
    given = node.args[3:4] + [k.value for k in node.keywords if k.arg == "options"]
    if any(isinstance(n, (ast.Dict, ast.DictComp)) for g in given for n in ast.walk(g)):
        return "CheckContext(..., options=<a dict>)"
    return ""


def _string_lookup(node: ast.AST) -> str:
    """`x.options["k"]`, `opts["k"]`, `x.options.get("k")`, `opts.get("k", ...)` → that text, else ''."""
    if isinstance(node, ast.Subscript) and _is_option_name(_leaf(node.value)):
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return ast.unparse(node)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and _is_option_name(_leaf(node.func.value)) and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return ast.unparse(node)
    return ""


def context_extras(mods: dict[str, Module]) -> list[str]:
    """Fields of `CheckContext` typed as a catch-all (Any, or a mapping to Any)."""
    base = mods["trainready.suite.base"].tree
    cls = next(n for n in ast.walk(base) if isinstance(n, ast.ClassDef) and n.name == "CheckContext")
    return [f"CheckContext.{_leaf(s.target)}: {ast.unparse(s.annotation)}" for s in cls.body
            if isinstance(s, ast.AnnAssign) and any(u in ast.unparse(s.annotation) for u in ("Any", "object"))]


def check_classes_outside(mods: dict[str, Module], home: str = "trainready.checks") -> list[str]:
    """Subclasses of `Check` (directly or through another subclass) defined outside `home`."""
    defined: list[tuple[str, str, list[str]]] = []  # (module, class, base names)
    for mod in mods.values():
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.ClassDef):
                defined.append((mod.name, node.name, [_leaf(b) for b in node.bases]))
    checks = {"Check"}
    grew = True
    while grew:
        more = {cls for _, cls, bases in defined if set(bases) & checks} - checks
        checks |= more
        grew = bool(more)
    return sorted(f"{m}.{cls}" for m, cls, bases in defined
                  if set(bases) & checks and not (m == home or m.startswith(home + ".")))


# --- each detector catches a planted violation -------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Module]:
    for rel, text in files.items():
        p = tmp_path / "trainready" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return modules(tmp_path)


def test_detectors_catch_planted_violations(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    mods = _tree(tmp_path, {
        "__init__.py": "",
        "a.py": "from trainready import b\n\n\ndef ok():\n    return 1\n",
        "b.py": f"def f():\n    from trainready.a import ok\n{body}\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from trainready import d\n",
        "d.py": "import trainready.c\n",
        "low/__init__.py": "",
        "low/x.py": "from ..commands.common import emit\nfrom trainready.suite.base import Check\n\n\nclass Sneaky(Check):\n"
                    "    pass\n\n\nclass Sneakier(Sneaky):\n    pass\n",
        "commands/__init__.py": "",
        "commands/common.py": "def emit(options: dict[str, Any], opts: object = None) -> int:\n"
                              "    return options.get('resume') or opts['x']\n",
        "commands/node.py": "ctx = CheckContext(1, 2, {}, {'image_digest': 3} if 4 else {})\n"
                            "ok = CheckContext(1, 2, {'plant': 'x'}, timeouts={'x': 1.0})\n",
        "checks/__init__.py": "from trainready.suite.base import Check\n\n\nclass Fine(Check):\n    pass\n",
        "suite/base.py": "class Check:\n    pass\n\n\nclass CheckContext:\n    options: dict[str, Any]\n"
                          "    spec: int\n",
    })
    graph = import_graph(mods)
    assert cycles(graph) == [["trainready.a", "trainready.b"]]  # c -> d only under TYPE_CHECKING: no cycle
    assert "trainready.commands.common" in graph["trainready.low.x"]  # a relative import is followed
    assert cycles(graph, {("trainready.b", "trainready.a")}) == []
    assert [name for _, name in long_functions(mods)] == ["trainready/b.py:1 f"]
    assert long_functions(mods, MAX_LINES + 2) == []
    assert sorted(untyped_options(mods)) == ["trainready/commands/common.py:1 options: dict[str, Any]",
                                             "trainready/commands/common.py:2 options.get('resume')",
                                             "trainready/commands/common.py:2 opts['x']",
                                             "trainready/commands/node.py:1 CheckContext(..., options=<a dict>)",
                                             "trainready/suite/base.py:6 options: dict[str, Any]"]
    assert context_extras(mods) == ["CheckContext.options: dict[str, Any]"]
    assert check_classes_outside(mods) == ["trainready.low.x.Sneakier", "trainready.low.x.Sneaky"]


def test_layer_detector_catches_planted_violations(tmp_path: Path) -> None:
    mods = _tree(tmp_path, {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from trainready.high.b import B\n",
        "high/__init__.py": "",
        "high/b.py": "from trainready.low import a\n\n\nclass B:\n    pass\n",
        "high/sub/__init__.py": "",
        "high/sub/c.py": "from trainready.high import b\n",
        "stray.py": "",
    })
    layers = ("trainready", "trainready.low", "trainready.high.sub", "trainready.high")
    assert layer_violations(mods, layers) == [
        "trainready.high.sub.c imports trainready.high.b (trainready.high.sub is below trainready.high)",
        "trainready.low.a imports trainready.high.b (trainready.low is below trainready.high)",  # type-only counts
    ]
    assert layer_violations(mods, ("trainready.low", "trainready.high")) == [
        "trainready.low.a imports trainready.high.b (trainready.low is below trainready.high)",
        "trainready.stray: in no layer", "trainready: in no layer"]
    assert layer_violations({k: v for k, v in mods.items() if k != "trainready.low.a"}, layers) == [
        "trainready.high.sub.c imports trainready.high.b (trainready.high.sub is below trainready.high)"]
    mods = _tree(tmp_path / "cyc", {"__init__.py": "", "m.py": "import trainready.n\n",
                                    "n.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import trainready.m\n"})
    assert cycles(import_graph(mods)) == [] and cycles(import_graph(mods, type_only=True)) == [["trainready.m", "trainready.n"]]


def test_shape_detectors_catch_planted_violations(tmp_path: Path) -> None:
    deep = ("def f(xs):\n    for a in xs:\n        if a:\n            while a:\n                with a:\n"
            "                    try:\n                        pass\n                    except E:\n"
            "                        pass\n")
    flat = ("def g(a):\n    if a == 1:\n        pass\n    elif a == 2:\n        pass\n    elif a == 3:\n"
            "        pass\n    elif a == 4:\n        pass\n    elif a == 5:\n        if a:\n            pass\n")
    mods = _tree(tmp_path, {"__init__.py": "", "d.py": deep, "e.py": flat,
                            "r.py": "def h(every, k, i):\n    return every[k][i][5], every[0][1], rows[i][0][0], d['a'][k][2]\n"})
    assert deep_functions(mods) == ["trainready/d.py:1 f 5"]  # 5 blocks deep; elif chains are not deeper
    assert deep_functions(mods, 5) == []
    assert rows_read_by_position(mods) == ["trainready/r.py:2 every[k][i][5]"]


# --- the rules on src/ -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def src() -> dict[str, Module]:
    mods = modules()
    assert len(mods) > 100 and "trainready.suite.base" in mods  # the real tree, not an empty folder
    return mods


def test_no_function_is_longer_than_60_lines(src: dict[str, Module]) -> None:
    long = long_functions(src)
    assert not long, f"{len(long)} function(s) over {MAX_LINES} lines (split them): " + "; ".join(
        f"{where} {n}" for n, where in long)


def long_modules(src: Path = SRC, limit: int = MAX_MODULE_LINES) -> list[str]:
    """'path (lines)' of every module longer than `limit` lines."""
    out = []
    for path in sorted((src / "trainready").rglob("*.py")):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            out.append(f"{path.relative_to(src).as_posix()} ({n})")
    return out


def test_no_module_is_longer_than_300_lines(src: dict[str, Module]) -> None:
    assert long_modules(limit=100), "the detector sees the modules it judges"  # several are longer than 100
    long = long_modules()
    assert not long, f"{len(long)} module(s) over {MAX_MODULE_LINES} lines (split them by what they hold): " + "; ".join(long)


def test_no_function_nests_deeper_than_4(src: dict[str, Module]) -> None:
    deep = deep_functions(src)
    assert not deep, f"{len(deep)} function(s) nest deeper than {MAX_DEPTH} blocks: {'; '.join(deep)}"


def test_no_result_row_is_read_by_position(src: dict[str, Module]) -> None:
    found = rows_read_by_position(src)  # main 3148e0e: comm/sweep.py every[k][i][5] and six more
    assert not found, f"rows read by position (give them named fields): {'; '.join(found)}"


def test_no_import_cycle_beyond_the_check_registry(src: dict[str, Module]) -> None:
    graph = import_graph(src)
    assert "trainready.commands" in graph["trainready.cli"]  # the graph sees the imports it judges
    found = cycles(graph, REGISTRY_EDGES)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)
    assert cycles(graph) == [["trainready.checks", "trainready.checks.registry_all"]]  # the one left out is real


def test_no_import_cycle_through_type_only_imports(src: dict[str, Module]) -> None:
    found = cycles(import_graph(src, type_only=True), REGISTRY_EDGES)  # main ffc0633: spec.model <-> hostsettings.pins
    assert not found, "import cycles (an annotation is a dependency too): " + "; ".join(" <-> ".join(c) for c in found)


def test_packages_import_only_the_layers_below(src: dict[str, Module]) -> None:
    assert layer_of("trainready.cluster.tasks.node") == "trainready.cluster.tasks"  # the table places what it judges
    bad = layer_violations(src)
    assert not bad, f"{len(bad)} import(s) against the layers (tests/test_structure.py LAYERS): " + "; ".join(bad)


def test_lower_layers_never_import_commands(src: dict[str, Module]) -> None:
    graph = import_graph(src)
    bad = sorted(f"{m} imports {t}" for m, ts in graph.items() for t in ts
                 if t.startswith("trainready.commands") and not m.startswith("trainready.commands")
                 and m not in COMMAND_IMPORTERS)
    assert not bad, "; ".join(bad)


def test_options_are_typed_dataclasses(src: dict[str, Module]) -> None:
    bad = untyped_options(src) + context_extras(src)
    assert not bad, "untyped options (use a frozen options dataclass): " + "; ".join(bad)


def test_every_check_lives_in_checks(src: dict[str, Module]) -> None:
    outside = check_classes_outside(src)
    assert "trainready.checks.resume.ResumeCheck" not in outside
    assert not outside, "Check subclasses outside src/trainready/checks/: " + ", ".join(outside)
