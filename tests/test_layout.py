"""The package's import rules (DESIGN.md, "Layout"): ``dynnets.data`` needs
only the standard library, numpy and networkx (and the atomic writer,
:mod:`dynnets.io`); nothing in the package imports ``experiments/`` or
``benchmarks/``; no experiment script imports the command line; no module
imports another module's ``_private`` names."""
import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dynnets"

#: Private names not yet exported publicly.  TODO(issue 11): empty this set.
PENDING = set()
#: The autograd package is restructured in the other half of issue 11.
#: TODO(issue 11): drop this exemption.
EXEMPT = ("dynnets/autograd/",)


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
        if rel.startswith(EXEMPT):
            continue
        for line, mod, names in _imports(f):
            if not (mod.startswith("dynnets") or (folder == "experiments" and mod == "_util")):
                continue
            for n in names:
                if n.startswith("_") and not n.endswith("__") and (rel, n) not in PENDING:
                    bad.append(f"{rel}:{line}: from {mod} import {n}")
    assert not bad, bad
