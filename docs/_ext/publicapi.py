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
