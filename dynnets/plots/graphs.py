"""Graphs as pictures: a static graph before and after the compile passes, and
the eager recording of a forward and its backward, as Graphviz DOT text
(rendered to SVG or PNG by Graphviz's ``dot`` where it is installed).

* :func:`compile_stages` runs the compile pipeline of
  :func:`dynnets.static.passes.optimize` on a fetch, pass by pass, and keeps
  every stage: ``before_dot()`` draws the user's whole graph (the
  equations the fetch does not need dashed and grey), ``after_dot()`` the
  optimised program (those equations gone, constants folded, common
  subexpressions merged, each fused elementwise kernel an outlined cluster
  of the equations it replaced).
* :func:`eager_dot` draws what eager mode recorded for one loss: each
  primitive application (a :class:`~dynnets.autograd.engine.Node`) with its
  output shape, the Parameters at the top (left); and the VJP calls that
  ``backward()`` makes for them, numbered in the order it runs them
  (decreasing creation order), the red edges carrying each gradient (with
  its shape) to the VJP of the node that produced the input, and at last
  into each Parameter's ``.grad`` (right).
* :func:`render_dot` / :func:`write_dot_picture` call ``dot``; without
  Graphviz they raise :class:`GraphvizMissing`, whose message says how to
  install it and where the DOT text went.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np

__all__ = ["GraphvizMissing", "have_graphviz", "render_dot", "write_dot_picture", "CompileStages", "compile_stages",
           "graph_dot", "eager_dot"]


class GraphvizMissing(RuntimeError):
    """Graphviz's ``dot`` is not on the PATH."""


def have_graphviz():
    """Whether Graphviz's ``dot`` is on the PATH."""
    return shutil.which("dot") is not None


_INSTALL = "install Graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz)"


def render_dot(text, fmt="svg", timeout=120):
    """Render DOT ``text`` with Graphviz's ``dot``; returns the bytes of the picture (``fmt``: svg, png, pdf)."""
    if fmt not in ("svg", "png", "pdf"):
        raise ValueError(f"render_dot: fmt must be 'svg', 'png' or 'pdf', got {fmt!r}")
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizMissing(f"render_dot: Graphviz's 'dot' is not installed, so DOT cannot be rendered to {fmt}: "
                              f"{_INSTALL}")
    r = subprocess.run([exe, f"-T{fmt}"], input=text.encode("utf-8"), capture_output=True, timeout=timeout)
    if r.returncode != 0:
        msg = r.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(f"render_dot: dot failed (exit {r.returncode}): {msg[0] if msg else 'no message'}")
    return r.stdout


def write_dot_picture(path, text):
    """Write DOT ``text`` beside ``path`` (``.dot``) and render it to ``path``
    (``.svg``, ``.png`` or ``.pdf``; a ``.dot`` path writes the text only),
    atomically. Returns the files written.

    Raises
    ------
    GraphvizMissing
        Without Graphviz, after writing the ``.dot`` file; the message names
        it and the command that renders it.
    """
    from .. import io as dio
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in ("dot", "svg", "png", "pdf"):
        raise ValueError(f"write_dot_picture: '{path}' should end in .svg, .png, .pdf or .dot")
    dot_path = path.with_suffix(".dot")
    dio.atomic_write_text(dot_path, text)
    if fmt == "dot":
        return [dot_path]
    if not have_graphviz():
        raise GraphvizMissing(f"Graphviz's 'dot' is not installed, so '{path}' was not drawn; the graph is in "
                              f"'{dot_path}': {_INSTALL}, then run: dot -T{fmt} {dot_path} -o {path}")
    dio.atomic_write_bytes(path, render_dot(text, fmt))
    return [dot_path, path]


# --------------------------------------------------------------------------
# static graphs before and after the passes
# --------------------------------------------------------------------------


def graph_dot(graph, **kwargs):
    """``graph.to_dot(**kwargs)`` (:func:`dynnets.static.dot.to_dot`)."""
    return graph.to_dot(**kwargs)


class CompileStages:
    """A fetch's graph at every stage of the compile pipeline.

    Attributes
    ----------
    graph : Graph
        The user's graph, whole.
    stages : list of (str, Graph)
        ``("program", ...)`` (the whole graph with the fetches as outputs),
        then the result of each pass in pipeline order.
    after : Graph
        The optimised program (the last stage).
    fused : dict
        Output value id of each fused kernel -> the equations it replaced.
    unneeded : set of int
        Output value ids of the user graph's equations that pruning removed.
    """

    def __init__(self, graph, stages, fused):
        self.graph = graph
        self.stages = stages
        self.after = stages[-1][1]
        self.fused = fused
        pruned = dict(stages)["prune"]
        kept = {e.outs[0] for e in pruned.eqns}
        self.unneeded = {e.outs[0] for e in graph.eqns if e.outs[0] not in kept}

    def stage(self, name):
        """The graph after pass ``name``."""
        for n, g in self.stages:
            if n == name:
                return g
        raise KeyError(f"compile_stages: no stage {name!r} (stages: {', '.join(n for n, _ in self.stages)})")

    def counts(self):
        """Equations at each stage, as a dict."""
        return {n: len(g.eqns) for n, g in self.stages}

    def before_dot(self, title=None, **kwargs):
        """DOT of the user's graph; equations the fetches do not need dashed and grey."""
        prog = dict(self.stages)["program"]
        if title is None:
            title = f"before the passes: {len(self.graph.eqns)} equations ({len(self.unneeded)} not needed by the " \
                    f"fetch, dashed)"
        return prog.to_dot(title=title, dim=self.unneeded, **kwargs)

    def after_dot(self, title=None, **kwargs):
        """DOT of the optimised program, fused kernels as outlined clusters."""
        if title is None:
            n_fused = len(self.fused)
            title = f"after the passes: {len(self.after.eqns)} equations, {n_fused} fused kernel" \
                    f"{'s' if n_fused != 1 else ''}"
        return self.after.to_dot(title=title, fused=self.fused, **kwargs)


    def write(self, out, stem):
        """Write ``{stem}_before`` and ``{stem}_after`` pictures into folder ``out``
        (``.dot``, and ``.svg`` where Graphviz is installed).

        Returns
        -------
        (files, note)
            The files written, and None or the reason the SVGs are missing
            (Graphviz not installed: the ``.dot`` files are there).
        """
        out = Path(out)
        files, note = [], None
        for part, text in (("before", self.before_dot()), ("after", self.after_dot())):
            try:
                files += write_dot_picture(out / f"{stem}_{part}.svg", text)
            except GraphvizMissing as exc:
                files.append(out / f"{stem}_{part}.dot")
                note = str(exc)
        return files, note


def _fused_members(before, after):
    """For each fused equation of ``after``, the equations of ``before`` it replaced (in order).

    They are exactly the equations between the kernel's inputs and its
    output: walking back from the output through ``before`` stops at the
    kernel's inputs (its arrays and scalars)."""
    prod = before.producers()
    out = {}
    for e in after.eqns:
        if e.prim.name != "fused":
            continue
        stop = set(e.ins)
        seen = {}
        stack = [e.outs[0]]
        while stack:
            v = stack.pop()
            if v in stop:
                continue
            m = prod[v]
            if id(m) in seen:
                continue
            seen[id(m)] = m
            stack.extend(m.ins)
        order = {id(m): k for k, m in enumerate(before.eqns)}
        out[e.outs[0]] = sorted(seen.values(), key=lambda m: order[id(m)])
    return out


def compile_stages(fetches, feed_dict=None, graph=None):
    """Run the compile pipeline on ``fetches`` pass by pass (as :class:`Session` does for a run).

    Parameters
    ----------
    fetches : Value or list of Values
    feed_dict : dict, optional
        ``{placeholder: array}``: the fed shapes, which decide whether arrays
        are large enough to fuse (``FUSE_MIN_SIZE``) and get buffers.
    graph : Graph, optional
        Default: the fetches' graph.

    Returns
    -------
    CompileStages
    """
    from ..autograd.primitives import Aval
    from ..static import passes as P
    fetches = list(fetches) if isinstance(fetches, (list, tuple)) else [fetches]
    if not fetches:
        raise ValueError("compile_stages: expected at least one fetch")
    g = graph if graph is not None else fetches[0].graph
    input_avals = {}
    for k, v in (feed_dict or {}).items():
        a = np.asarray(v)
        input_avals[k.id] = Aval(tuple(a.shape), g.avals[k.id].dtype)
    prog = g.with_outputs(fetches)
    stages = [("program", prog)]
    P.optimize(prog, input_avals, stages=stages)
    fused = _fused_members(dict(stages)["schedule"], dict(stages)["fuse_elementwise"])
    return CompileStages(g, stages, fused)


# --------------------------------------------------------------------------
# eager recordings
# --------------------------------------------------------------------------


def _shape(a):
    if isinstance(a, tuple):
        return "; ".join(_shape(x) for x in a)
    a = np.asarray(a)
    return "(" + ", ".join(str(d) for d in a.shape) + ("," if a.ndim == 1 else "") + ")"


def eager_dot(root, names=None, backward=True, title=None):
    """DOT of the eager recording behind ``root`` (a Tensor), forward and (``backward``) backward.

    Call it before ``root.backward()`` (which frees the recording) or after
    ``backward(retain_graph=True)``.

    Parameters
    ----------
    root : Tensor
        A result with a recording (``root.grad_fn`` is not None), usually a loss.
    names : Module or dict, optional
        Names of the Parameters: a Module (its ``named_parameters()``) or
        ``{name: Parameter}``; others are drawn by shape.
    backward : bool
        Also draw the VJPs that ``backward()`` runs, beside their nodes.
    title : str, optional
    """
    from ..static.dot import MAX_NODES, dot_quote
    node = getattr(root, "grad_fn", None)
    if node is None:
        raise ValueError("eager_dot: the tensor has no recording (grad_fn is None): it is a leaf, or was computed "
                         "under no_grad() or from inputs that need no gradient")
    if names is not None and hasattr(names, "named_parameters"):
        names = dict(names.named_parameters())
    pname = {id(p): n for n, p in (names or {}).items()}
    # every node reachable from the root, and the leaves (Parameters) they read
    nodes = {}
    leaves = {}
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in nodes:
            continue
        if n.freed:
            raise ValueError("eager_dot: backward() has already freed this recording; draw it before backward(), "
                             "or call backward(retain_graph=True)")
        nodes[id(n)] = n
        for p in n.parents:
            if p is None:
                continue
            pn = p.grad_fn
            if pn is None:
                leaves[id(p)] = p
            elif id(pn) not in nodes:
                stack.append(pn)
        if len(nodes) > MAX_NODES:
            raise ValueError(f"eager_dot: the recording has more than MAX_NODES={MAX_NODES} nodes (Graphviz would "
                             f"take minutes); draw a smaller example")
    order = sorted(nodes.values(), key=lambda n: n.seq)                  # creation order: a topological order
    step = {id(n): k + 1 for k, n in enumerate(reversed(order))}        # backward's max-heap order
    lines = ['digraph "eager" {', "  rankdir=TB;", '  node [fontname="DejaVu Sans", fontsize=10];',
             '  edge [color="#555555", arrowsize=0.6];']
    if title is None:
        title = f"eager recording of {len(order)} primitive calls" + (
            f" (left) and the {len(order)} VJP calls of backward() (right, numbered in the order it runs them)"
            if backward else "")
    lines += [f"  label={dot_quote(title)};", "  labelloc=t;", "  fontsize=14;", '  fontname="DejaVu Sans";']
    leaf_index = {i: k for k, i in enumerate(leaves)}
    leaf_name = {}
    unnamed = 0
    for i, p in leaves.items():
        n = pname.get(i)
        if n is None:
            unnamed += 1
            n = getattr(p, "name", None) or f"leaf {unnamed}"
        leaf_name[i] = n
    fwd = ["  subgraph cluster_forward {", '    label="forward: what bind() recorded"; fontsize=11; color="#999999";']
    for i, p in leaves.items():
        fwd.append(f"    p{leaf_index[i]} [label={dot_quote(leaf_name[i] + chr(10) + _shape(p.numpy()))}, shape=box, "
                   f'style="rounded,filled", fillcolor="#b7e1a1"];')
    edges = []
    const = 0
    for n in order:
        fwd.append(f"    f{n.seq} [label={dot_quote(n.prim.name + chr(10) + _shape(n.out))}, shape=box, "
                   f'style="rounded", color="#555555"];')
        for p, a in zip(n.parents, n.args):
            if p is None:
                if isinstance(a, np.ndarray):
                    const += 1
                    fwd.append(f"    k{const} [label={dot_quote(f'{a.dtype} {_shape(a)}')}, shape=plaintext, "
                               f'fontcolor="#888888", fontsize=8];')
                    edges.append(f'  k{const} -> f{n.seq} [color="#bbbbbb"];')
                continue
            pn = p.grad_fn
            edges.append(f"  {'p%d' % leaf_index[id(p)] if pn is None else 'f%d' % pn.seq} -> f{n.seq};")
    fwd.append("  }")
    lines += fwd
    if backward:
        terms = {i: 0 for i in leaves}
        bwd = ["  subgraph cluster_backward {",
               '    label="backward: the VJPs backward() calls"; fontsize=11; color="#cb181d"; fontcolor="#cb181d";',
               '    seed [label="d loss / d loss = 1", shape=plaintext, fontcolor="#cb181d"];']
        for n in order:
            bwd.append(f"    b{n.seq} [label={dot_quote(f'{step[id(n)]}. vjp {n.prim.name}')}, shape=box, "
                       f'style="rounded,dashed", color="#cb181d", fontcolor="#cb181d"];')
            for p in n.parents:
                if p is None:
                    continue
                pn = p.grad_fn
                if pn is None:
                    terms[id(p)] += 1
                    dst = f"g{leaf_index[id(p)]}"
                else:
                    dst = f"b{pn.seq}"
                edges.append(f'  b{n.seq} -> {dst} [color="#cb181d", label={dot_quote(_shape(p.numpy()))}, '
                             f'fontsize=8, fontcolor="#cb181d"];')
        for i, p in leaves.items():
            k = terms[i]
            label = f"{leaf_name[i]}.grad\nsum of {k} term" + ("s" if k != 1 else "")
            bwd.append(f"    g{leaf_index[i]} [label={dot_quote(label)}, "
                       f'shape=box, style="rounded,filled", fillcolor="#fcbba1", color="#cb181d"];')
        bwd.append("  }")
        lines += bwd
        edges.append(f'  seed -> b{node.seq} [color="#cb181d"];')
    lines += edges
    lines.append("}")
    return "\n".join(lines) + "\n"
