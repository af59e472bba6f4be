"""The TF1 graph's public API for names, scopes and variable loading
(``Graph.unique_name``, ``get_name_scope``, ``name_scope``, the variable
store ``get_variable`` uses, ``Session.load_variable``): what the facade's
modules and the exporter call instead of the graph's private tables."""
import numpy as np
import pytest

import dynnets.static as tf


def test_unique_name_follows_tf1_inside_and_outside_name_scopes():
    g = tf.Graph()
    with g.as_default():
        assert g.unique_name("w", mark_as_used=False) == "w"
        assert g.unique_name("w") == "w"
        assert g.unique_name("w", mark_as_used=False) == "w_1"
        assert g.unique_name("w", mark_as_used=False) == "w_1"     # not reserved
        assert g.unique_name("w") == "w_1"
        x = tf.placeholder(tf.float32, [2], name="w")               # an op takes the next free name
        assert x.name == "w_2"
        with tf.name_scope("outer"):
            assert g.get_name_scope() == "outer"
            assert g.unique_name("a") == "outer/a"
            assert g.fresh_name("outer/a") == "outer/a_1"               # a full name: no scope added
            assert g.fresh_name("top") == "top"
            y = x * 2.0
            assert y.name.startswith("outer/")
        assert g.get_name_scope() == ""


def test_graph_name_scope_nests_reenters_with_a_slash_and_resets_with_none():
    g = tf.Graph()
    with g.as_default():
        with g.name_scope("block") as s1:
            with g.name_scope("inner") as s2:
                a = tf.constant(1.0, name="c")
            with g.name_scope(None) as top:
                b = tf.constant(1.0, name="c")
        with g.name_scope("block") as s3:                            # a second "block" is made unique
            pass
        with g.name_scope("block/inner/") as s4:                     # a trailing slash re-enters, unchanged
            c = tf.constant(1.0, name="c")
    assert (s1, s2, top, s3, s4) == ("block/", "block/inner/", "", "block_1/", "block/inner/")
    assert (a.name, b.name, c.name) == ("block/inner/c", "c", "block/inner/c_1")


def test_variable_store_is_what_get_variable_shares():
    g = tf.Graph()
    with g.as_default():
        assert g.current_variable_scope() is None
        with tf.variable_scope("s") as sc:
            assert g.current_variable_scope() is sc
            w = tf.get_variable("w", [2])
        assert g.stored_variable("s/w")[0] is w
        assert g.stored_variable("s/w")[1][0] == __file__
        assert g.stored_variable("s/nope") == (None, None)
        with tf.variable_scope(None, default_name="dense"):
            pass
        assert g.default_scope_name("dense") == "dense_1"


def test_variable_load_goes_through_the_public_session_method():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.zeros(3, np.float32), name="v")
    with tf.Session(graph=g) as sess:
        v.load(np.array([1.0, 2.0, 3.0]), sess)
        np.testing.assert_array_equal(sess.run(v), np.array([1.0, 2.0, 3.0], np.float32))
        sess.load_variable(v, [4.0, 5.0, 6.0])
        np.testing.assert_array_equal(sess.run(v), np.array([4.0, 5.0, 6.0], np.float32))
        with pytest.raises(ValueError, match="load: variable 'v' has shape \\(3,\\), given \\(2,\\)"):
            sess.load_variable(v, [1.0, 2.0])


def test_the_tf1_graph_is_the_core_ir_with_tf1_api_and_every_old_path_works():
    import dynnets.static.graph as graph_mod
    from dynnets.static import value as value_mod
    from dynnets.static.core import graph as core_graph

    assert issubclass(tf.Graph, core_graph.GraphIR) and tf.Graph.value_class is tf.Value
    assert issubclass(tf.Value, core_graph.Value) and issubclass(tf.Variable, tf.Value)
    for name in ("Graph", "Value", "Variable", "Operation", "GraphKeys", "placeholder", "constant",
                 "get_default_session"):
        assert getattr(graph_mod, name) is getattr(tf, name), name
    assert graph_mod.Value is value_mod.Value and graph_mod.Operation is value_mod.Operation
    assert graph_mod.densified is core_graph.densified and graph_mod.after_p is core_graph.after_p
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [2], name="x")
        y = tf.tanh(x * 3.0)
    sub = g.subgraph()
    assert type(sub) is tf.Graph and sub.parent is g and type(sub.capture(y)) is tf.Value
    d = g.with_outputs([y])
    assert type(d) is tf.Graph and d.root is g and d.outputs == (y.id,)
    with tf.Session(graph=g) as sess:
        np.testing.assert_allclose(sess.run(y, {x: [0.1, -0.2]}), np.tanh(3.0 * np.array([0.1, -0.2])))


def test_a_bare_core_graph_makes_core_values():
    from dynnets.autograd.primitives import PRIMITIVES, Aval
    from dynnets.static.core import graph as core_graph
    from dynnets.static.core.ir import placeholder_p

    g = core_graph.GraphIR()
    av = Aval((3,), np.dtype(np.float64))
    x = g.append_equation(placeholder_p, (), {}, av, name="x")
    y = g.append_equation(PRIMITIVES["tanh"], (x.id,), {}, av)
    c = g.constant_value(2.0)
    assert type(y) is core_graph.Value and (y.name, y.shape, y.dtype) == ("tanh", (3,), np.float64)
    assert g.constant_value(2.0) is c and g.producer[y.id].ins == (x.id,)
    assert [e.prim.name for e in g.with_outputs([y]).eqns] == ["placeholder", "tanh", "constant"]


def test_an_op_named_by_its_name_scope_takes_the_scope_name_as_tf1():
    """TF1's idiom ``with tf.name_scope(name, "MyOp", [a]) as scope: ...
    return tf.add(a, b, name=scope)``: the scope ends with "/" and the op is
    named after the scope itself ("MyOp", not "MyOp/MyOp")."""
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, (2,), name="a")
        with tf.name_scope(None, "MyOp", [a]) as scope:
            h = a * 2.0
            out = tf.add(h, 1.0, name=scope)
        assert scope == "MyOp/"
        assert h.name.startswith("MyOp/")
        assert out.name == "MyOp" and out.op.name == "MyOp"
        assert g.get_tensor_by_name("MyOp:0") is out
        with tf.name_scope("outer"):
            y = tf.identity(a, name="outer/exact/")
        assert y.name == "outer/exact"
        with tf.Session() as s:
            np.testing.assert_allclose(s.run(out, {a: np.array([1.0, 2.0], np.float32)}), [3.0, 5.0])
