"""The package's import rules (DESIGN.md, "Layout"): ``dynnets.data`` needs
only the standard library, numpy and networkx (and the atomic writer,
:mod:`dynnets.io`); nothing in the package imports ``experiments/`` or
``benchmarks/``; no experiment script imports the command line; no module
imports another module's ``_private`` names; the package's imports have no
cycle and flow one way, from the kernels up to the command line."""
import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dynnets"

#: Private names still imported across modules, with the issue that removes them.
PENDING = set()

#: The layers of DESIGN.md's dependency picture, lowest first: a module imports
#: modules of its own layer or lower ones only (a module's layer is that of the
#: longest prefix here that names it; modules named by none are not checked).
LAYERS = [
    ("dynnets.autograd.dtypes", "dynnets.autograd.kernels", "dynnets.autograd.reference"),
    ("dynnets.autograd.gradtypes",),
    ("dynnets.autograd.primitives",),
    ("dynnets.autograd.engine", "dynnets.autograd.values"),
    ("dynnets.autograd.ops",),
    ("dynnets.autograd.tensor",),
    ("dynnets.autograd", "dynnets.autograd.gradcheck"),
    ("dynnets.static", "dynnets.nn"),
    ("dynnets.models",),
    ("dynnets.train",),
    ("dynnets.cli", "dynnets.runs", "dynnets.sweep"),
]


def _imports(path):
    """(line, absolute module, names) of every import in ``path``; relative
    imports resolved against its package."""
    rel = path.relative_to(ROOT).with_suffix("")
    package = list(rel.parts[:-1])          # a module's package; an __init__'s own package
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            out.append((node.lineno, mod, tuple(a.name for a in node.names)))
    return out


def _files(folder):
    return sorted(folder.rglob("*.py"))


def test_data_depends_on_numpy_and_networkx_only():
    allowed_third_party = {"numpy", "networkx"}
    bad = []
    for f in _files(PACKAGE / "data"):
        for line, mod, names in _imports(f):
            top = mod.split(".")[0]
            if top == "dynnets":
                ok = mod.startswith("dynnets.data") or mod == "dynnets.io" or (mod == "dynnets" and names == ("io",))
            else:
                ok = top in sys.stdlib_module_names or top in allowed_third_party or top == "__future__"
            if not ok:
                bad.append(f"{f.relative_to(ROOT)}:{line}: {mod}")
    assert not bad, bad


def test_nothing_in_the_package_imports_experiments_or_benchmarks():
    bad = [f"{f.relative_to(ROOT)}:{line}: {mod}" for f in _files(PACKAGE) for line, mod, _ in _imports(f)
           if mod.split(".")[0] in ("experiments", "benchmarks", "_util", "_common")]
    assert not bad, bad


def test_experiment_scripts_do_not_import_the_command_line():
    bad = [f"{f.relative_to(ROOT)}:{line}: {mod}" for f in _files(ROOT / "experiments")
           for line, mod, names in _imports(f) if mod == "dynnets.cli" or (mod == "dynnets" and "cli" in names)]
    assert not bad, bad


@pytest.mark.parametrize("folder", ["dynnets", "experiments"])
def test_no_module_imports_private_names_of_another(folder):
    bad = []
    for f in _files(ROOT / folder):
        rel = f.relative_to(ROOT).as_posix()
        for line, mod, names in _imports(f):
            if not (mod.startswith("dynnets") or (folder == "experiments" and mod == "_util")):
                continue
            for n in names:
                if n.startswith("_") and not n.endswith("__") and (rel, n) not in PENDING:
                    bad.append(f"{rel}:{line}: from {mod} import {n}")
    assert not bad, bad


def _module_graph():
    """{module: the package modules it imports}, every import counted (also
    those inside functions: a deferred import is still a dependency).
    ``from package import name`` depends on the submodule where ``name`` is
    one, else on the package."""
    files = {}
    for f in _files(PACKAGE):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph = {}
    for mod, f in files.items():
        deps = set()
        for _, m, names in _imports(f):
            if not m.startswith("dynnets"):
                continue
            subs = [f"{m}.{n}" for n in names if f"{m}.{n}" in files]
            deps.update(subs if subs and len(subs) == len(names) else [m, *subs])
        graph[mod] = {d for d in deps if d in files and d != mod}
    return graph


def test_imports_have_no_cycles():
    graph = _module_graph()
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):                      # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def _layer(mod):
    best, level = "", None
    for k, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (mod == p or mod.startswith(p)) and len(p) > len(best):
                best, level = p, k
    return level


def test_imports_flow_one_way():
    bad = [f"{m} -> {d}" for m, deps in sorted(_module_graph().items()) for d in sorted(deps)
           if _layer(m) is not None and _layer(d) is not None and _layer(d) > _layer(m)]
    assert not bad, f"imports against DESIGN.md's layers: {bad}"


def test_no_reach_into_a_tensors_gradient_slot():
    """Outside the modules that implement tensors (tensor, engine,
    autobatching), the gradient is read and written through ``.grad`` or
    ``.raw_grad`` (row-sparse as stored), never the ``_grad`` slot (DESIGN.md:
    ``p._grad`` is a private reach)."""
    owners = {PACKAGE / "autograd" / n for n in ("tensor.py", "engine.py", "autobatching.py")}
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in owners:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "_grad":
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, f"reaches into Tensor._grad: {bad}"
