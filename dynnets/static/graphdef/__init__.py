"""Graph files, by concern; the public API is :mod:`dynnets.static.export`
(TF1's names), which also describes the format.

``format``
    :class:`GraphDef`, the format's version and errors, the zip file, the
    structural checks every file passes first
``names``
    how a file names a primitive (the shared table, the static graph's own
    primitives, gradients)
``optimizers``
    the optimizer classes a file may hold and their state (slot variables,
    step counters), through the optimizers' public API
``encode``
    graph -> GraphDef (``as_graph_def``)
``build``
    GraphDef -> nodes of a graph (``import_graph_def``), checking every node
"""
