"""The public names of dynnets, and a build check that each has a docstring.

``public_names(module)`` lists what a user of a module may import: its
``__all__`` (every module of the public API defines one). ``missing_docstrings()``
lists the public functions and classes of :data:`MODULES` without a docstring
of their own; the Sphinx extension turns each into a warning, so the
warnings-as-errors build of CI fails on an undocumented public name, and
``tests/test_docs.py`` runs the same check without Sphinx.
"""
import importlib
import inspect

MODULES = ("dynnets", "dynnets.nn", "dynnets.static", "dynnets.data", "dynnets.models", "dynnets.plots")


def public_names(module):
    """The names in ``module.__all__`` (in order, each once)."""
    mod = importlib.import_module(module)
    return list(dict.fromkeys(getattr(mod, "__all__", [n for n in dir(mod) if not n.startswith("_")])))


def missing_docstrings(modules=MODULES):
    """``[(module, name)]`` of public functions and classes without a docstring."""
    out = []
    for module in modules:
        mod = importlib.import_module(module)
        for name in public_names(module):
            obj = getattr(mod, name)
            if inspect.ismodule(obj) or not (inspect.isclass(obj) or callable(obj)):
                continue
            doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
            if not (doc or "").strip():
                out.append((module, name))
    return out


def _check(app):
    from sphinx.util import logging
    log = logging.getLogger("publicapi")
    for module, name in missing_docstrings():
        log.warning(f"{module}.{name}: a public name without a docstring", type="publicapi", subtype="docstring")


def setup(app):
    app.connect("builder-inited", _check)
    app.connect("missing-reference", _same_object)
    app.connect("autodoc-skip-member", _skip_aliases)
    import logging as _logging
    from pathlib import Path
    _CanonicalDuplicates.documented = {p.stem for p in (Path(app.srcdir) / "api").glob("dynnets*.rst")}
    _logging.getLogger("sphinx.sphinx.domains.python").addFilter(_CanonicalDuplicates())
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def _resolve_object(path):
    """The object a dotted path names (module attributes walked), or None."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
        except AttributeError:
            return None
        return obj
    return None


def _same_object(app, env, node, contnode):
    """Resolve ``dynnets.autograd.tensor.Tensor`` to where the same object is
    documented (``dynnets.Tensor``): docstrings name an object by the module
    that defines it, the reference lists it where users import it from."""
    if node.get("refdomain") != "py" or not node.get("reftarget", "").startswith("dynnets."):
        return None
    target = _resolve_object(node["reftarget"])
    if target is None or isinstance(target, (int, float, str, bool, tuple, dict)):
        return None
    index = env.temp_data.get("publicapi_index")
    if index is None:
        index = {}
        for name, entry in env.get_domain("py").objects.items():
            if entry.objtype == "module" or not name.startswith("dynnets."):
                continue
            obj = _resolve_object(name)
            if obj is not None and not isinstance(obj, (int, float, str, bool, tuple, dict)):
                index.setdefault(id(obj), (name, entry))
        env.temp_data["publicapi_index"] = index
    hit = index.get(id(target))
    if hit is None:
        return None
    from sphinx.util.nodes import make_refnode
    name, entry = hit
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, name)


class _CanonicalDuplicates:
    """Drop "duplicate object description" of a *canonical* name only.

    autodoc gives a class documented as ``dynnets.nn.Parameter`` the
    canonical name of its defining module (``dynnets.autograd.tensor.Parameter``)
    so that references by that name resolve; a class exported by two public
    modules (``dynnets.Parameter`` and ``dynnets.nn.Parameter``) then notes
    the canonical name twice. That is one object listed where users import
    it from, not a duplicate; a real duplicate (a name of a documented module
    described twice) still warns.
    """

    documented = set()

    def filter(self, record):
        msg = getattr(record, "msg", "")
        if isinstance(msg, str) and msg.startswith("duplicate object description of") and record.args:
            name = str(record.args[0])
            return name.rsplit(".", 1)[0] in self.documented or not name.startswith("dynnets.")
        return True


def _skip_aliases(app, what, name, obj, skip, options):
    """One entry per object of a module page: ``__all__`` may list a name
    twice, and a class under two names (``MaxMin`` is ``SortResult``) would
    be two descriptions of one canonical object."""
    if what != "module" or skip:
        return None
    seen = app.env.temp_data.setdefault("publicapi_seen", {})
    doc = seen.setdefault(app.env.docname, set())
    key = id(obj) if isinstance(obj, type) else name
    if key in doc:
        return True
    doc.add(key)
    return None
