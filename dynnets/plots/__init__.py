"""Pictures: sentiment trees (SVG written directly, PNG through matplotlib), graphs (DOT, rendered by
Graphviz) and the figures of the runs and experiments (matplotlib).

Modules
-------
trees    tree_layout (tidy Reingold-Tilford layout), tree_svg / write_tree_svg, tree_png / write_tree_png,
         the 5-step diverging palette
graphs   DOT pictures of a static graph before and after the compile passes (compile_stages, graph_dot),
         of an eager recording's forward and backward (eager_dot), render_dot through Graphviz
figures  PNG figures of ``dynnets compare`` and experiments/graph_overhead.py (compare_figures,
         overhead_figure, save_figure); have_matplotlib
"""
from .graphs import (GraphvizMissing, compile_stages, eager_dot, graph_dot, have_graphviz, render_dot,
                     write_dot_picture)
from .figures import have_matplotlib
from .trees import (PALETTE, TreeLayout, class_names, layout_violations, palette, scene, text_width, tree_layout,
                    tree_png, tree_svg, write_tree_png, write_tree_svg)

__all__ = ["PALETTE", "palette", "class_names", "text_width", "TreeLayout", "tree_layout", "layout_violations",
           "scene", "tree_svg", "write_tree_svg", "tree_png", "write_tree_png", "have_matplotlib",
           "graph_dot", "compile_stages", "eager_dot", "render_dot", "write_dot_picture", "have_graphviz",
           "GraphvizMissing"]
