"""Graph.append_equation: the compiler core's public way to add an equation
whose result avals are known (loops, gradients, importers and optimizers
use it; nothing outside graph.py calls the private ``_append``)."""
import numpy as np

import dynnets.static as ds
from dynnets.autograd.primitives import PRIMITIVES, Aval


def test_an_appended_equation_runs_and_has_a_scoped_unique_name():
    g = ds.Graph()
    with g.as_default():
        x = ds.placeholder((2,), np.float64, name="x")
        with ds.name_scope("block"):
            y = g.append_equation(PRIMITIVES["tanh"], (x.id,), {}, Aval((2,), np.dtype(np.float64)), name="act")
            y2 = g.append_equation(PRIMITIVES["tanh"], (y.id,), {}, Aval((2,), np.dtype(np.float64)), name="act")
    assert (y.name, y2.name) == ("block/act", "block/act_1")
    assert g.get_tensor_by_name("block/act:0") is y
    with ds.Session(g) as sess:
        np.testing.assert_allclose(sess.run(y2, {x: [0.5, -1.0]}), np.tanh(np.tanh([0.5, -1.0])))
