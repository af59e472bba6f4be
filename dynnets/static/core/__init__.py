"""The compiler core of the static graph: the graph IR (:mod:`.ir`), the
passes (:mod:`.passes`, :mod:`.fusion`), the lowering to plans
(:mod:`.lower`), the executors (:mod:`.execute`), the native tier
(:mod:`.native`, :mod:`.native_gen`) and the compiled-program object with
its cache (:mod:`.program`), symbolic gradients (:mod:`.backward`), loop-body and
branch programs (:mod:`.subprogram`) and the graph itself (:mod:`.graph`: the IR's
tables and values; :mod:`.tensor_array_value`: a TensorArray at run time).

Nothing here imports the TF1 facade (:mod:`dynnets.static`'s placeholder,
Variable, Session, control flow as API, nn, train...): new passes and tiers
never touch TF1 names (``tests/test_layout.py`` checks it).
"""
