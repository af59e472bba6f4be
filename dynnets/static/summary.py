"""``tf.summary``: TF1's summaries, written as TensorBoard event files by TensorBoard's own writer.

::

    tf.summary.scalar("loss", loss)
    tf.summary.histogram("weights", w)
    merged = tf.summary.merge_all()
    writer = tf.summary.FileWriter("logs/run1", sess.graph)
    for step in range(n):
        s, _ = sess.run([merged, train_op], feed)
        writer.add_summary(s, step)
    writer.close()

As in TF1, a summary is a graph op: ``scalar``, ``histogram`` and ``merge``
return string values whose run value is a serialized ``Summary`` protocol
buffer (``bytes``), computed only when fetched; ``scalar`` and
``histogram`` add themselves to the graph's ``"summaries"`` collection,
which ``merge_all`` merges. A summary's tag is its op's full name, name
scopes included and made unique (``loss``, ``loss_1``...), as TF1's; names
with characters TF1 refuses in tags have them replaced by ``_``. A
histogram uses TF1's buckets (edges at +-1e-12 * 1.1^k, runs of empty buckets
merged) and, as TF1's, fails on NaN or infinite values naming its tag;
``merge`` fails on a tag given twice.

:class:`FileWriter` writes ``events.out.tfevents.*`` files in ``logdir``
with ``tensorboard.summary.writer.event_file_writer`` (the writer
``torch.utils.tensorboard`` uses), so ``tensorboard --logdir logs`` shows
them; ``graph=`` writes the graph's ops and their inputs for TensorBoard's
graph tab. Event files are append-only logs that TensorBoard reads while
they grow, so they are not written through :func:`dynnets.io.atomic_write`
(TensorBoard's reader skips a truncated last record).

Needs the ``tensorboard`` package (``pip install 'dynnets[tensorboard]'``),
imported when the first summary op is built or writer opened.
"""
from __future__ import annotations

import re
import time
import weakref

import numpy as np

from ..autograd.primitives import Aval, ShapeError, dtype_of, fmt_shape
from .graph import StaticPrimitive, Value, add_op, get_default_graph

__all__ = ["scalar", "histogram", "merge", "merge_all", "FileWriter", "Summary", "SUMMARIES", "histogram_proto"]

#: The collection ``scalar`` and ``histogram`` add to (TF1's ``GraphKeys.SUMMARIES``).
SUMMARIES = "summaries"

_OBJ = np.dtype(object)
_INVALID_TAG = re.compile(r"[^-/\w.]")
_TB = {}


def _tensorboard():
    """TensorBoard's protocol buffers and event writer (imported once, on first use)."""
    if not _TB:
        try:
            from tensorboard.compat.proto import event_pb2, graph_pb2, summary_pb2
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError as e:
            raise ImportError(f"tf.summary writes TensorBoard event files with the 'tensorboard' package, which is "
                              f"not installed ({e}): pip install 'dynnets[tensorboard]'") from None
        _TB.update(event_pb2=event_pb2, graph_pb2=graph_pb2, summary_pb2=summary_pb2, EventFileWriter=EventFileWriter)
    return _TB


class _Proto:
    """A protocol buffer class of TensorBoard's, resolved on first use (so
    ``tf.Summary`` exists without importing tensorboard at ``import dynnets.static``)."""

    def __init__(self, name):
        self._name = name

    def _cls(self):
        return getattr(_tensorboard()["summary_pb2"], self._name)

    def __call__(self, *args, **kwargs):
        return self._cls()(*args, **kwargs)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._cls(), name)

    def __repr__(self):
        return f"<protocol buffer class {self._name} (tensorboard.compat.proto.summary_pb2)>"


#: TF1's ``tf.Summary`` (``tf.summary.Summary``): build a summary by hand,
#: ``Summary(value=[Summary.Value(tag="acc", simple_value=0.9)])``, for ``FileWriter.add_summary``.
Summary = _Proto("Summary")


def _clean_tag(name):
    return None if name is None else _INVALID_TAG.sub("_", name).lstrip("/")


# --------------------------------------------------------------------------
# the ops
# --------------------------------------------------------------------------

def _scalar_impl(x, tag):
    pb = _tensorboard()["summary_pb2"]
    return pb.Summary(value=[pb.Summary.Value(tag=tag, simple_value=float(x))]).SerializeToString()


def _real_input(op, x):
    if dtype_of(x).kind not in "iuf":
        raise ShapeError(f"{op}: values must be a real number tensor, got dtype {dtype_of(x)}")


def _scalar_shape(x, tag):
    _real_input("summary.scalar", x)
    if tuple(x.shape) != ():
        raise ShapeError(f"summary.scalar: tensor must be a scalar (shape ()), got shape {fmt_shape(x.shape)} "
                         f"(tag {tag!r}); reduce it first, e.g. with reduce_mean")
    return Aval((), _OBJ)


scalar_summary_p = StaticPrimitive("scalar_summary", _scalar_impl, _scalar_shape)


_LIMITS = []


def _bucket_limits():
    """TF1's default histogram bucket edges (``histogram.cc``): 0, +-1e-12 * 1.1^k
    up to 1e20, and +-DBL_MAX."""
    if not _LIMITS:
        pos = []
        v = 1.0e-12
        while v < 1.0e20:
            pos.append(v)
            v *= 1.1
        pos.append(np.finfo(np.float64).max)
        _LIMITS.append(np.array([-x for x in reversed(pos)] + [0.0] + pos))
    return _LIMITS[0]


def histogram_proto(values):
    """TF1's ``HistogramProto`` of ``values`` (any shape): min, max, count,
    sum, sum of squares and TF1's buckets, each a value's bucket the first
    edge above it, runs of empty buckets merged into one (as
    ``Histogram::EncodeToProto`` without ``preserve_zero_buckets``)."""
    pb = _tensorboard()["summary_pb2"]
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    limits = _bucket_limits()
    counts = np.bincount(np.minimum(np.searchsorted(limits, v, side="right"), len(limits) - 1),
                         minlength=len(limits)).astype(np.float64)
    empty = counts <= 0
    # an empty bucket is kept only where a run of empty ones ends (its edge is the run's upper edge)
    keep = ~empty | np.append(~empty[1:], True)
    big = np.finfo(np.float64).max
    return pb.HistogramProto(min=float(v.min()) if v.size else big, max=float(v.max()) if v.size else -big,
                             num=float(v.size), sum=float(v.sum()), sum_squares=float(np.dot(v, v)),
                             bucket_limit=limits[keep].tolist(), bucket=counts[keep].tolist())


def _histogram_impl(x, tag):
    v = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        raise ValueError(f"Nan in summary histogram for: {tag}")
    pb = _tensorboard()["summary_pb2"]
    return pb.Summary(value=[pb.Summary.Value(tag=tag, histo=histogram_proto(v))]).SerializeToString()


def _histogram_shape(x, tag):
    _real_input("summary.histogram", x)
    return Aval((), _OBJ)


histogram_summary_p = StaticPrimitive("histogram_summary", _histogram_impl, _histogram_shape)


def _merge_impl(*serialized):
    pb = _tensorboard()["summary_pb2"]
    seen = set()
    for s in serialized:
        if not isinstance(s, bytes):
            raise TypeError(f"summary.merge: an input is a {type(s).__name__}, not a serialized Summary")
        for v in pb.Summary.FromString(s).value:
            if v.tag in seen:
                raise ValueError(f"Duplicate tag {v.tag} found in summary inputs")
            seen.add(v.tag)
    # a Summary is one repeated field, so the concatenation of serialized Summaries is their merge
    return b"".join(serialized)


def _merge_shape(*inputs):
    for k, a in enumerate(inputs):
        if tuple(a.shape) != () or dtype_of(a) != _OBJ:
            raise ShapeError(f"summary.merge: input {k} must be a summary (a scalar string value), got shape "
                             f"{fmt_shape(a.shape)} and dtype {dtype_of(a)}")
    return Aval((), _OBJ)


merge_summary_p = StaticPrimitive("merge_summary", _merge_impl, _merge_shape)


def _summary_op(prim, name, value, collections, family):
    _tensorboard()
    name = _clean_tag(name)
    family = _clean_tag(family)
    op_name = name if family is None else f"{family}/{name}"
    v = add_op(prim, value, tag=op_name, name=op_name)
    # the tag is the op's unique, scoped name (TF1's summary_scope), known once the op is named
    v.graph.producer[v.id].attrs["tag"] = v.name if family is None else f"{family}/{v.name}"
    for key in ([SUMMARIES] if collections is None else collections):
        v.graph.add_to_collection(key, v)
    return v


def scalar(name, tensor, collections=None, family=None):
    """A summary of scalar ``tensor`` (real, shape ()), tagged ``name``.

    Parameters
    ----------
    name : str
        The tag (under the current name scopes; made unique in the graph).
    tensor : Value
    collections : list of str, optional
        Collections to add the summary to; default ``["summaries"]``.
    family : str, optional
        A prefix of the tag (TensorBoard's tab), as TF1's.

    Returns
    -------
    Value
        Its run value is a serialized ``Summary`` (bytes).
    """
    return _summary_op(scalar_summary_p, name, tensor, collections, family)


def histogram(name, values, collections=None, family=None):
    """A histogram summary of ``values`` (real, any shape), tagged ``name``
    (see :func:`scalar` for the arguments); NaN or infinite values fail the run."""
    return _summary_op(histogram_summary_p, name, values, collections, family)


def merge(inputs, collections=None, name=None):
    """One summary holding every value of the summaries ``inputs``.

    Returns a Value whose run value is the serialized merged ``Summary``;
    a tag given twice fails the run. ``collections`` (default none) lists
    collections to add it to.
    """
    inputs = list(inputs)
    if not inputs:
        raise ValueError("summary.merge: no inputs")
    for k, x in enumerate(inputs):
        if not isinstance(x, Value):
            raise TypeError(f"summary.merge: input {k} is a {type(x).__name__}, not a summary op's value")
    _tensorboard()
    v = add_op(merge_summary_p, *inputs, name=name or "Merge/MergeSummary")
    for key in collections or ():
        v.graph.add_to_collection(key, v)
    return v


def merge_all(key=SUMMARIES, scope=None, name=None):
    """The :func:`merge` of every summary in collection ``key`` of the default
    graph (those whose name matches regular expression ``scope``, if given),
    or None when there is none, as TF1's."""
    values = get_default_graph().get_collection(key)
    if scope is not None:
        values = [v for v in values if re.match(scope, v.name)]
    if not values:
        return None
    return merge(values, name=name)


# --------------------------------------------------------------------------
# the writer
# --------------------------------------------------------------------------

def _graph_def(graph):
    """TensorBoard's ``GraphDef`` of ``graph``: one node per op (its name, its
    primitive as the op type, its inputs by name)."""
    tb = _tensorboard()
    gd = tb["graph_pb2"].GraphDef()
    producer = graph.producers()

    def ref(i):
        e = producer[i]
        return e.name if len(e.outs) == 1 else f"{e.name}:{e.outs.index(i)}"

    for e in graph.eqns:
        node = gd.node.add()
        node.name = e.name
        node.op = e.prim.name
        node.input.extend(ref(i) for i in e.ins)
    return gd


class FileWriter:
    """TF1's ``tf.summary.FileWriter``: summaries and the graph into an event file in ``logdir``.

    Parameters
    ----------
    logdir : str or path
        Created if missing; each writer starts a new ``events.out.tfevents.*`` file.
    graph : Graph, optional
        Written at once, for TensorBoard's graph tab (``sess.graph``).
    max_queue, flush_secs : int
        Events are written by a background thread: at most ``max_queue``
        wait, and they reach the file at least every ``flush_secs`` seconds,
        at :meth:`flush` and at :meth:`close` (also when the writer is garbage
        collected or the program exits).
    graph_def : None
        TF1's deprecated argument; pass ``graph=``.
    filename_suffix : str, optional
    session : None
        TF2's argument; not supported.
    """

    def __init__(self, logdir, graph=None, max_queue=10, flush_secs=120, graph_def=None, filename_suffix=None,
                 session=None):
        if graph_def is not None:
            raise TypeError("FileWriter: graph_def= is TF1's deprecated argument; pass the Graph as graph=")
        if session is not None:
            raise TypeError("FileWriter: session= (a TF2 summary writer's) is not supported; pass graph=")
        self._args = (str(logdir), int(max_queue), float(flush_secs), filename_suffix or "")
        self._open()
        if graph is not None:
            self.add_graph(graph)

    def _open(self):
        self._writer = _tensorboard()["EventFileWriter"](*self._args)
        self._closed = False
        # flush and close the file if the program forgets to (at garbage collection or exit)
        self._finalizer = weakref.finalize(self, self._writer.close)

    def _event(self, **fields):
        if self._closed:
            raise RuntimeError(f"FileWriter: the writer of {self._args[0]} is closed (reopen() it to write more)")
        return _tensorboard()["event_pb2"].Event(wall_time=time.time(), **fields)

    def add_summary(self, summary, global_step=None):
        """Add a summary: what a summary op's run returned (bytes) or a ``Summary`` protocol buffer.

        ``global_step`` (an int, or a run's integer result) is the x axis of TensorBoard's plots.
        """
        pb = _tensorboard()["summary_pb2"]
        if isinstance(summary, np.ndarray) and summary.shape == () and summary.dtype == _OBJ:
            summary = summary.item()
        if isinstance(summary, bytes):
            summary = pb.Summary.FromString(summary)
        elif not isinstance(summary, pb.Summary):
            raise TypeError(f"FileWriter.add_summary: expected the bytes of a summary op's run or a Summary, got "
                            f"{type(summary).__name__}")
        ev = self._event(summary=summary)
        if global_step is not None:
            ev.step = int(global_step)
        self._writer.add_event(ev)

    def add_event(self, event):
        """Add an ``Event`` protocol buffer as it is."""
        if self._closed:
            self._event()
        self._writer.add_event(event)

    def add_graph(self, graph, global_step=None, graph_def=None):
        """Write ``graph``'s ops for TensorBoard's graph tab."""
        ev = self._event(graph_def=_graph_def(graph).SerializeToString())
        if global_step is not None:
            ev.step = int(global_step)
        self._writer.add_event(ev)

    def get_logdir(self):
        return self._args[0]

    def flush(self):
        """Write every pending event to the file."""
        if not self._closed:
            self._writer.flush()

    def close(self):
        """Flush and close the file; :meth:`reopen` starts a new one."""
        if not self._closed:
            self._finalizer()
            self._closed = True

    def reopen(self):
        """After :meth:`close`, write on into a new event file in the same ``logdir``."""
        if self._closed:
            self._open()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
