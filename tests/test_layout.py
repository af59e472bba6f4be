"""The package's import rules (DESIGN.md, "Layout"): ``dynnets.data`` needs
only the standard library, numpy and networkx (and the atomic writer,
:mod:`dynnets.io`); nothing in the package imports ``experiments/`` or
``benchmarks/``; no experiment script imports the command line; no module
imports another module's ``_private`` names nor reads them as attributes
(``mod._x``, ``g._append``, ``opt._slots``); the package's imports have no
cycle and flow one way, from the kernels up to the command line; no module
is over 1,000 lines unless listed with its reason."""
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
    ("dynnets.autograd.modes",),
    ("dynnets.autograd.engine", "dynnets.autograd.values", "dynnets.autograd.backprop"),
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


CORE = "dynnets.static.core"


def test_the_compiler_core_never_imports_the_tf1_facade():
    """``dynnets.static.core`` (graph IR, passes, lowering, executors, native
    tier, the compiled-program object) imports nothing of ``dynnets.static``
    outside itself, nor the eager front ends: new passes and tiers never touch
    TF1 names. Every import counts, those inside functions too."""
    facade = ("dynnets.static", "dynnets.nn", "dynnets.models", "dynnets.train", "dynnets.cli")
    bad = []
    files = _files(PACKAGE / "static" / "core")
    assert len(files) >= 8, files
    for f in files:
        for line, mod, names in _imports(f):
            targets = [mod] if mod != "dynnets.static" else [f"{mod}.{n}" for n in names]
            for t in targets:
                if t.startswith(facade) and not (t == CORE or t.startswith(CORE + ".")):
                    bad.append(f"{f.relative_to(ROOT)}:{line}: {t}")
    assert not bad, bad


def test_the_old_paths_of_the_core_modules_are_the_core_modules():
    import importlib
    for m in ("passes", "fusion", "lower", "execute", "native", "native_gen", "backward", "subprogram"):
        old = importlib.import_module(f"dynnets.static.{m}")
        assert old is importlib.import_module(f"{CORE}.{m}"), m


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
    owners = {PACKAGE / "autograd" / n for n in ("tensor.py", "engine.py", "backprop.py", "autobatching.py")}
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in owners:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "_grad":
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, f"reaches into Tensor._grad: {bad}"


#: Modules split by concern in issue 24 (the sweep, the native tier, the passes, the runs, graph files): each stays
#: under the 1,000-line limit the README's layout section sets (other modules follow as they split).
SPLIT_MODULES = ["dynnets/sweep/*.py", "dynnets/static/native*.py", "dynnets/static/passes.py",
                 "dynnets/static/fusion.py", "dynnets/runs.py", "dynnets/static/export.py",
                 "dynnets/static/graphdef/*.py", "dynnets/static/core/*.py", "dynnets/static/graph.py",
                 "dynnets/static/value.py"]


def test_split_modules_stay_under_a_thousand_lines():
    files = [f for pattern in SPLIT_MODULES for f in sorted(ROOT.glob(pattern))]
    assert len(files) >= 11
    long = {str(f.relative_to(ROOT)): n for f in files if (n := len(f.read_text(encoding="utf-8").splitlines())) > 1000}
    assert not long, long


def test_the_sweep_and_the_runs_load_data_with_one_function():
    from dynnets import runs, sweep
    assert runs.load_data is sweep.load_data


# ---------------------------------------------------------------------------
# private attributes (issue 24)
#
# Python has no types here, so the check is by name: a module may read
# ``x._name`` when it defines ``_name`` itself (an attribute of one of its
# classes: ``self._name = ...``, a class-level name or method, a
# ``__slots__`` entry) or when no module of the package defines it (a
# standard-library one: a namedtuple's ``_fields``). Reading a name that only
# other modules define is a reach into their objects.
# ---------------------------------------------------------------------------

#: Modules that read the private slots of objects another module defines, by
#: design, with the reason: {reader: {owner: why}}.
FRIENDS = {
    "dynnets/autograd/engine.py": {
        "dynnets/autograd/tensor.py": "bind creates tensors without __init__ and reads their _data on every op "
                                      "(a property costs ~25 ns per argument; Tensor's docstring)",
        "dynnets/autograd/autobatch/": "an eager op on a lazy tensor reads its view on the tape (_eager)",
    },
    "dynnets/autograd/backprop.py": {
        "dynnets/autograd/tensor.py": "backward and the in-place writes set tensors' _grad/_node/_data slots, as "
                                      "the engine it was split from (issue 24)",
        "dynnets/autograd/autobatch/": "an in-place write's operand may be a lazy tensor (_eager)",
    },
    # the autobatch package's phases share its lazy handles' slots (one data
    # structure split by phase, issue 23) and read tensors' _data as bind does
    **{f"dynnets/autograd/autobatch/{m}.py": {
        "dynnets/autograd/autobatch/": "the phases of one package share the lazy handles' slots",
        "dynnets/autograd/tensor.py": "lazy handles are Tensors whose _data slot the phases fill, as bind does"}
       for m in ("context", "storage", "execute", "record", "lazy", "levels")},
}

#: Private attributes still read across modules, {(module, attribute): the issue that removes them}.
PENDING_ATTRS = {
}


def _private(name):
    return name.startswith("_") and not name.endswith("__")


def _defined_private_attributes(tree):
    """The private attribute names a module defines for its own objects."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for b in node.body:
                if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(b.name):
                    out.add(b.name)
                elif isinstance(b, (ast.Assign, ast.AnnAssign)):
                    for t in (b.targets if isinstance(b, ast.Assign) else [b.target]):
                        if isinstance(t, ast.Name) and _private(t.id):
                            out.add(t.id)
                        slots = isinstance(t, ast.Name) and t.id == "__slots__"
                        if slots and isinstance(b.value, (ast.Tuple, ast.List)):
                            out.update(e.value for e in b.value.elts if isinstance(e, ast.Constant)
                                       and isinstance(e.value, str) and _private(e.value))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                for e in ast.walk(t):
                    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and \
                            e.value.id in ("self", "cls") and _private(e.attr):
                        out.add(e.attr)
        elif isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and \
                node.args[0].id in ("self", "cls") and isinstance(node.args[1], ast.Constant) and \
                isinstance(node.args[1].value, str) and _private(node.args[1].value) and \
                ast.unparse(node.func).split(".")[-1] in ("setattr", "__setattr__", "_local_setattr"):
            out.add(node.args[1].value)           # object.__setattr__(self, "_x", v)
    return out


def _package_trees():
    return {f.relative_to(ROOT).as_posix(): ast.parse(f.read_text(encoding="utf-8")) for f in _files(PACKAGE)}


def test_no_module_reads_private_attributes_of_another_modules_objects():
    trees = _package_trees()
    defined = {rel: _defined_private_attributes(t) for rel, t in trees.items()}
    owners = {}
    for rel, names in defined.items():
        for n in names:
            owners.setdefault(n, set()).add(rel)
    bad, used_pending = [], set()
    for rel, tree in trees.items():
        friends = FRIENDS.get(rel, {})
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            n = node.attr
            if n in defined[rel] or n not in owners:
                continue
            if any(o.startswith(f) for o in owners[n] for f in friends):
                continue
            if (rel, n) in PENDING_ATTRS:
                used_pending.add((rel, n))
                continue
            bad.append(f"{rel}:{node.lineno}: {ast.unparse(node)} (defined in {', '.join(sorted(owners[n]))})")
    assert not bad, "private attributes of other modules' objects read:\n" + "\n".join(bad)
    stale = sorted(set(PENDING_ATTRS) - used_pending)
    assert not stale, f"PENDING_ATTRS lists reaches that are gone (remove them): {stale}"


def _module_files():
    return {".".join(f.relative_to(ROOT).with_suffix("").parts): f for f in _files(PACKAGE)}


def test_no_module_reads_a_private_name_of_another_module():
    """``engine._MODES``, ``_engine._bind_general``: a module's private names
    are its own (the import rule above, for attribute access)."""
    files = _module_files()
    bad = []
    for f in _files(PACKAGE):
        rel = f.relative_to(ROOT)
        parts = list(rel.with_suffix("").parts)
        package = parts[:-1]
        tree = ast.parse(f.read_text(encoding="utf-8"))
        mods = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("dynnets"):
                        mods[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                m = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module
                for a in node.names:
                    full = f"{m}.{a.name}"
                    if full in files or f"{full}.__init__" in files:
                        mods[a.asname or a.name] = full
        me = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name) \
                    and node.value.id in mods and mods[node.value.id] != me:
                bad.append(f"{rel.as_posix()}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, bad


#: Modules over the limit, with the reason (DESIGN.md: the README's layout section says why).
LONG_MODULES = {
    "dynnets/autograd/kernels_tree.py": "Numba's cache: kernels that call each other stay in one file "
                                        "(DESIGN.md rule 3)",
}
MAX_LINES = 1000


def test_modules_are_at_most_1000_lines_unless_listed():
    sizes = {f.relative_to(ROOT).as_posix(): len(f.read_text(encoding="utf-8").splitlines()) for f in _files(PACKAGE)}
    over = sorted(f"{m} ({n} lines)" for m, n in sizes.items() if n > MAX_LINES and m not in LONG_MODULES)
    assert not over, f"modules over {MAX_LINES} lines, not in LONG_MODULES: {over}"
    stale = sorted(m for m in LONG_MODULES if sizes.get(m, 0) <= MAX_LINES)
    assert not stale, f"LONG_MODULES lists modules that are gone or within the limit (remove them): {stale}"


def _top_level_names(tree):
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.append(node.name)
        elif isinstance(node, ast.Assign):
            out += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return out


def test_every_public_op_is_defined_once_in_the_ops_package():
    """``dynnets.autograd.ops`` is split by domain, as the primitives are
    (issue 24): each public name is defined in one module of the package,
    and the package is the namespace that holds every op of ``__all__``."""
    from dynnets.autograd import ops
    where = {}
    files = sorted((PACKAGE / "autograd" / "ops").glob("*.py"))
    assert len(files) >= 8, files
    for f in files:
        if f.name != "__init__.py":
            for n in _top_level_names(ast.parse(f.read_text(encoding="utf-8"))):
                if not n.startswith("_"):
                    where.setdefault(n, []).append(f.stem)
    twice = {n: ms for n, ms in where.items() if len(ms) > 1}
    assert not twice, f"defined in more than one module: {twice}"
    missing = [n for n in ops.__all__ if n not in where]
    assert not missing, f"in ops.__all__ but defined in no module of the package: {missing}"
    moved = [n for n in ops.__all__ if getattr(ops, n) is not getattr(
        sys.modules[f"dynnets.autograd.ops.{where[n][0]}"], n)]
    assert not moved, moved


def test_tensor_methods_are_declared_in_the_class_bodies():
    """DESIGN.md: a tensor's methods are declared in its class (``Tensor``, or
    the ``TensorOps`` mixin it shares with the static ``Value``), never set
    on the class from outside its body (``Tensor.x = f``,
    ``setattr(TensorOps, ...)``)."""
    classes = {"Tensor", "TensorOps", "Parameter"}
    bad = []
    for f in _files(PACKAGE):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in classes:
                        bad.append(f"{f.relative_to(ROOT)}:{node.lineno}: {ast.unparse(t)} = ...")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                    and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in classes:
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, bad


def test_no_symbolic_probes_in_nn_or_ops():
    """Layers and ops ask whether an operand has values through the
    interpreter protocol (:mod:`dynnets.autograd.values`: ``is_interpreted``,
    ``concrete``, ``as_operand``), never by probing a value's
    ``_is_symbolic`` attribute (issue 24 removed the probes; issue 25 the
    last four)."""
    files = list(_files(PACKAGE / "nn")) + list(_files(PACKAGE / "autograd" / "ops"))
    assert any(f.name == "functional_attention.py" for f in files) and any(f.name == "elementwise.py" for f in files)
    bad = [f"{f.relative_to(ROOT)}:{i}" for f in files
           for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if "_is_symbolic" in line]
    assert not bad, f"_is_symbolic probes (use dynnets.autograd.values.is_interpreted / concrete): {bad}"
