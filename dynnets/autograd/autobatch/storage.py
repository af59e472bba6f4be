"""Storage: where the nodes' values are. A batched call's outputs are
*sources*, copied into this force's arena (one block per trailing shape and
dtype, sized from the plans: the allocation phase) so that an argument
reading rows of many calls is one ``take`` from one array
(``arena_gather``); a node's value is a row range of a source, a view's
value a list of such ranges (*pieces*)."""
from __future__ import annotations

import time

import numpy as np

from .. import engine as _engine
from .. import primitives as P
from ..engine import STATE as _Mode
from ..tensor import Tensor, wrap_array
from .lazy import DESCS, Call, LazyTensor, nrows, shape_of

_DATA = Tensor.__dict__["_data"]
_set_data = _DATA.__set__
_NDARRAY = np.ndarray
_object_new = object.__new__


def expand_ranges(starts, lens):
    """Row indices of consecutive ranges ``start[i] : start[i] + lens[i]``."""
    starts = np.asarray(starts, dtype=np.int64)
    lens = np.asarray(lens, dtype=np.int64)
    if lens.max() == 1:
        return starts
    total = int(lens.sum())
    offs = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    return offs + np.arange(total, dtype=np.int64)


class Storage:
    """The storage half of :class:`~.context.AutoBatch` (a mixin over its
    state: ``_sources``, ``_src_arena``, ``_arenas``, ``_caps``, ``_st``)."""

    def _source(self, t):
        """Register tensor ``t`` (at least 1-D) as a source; its index."""
        i = len(self._sources)
        self._sources.append(t)
        self._src_arena.append(None)
        return i

    def _to_arena(self, i):
        """Copy source ``i`` (a batched call's output) into this force's arena
        of its trailing shape and dtype, the source then holding the arena's
        view; done when a gather first reads it, so outputs no gather reads
        (a cell's saved gate activations) are never copied. Returns the
        source's (arena, first row), or None: a source of an earlier force,
        one that does not own its array (a view of an input), or no room."""
        e = self._src_arena[i]
        if e is not None:
            return e
        o = self._sources[i]
        if i < self._arena_first:
            return None
        d = o._data
        if d.base is not None or not d.ndim:
            return None
        key = (d.shape[1:], d.dtype)
        a = self._arenas.get(key)
        if a is None:
            cap = self._caps.get(key)
            if not cap:
                return None
            # np.empty: pages no row is written to are never touched
            a = self._arenas[key] = [np.empty((cap,) + key[0], dtype=key[1]), 0]
        r0 = a[1]
        r1 = r0 + d.shape[0]
        if r1 > a[0].shape[0]:
            return None
        v = a[0][r0:r1]
        v[...] = d
        _set_data(o, v)
        a[1] = r1
        self._st["arena_bytes"] += v.nbytes
        e = self._src_arena[i] = (a[0], r0)
        return e

    def _plan_arenas(self, nodes):
        """The allocation phase: rows per (trailing shape, dtype) that this
        force's batched calls output, from the plans' output avals (arrays are
        made when first written: a key no call fills costs nothing)."""
        cnt = {}
        for pn in nodes:
            p = pn.plan
            cnt[p] = cnt.get(p, 0) + 1
        caps = {}
        for p, c in cnt.items():
            if p.sid < 0:
                continue
            for av in (p.out if p.multi else (p.out,)):
                shp = tuple(av.shape)
                key = (shp[1:] if shp else (), np.dtype(av.dtype))
                caps[key] = caps.get(key, 0) + c * nrows(shp)
        self._caps = caps
        self._arenas = {}
        self._arena_first = len(self._sources)      # the sources of this force

    def _source_of(self, t):
        """The source index of a concrete tensor used as per-instance rows."""
        i = self._src_of.get(id(t))
        if i is None:
            src = t if t._data.ndim else _engine.bind(P.reshape_p, t, shape=(1,))
            i = self._src_of[id(t)] = self._source(src)
            self._src_of[id(src)] = i
            self._keep.append(t)        # ids stay valid while the context lives
        return i

    def _pieces(self, t):
        """The pieces of lazy tensor ``t`` (computed): a list of (source, start, stop)."""
        pn = t._pn
        c = pn.call
        k = t._k
        if type(c) is not Call:
            return pn.locs[k]
        rows = c.rows[k]
        if rows is None:
            p = pn.pos
            return [(c.srcs[k], p, p + 1)]
        a, b = rows[pn.pos]
        return [(c.srcs[k], a, b)]

    def read_value(self, t):
        """Numpy value of a computed lazy tensor (a view of its source when it is one piece)."""
        ps = self._pieces(t)
        srcs = self._sources
        if len(ps) == 1:
            s, a, b = ps[0]
            d = srcs[s]._data[a:b]
        else:
            d = np.concatenate([srcs[s]._data[a:b].reshape(-1) for s, a, b in ps])
        shape = DESCS[t._desc][0]
        if d.shape != shape:
            d = d.reshape(shape)
        return d

    def materialize(self, t):
        """An ordinary tensor of a computed lazy tensor's value, on the tape."""
        pn = t._pn
        if type(pn.call) is not Call and pn.concs is not None:
            return pn.concs[t._k]
        prev = _engine.interpreter_stack()
        _Mode.stack = tuple(i for i in prev if not getattr(i, "deferred", False))
        prev_gm = _Mode.grad_enabled
        _Mode.grad_enabled = t.requires_grad or prev_gm
        try:
            ps = self._pieces(t)
            srcs = self._sources
            if len({tuple(srcs[s].shape[1:]) for s, _, _ in ps}) > 1:
                # pieces of different row shapes (a stack of differently made values)
                x = _engine.bind(P.concat_p, *[_engine.bind(P.reshape_p, self._gather_pieces([p], None), shape=(-1,))
                                               for p in ps])
            else:
                x = self._gather_pieces(ps, None)
            shape = DESCS[t._desc][0]
            if tuple(x.shape) != shape:
                x = _engine.bind(P.reshape_p, x, shape=shape)
        finally:
            _Mode.stack = prev
            _Mode.grad_enabled = prev_gm
        return x

    def shared_arg(self, a):
        if type(a) is LazyTensor:
            return a._eager()
        return a

    def _gather_pieces(self, ps, trail):
        """One tensor holding the rows of pieces ``ps`` in order: a source
        itself, a slice of it (a view), or one gather (a copy)."""
        srcs = self._sources
        if len(ps) == 1:
            s, a, b = ps[0]
            src = srcs[s]
            if a == 0 and b == src.shape[0]:
                x = src
            else:
                x = _engine.bind(P.getitem_p, src, index=slice(a, b))
                self._st["views_passed"] += 1
            return x
        # coalesce adjacent pieces of one source
        which = []
        starts = []
        lens = []
        ls, lb = -1, -1
        for s, a, b in ps:
            if s == ls and a == lb:
                lens[-1] += b - a
            else:
                which.append(s)
                starts.append(a)
                lens.append(b - a)
            ls, lb = s, b
        if len(which) == 1:
            return self._gather_pieces([(which[0], starts[0], starts[0] + lens[0])], trail)
        # one gather (also from one source: its gradient stays row-sparse, so
        # the several gathers reading a batch output add up cheaply)
        uniq = sorted(set(which))
        local = {s: i for i, s in enumerate(uniq)}
        w = np.repeat(np.array([local[s] for s in which], dtype=np.int64), lens)
        rows = expand_ranges(starts, lens)
        x = self._gather_uniq(uniq, w, rows)
        st = self._st
        st["gathers"] += 1
        st["bytes_gathered"] += x._data.nbytes
        return x

    def gather_arg(self, items, trail):
        """The batched argument of per-instance ``items`` (lazy tensors,
        tensors, arrays), rows stacked along axis 0, trailing shape ``trail``."""
        t0 = time.perf_counter()
        if type(items[0]) is _NDARRAY and all(type(a) is _NDARRAY for a in items):
            x = items[0] if len(items) == 1 else np.concatenate([a.reshape((-1,) + trail) for a in items])
            self._st["bytes_constants"] += x.nbytes if len(items) > 1 else 0
            self._t_gather += time.perf_counter() - t0
            return x
        # the usual case first: every item one row of a batched call's output
        srcl = []
        rowl = []
        spush = srcl.append
        rpush = rowl.append
        for a in items:
            if type(a) is not LazyTensor:
                break
            pn = a._pn
            c = pn.call
            k = a._k
            if type(c) is Call:
                if c.rows[k] is not None:
                    break
                spush(c.srcs[k])
                rpush(pn.pos)
            else:
                brk = False
                for s, r0, r1 in pn.locs[k]:
                    if r1 - r0 != 1:
                        brk = True
                        break
                    spush(s)
                    rpush(r0)
                if brk:
                    srcl = None
                    break
        else:
            x = self._gather_rows(srcl, rowl, trail) if srcl else None
            if x is not None:
                self._t_gather += time.perf_counter() - t0
                return x
        ps = []
        srcs = self._sources
        for a in items:
            if type(a) is LazyTensor:
                pn = a._pn
                c = pn.call
                if type(c) is Call:
                    rows = c.rows[a._k]
                    if rows is None:
                        p = pn.pos
                        ps.append((c.srcs[a._k], p, p + 1))
                    else:
                        r = rows[pn.pos]
                        ps.append((c.srcs[a._k], r[0], r[1]))
                    continue
                loc = pn.locs[a._k]
                # a view's pieces: their rows must have the trailing shape wanted
                if all(tuple(srcs[s].shape[1:]) == trail for s, _, _ in loc):
                    ps.extend(loc)
                    continue
                a = a._eager()
                a = _engine.bind(P.reshape_p, a, shape=(-1,) + trail)
                i = self._source(a)
                ps.append((i, 0, a.shape[0]))
                continue
            if type(a) is _NDARRAY:
                a = wrap_array(a)
            i = self._source_of(a)
            src = srcs[i]
            if tuple(src.shape[1:]) != trail:
                src = _engine.bind(P.reshape_p, src, shape=(-1,) + trail)
                i = self._source(src)
            ps.append((i, 0, src.shape[0]))
        x = self._gather_pieces(ps, trail)
        self._t_gather += time.perf_counter() - t0
        return x

    def _gather_rows(self, srcl, rowl, trail):
        """Rows ``rowl[i]`` of sources ``srcl[i]``, in order: a source itself,
        a slice (a view), or one gather; None if a source's rows are not of
        shape ``trail`` (a view made of reshaped pieces)."""
        srcs = self._sources
        for s in set(srcl):
            if tuple(srcs[s].shape[1:]) != trail:
                return None
        s0 = srcl[0]
        r0 = rowl[0]
        n = len(rowl)
        if srcl.count(s0) == n and rowl[-1] - r0 == n - 1:
            rows = np.array(rowl)
            if n == 1 or (np.diff(rows) == 1).all():
                src = srcs[s0]
                if r0 == 0 and n == src.shape[0]:
                    return src
                self._st["views_passed"] += 1
                return _engine.bind(P.getitem_p, src, index=slice(r0, r0 + n))
        # source ids renumbered 0..k-1 through a lookup table (np.unique sorts: ~4x slower here)
        uniq = sorted(set(srcl))
        lut = np.empty(uniq[-1] + 1, dtype=np.int64)
        lut[uniq] = np.arange(len(uniq))
        x = self._gather_uniq(uniq, lut[np.array(srcl)], np.array(rowl, dtype=np.int64))
        st = self._st
        st["gathers"] += 1
        st["bytes_gathered"] += x._data.nbytes
        return x

    def _gather_uniq(self, uniq, which, rows):
        """``gather_rows(which, rows, *sources uniq)``; one ``take`` from the
        arena when every source lies in the same one."""
        srcs = self._sources
        ar = self._src_arena
        arena = None
        offs = []
        for s in uniq:
            e = ar[s]
            if e is None:
                e = self._to_arena(s)
            if e is None or (arena is not None and e[0] is not arena):
                break
            arena = e[0]
            offs.append(e[1])
        else:
            self._st["arena_gathers"] += 1
            return _engine.bind(P.arena_gather_p, arena, np.array(offs, dtype=np.int64), which, rows,
                                *[srcs[s] for s in uniq])
        return _engine.bind(P.gather_rows_p, which, rows, *[srcs[s] for s in uniq])

    def row_refs(self, items):
        """(sources, rows) of per-instance ``items`` when each is one row of
        a computed lazy tensor, else None."""
        srcl = []
        rowl = []
        for a in items:
            if type(a) is not LazyTensor:
                return None
            pn = a._pn
            c = pn.call
            k = a._k
            if type(c) is Call:
                r = c.rows[k]
                if r is None:
                    srcl.append(c.srcs[k])
                    rowl.append(pn.pos)
                    continue
                r0, r1 = r[pn.pos]
            else:
                loc = pn.locs[k]
                if len(loc) != 1:
                    return None
                s, r0, r1 = loc[0]
                if r1 - r0 != 1:
                    return None
                srcl.append(s)
                rowl.append(r0)
                continue
            if r1 - r0 != 1:
                return None
            srcl.append(c.srcs[k])
            rowl.append(r0)
        return srcl, rowl

    def gather_refs(self, srcl, rowl, trail):
        """Rows ``rowl[i]`` of sources ``srcl[i]`` as one tensor (see :meth:`gather_arg`)."""
        t0 = time.perf_counter()
        x = self._gather_rows(srcl, rowl, trail)
        self._t_gather += time.perf_counter() - t0
        return x

    def count_shared(self, name, n):
        """``n`` output rows of a ``name`` call computed once for several nodes."""
        d = self._st["rows_shared"]
        d[name] = d.get(name, 0) + n

    def assign_row_pieces(self, group, out, inv, lens):
        """Node ``i`` of ``group`` holds rows ``inv[sum(lens[:i]):sum(lens[:i+1])]``
        of ``out`` (a call's only output), one piece per row."""
        src = self._source(out)
        self._new_call(group)
        pos = 0
        for pn, n in zip(group, lens):
            pn.locs = [[(src, r, r + 1) for r in inv[pos:pos + n].tolist()]]
            pn.concs = None
            pn.call = True
            pos += n
        return True

    def assign_outputs(self, group, outs, rows_of):
        """Record where each node's outputs are: ``outs`` the call's output
        tensors, ``rows_of[k]`` None (one row per node) or (start, stop) per node."""
        c = _object_new(Call)
        c.srcs = [self._source(o) for o in outs]
        c.rows = rows_of
        cid = self._new_call(group)
        i = 0
        for pn in group:
            pn.call = c
            pn.pos = i
            i += 1
        return c

    def _run_view(self, pn):
        """A view node: its outputs' pieces from its inputs' (no computation)."""
        self._st["views"] += 1
        name = pn.plan.prim.name
        self._schedule.append((-1, name, (pn,)))
        args = pn.args
        if name == "reshape":
            locs = [self._pieces_of(args[0])]
        elif name in ("concat", "stack"):
            ps = []
            push = ps.append
            for a in args:
                if type(a) is LazyTensor:
                    q = a._pn
                    c = q.call
                    if type(c) is Call and c.rows[a._k] is None:
                        push((c.srcs[a._k], q.pos, q.pos + 1))     # one row of a batched call (inline: ~1000 inputs)
                        continue
                ps.extend(self._pieces_of(a))
            locs = [ps]
        else:
            x = args[0]
            rows = self._row_pieces(x)
            if name == "split_rows":
                locs = [[r] for r in rows]
            elif name == "getitem":
                idx = pn.attrs["index"]
                if type(idx) is tuple:
                    idx = idx[0]
                sel = rows[idx]
                locs = [[sel] if type(sel) is tuple else sel]
            else:        # take
                idx = args[1]
                n = len(rows)
                if idx.size and (idx.min() < -n or idx.max() >= n):
                    raise P.IndexRangeError(f"take: an index is out of range for x.shape[0]={n}")
                locs = [[rows[int(i)] for i in idx]]
        pn.locs = locs
        pn.concs = None
        pn.call = True

    def _pieces_of(self, a):
        if type(a) is LazyTensor:
            return self._pieces(a)
        if type(a) is _NDARRAY:
            a = wrap_array(a)
        i = self._source_of(a)
        return [(i, 0, self._sources[i].shape[0])]

    def _row_pieces(self, x):
        """``x``'s pieces split into one piece per row of x (whose trailing
        shape is x.shape[1:])."""
        trail = tuple(shape_of(x)[1:])
        ps = self._pieces_of(x)
        srcs = self._sources
        if not all(tuple(srcs[s].shape[1:]) == trail for s, _, _ in ps):
            e = x._eager() if type(x) is LazyTensor else x
            i = self._source(e)
            ps = [(i, 0, e.shape[0])]
        out = []
        for s, a, b in ps:
            for r in range(a, b):
                out.append((s, r, r + 1))
        return out
