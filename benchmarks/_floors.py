"""Measured floors and reference passes for the throughput benchmarks (never
imported by the library or the tests).

A *floor* is the arithmetic a model cannot avoid, on this machine's BLAS, with
nothing else: the same minibatches' matrix products (and the embedding
gather), each one ``numpy.matmul`` into a preallocated output, operands laid
out for BLAS (contiguous, transposed copies made once), the dtype of the
model, in the contenders' process (so with their BLAS thread count). Operands
are fixed buffers of small random values that no product writes (no
denormals, no NaN), so the products run at their real speed whatever the
order.

A *reference pass* adds, to the floor, one piece of the real computation at a
time (gathers and scatters, the gate kernels, the loss, the optimizer) with
the library's own Numba kernels and no framework: it shows where the time
between the floor and a contender goes.

:class:`TreeLevelReference` is the level-batched Tree-LSTM (bench_treelstm);
:class:`PackedLSTMReference` the packed LSTM classifier (bench_sequence).
"""
from __future__ import annotations

import numpy as np

__all__ = ["TreeLevelReference", "TREE_PIECES", "PackedLSTMReference", "LSTM_PIECES"]

# cumulative pieces of the level-batched Tree-LSTM reference, in order
TREE_PIECES = ("products", "gathers", "gates", "loss", "optimizer")
LSTM_PIECES = ("products", "gathers", "gates", "loss", "optimizer")


def _rand(rng, shape, dt):
    return (0.1 * rng.standard_normal(shape)).astype(dt)


def _no_product(a, b, out):
    return out


def _rows_unique(ids):
    uniq, rows = np.unique(ids, return_inverse=True)
    return uniq.astype(np.int64), rows.reshape(-1).astype(np.int64)


class TreeLevelReference:
    """Level-batched binary Tree-LSTM written by hand on preallocated buffers.

    Parameters
    ----------
    weights : dict
        ``TreeLSTM.state_dict()`` as arrays (``embedding.weight``, ``w_leaf``,
        ``b_leaf``, ``U``, ``b``, ``out.weight``, ``out.bias``); copied.
    schedules : list of TreeBatch
        The minibatches' level schedules (``collate(batch).schedule``).
    lr : float
        Adagrad learning rate of the ``optimizer`` piece.
    seed : int

    The products per minibatch, as dynnets' level mode does them (each
    distinct word's leaf once, the classifier on every node in training and
    on the roots in evaluation):

    * forward: the embedding gather of the distinct words (u, E); their leaf
      product (u, E) @ (E, 3H); per level (n_k, 2H) @ (2H, 5H); the classifier
      (N, H) @ (H, C) (training) or (n_trees, H) @ (H, C) (evaluation);
    * backward (training): the classifier's (N, C) @ (C, H) and (C, N) @ (N, H);
      per level, in reverse, (n_k, 5H) @ (5H, 2H); U's (2H, n_int) @ (n_int, 5H);
      the leaf weights' (E, u) @ (u, 3H) and the words' (u, 3H) @ (3H, E) (the
      embedding's row-sparse gradient is those rows: no arithmetic beyond them).
    """

    def __init__(self, weights, schedules, lr=0.05, seed=0):
        from dynnets.autograd import kernels as K
        from dynnets.autograd import kernels_tree as KT
        from dynnets.nn import optim_kernels as OK

        self.K, self.KT, self.OK = K, KT, OK
        w = {k: np.array(v, copy=True, order="C") for k, v in weights.items()}
        self.emb = w["embedding.weight"]
        self.dt = dt = self.emb.dtype
        self.wl, self.bl = w["w_leaf"], w["b_leaf"]
        self.U, self.b = w["U"], w["b"]
        self.wo, self.bo = w["out.weight"], w["out.bias"]          # (C, H), (C,)
        self.E, self.H3 = self.wl.shape
        self.H = H = self.H3 // 3
        self.C = C = self.wo.shape[0]
        self.lr = lr
        self.batches = []
        for s in schedules:
            uniq, rows = _rows_unique(s.leaf_word_ids)
            off = s.level_offsets.tolist()
            n0 = off[1]
            levels = [(lo, hi, lo - n0, hi - n0) for lo, hi in zip(off[1:-1], off[2:]) if hi > lo]
            self.batches.append(dict(
                uniq=uniq, rows=rows, n0=n0, N=s.n_nodes, ni=s.n_nodes - n0, nu=len(uniq), levels=levels,
                left=np.ascontiguousarray(s.left, dtype=np.int64), right=np.ascontiguousarray(s.right, dtype=np.int64),
                labels=np.ascontiguousarray(s.labels, dtype=np.int64), nt=s.n_trees,
                roots=np.ascontiguousarray(s.root_index, dtype=np.int64),
                levels_k=[(lo, hi, r0, r1, np.ascontiguousarray(s.left[r0:r1], dtype=np.int64),
                           np.ascontiguousarray(s.right[r0:r1], dtype=np.int64))
                          for lo, hi, r0, r1 in levels]))
        mu = max(b["nu"] for b in self.batches)
        mn = max(b["N"] for b in self.batches)
        mi = max(b["ni"] for b in self.batches)
        m0 = max(b["n0"] for b in self.batches)
        mt = max(b["nt"] for b in self.batches)
        rng = np.random.default_rng(seed)
        E = self.E
        # operands (random, never written by a product) and outputs
        self.Xu = _rand(rng, (mu, E), dt)
        self.Zu = _rand(rng, (mu, 3 * H), dt)
        self.dZu = _rand(rng, (mu, 3 * H), dt)
        self.dXu = np.empty((mu, E), dt)
        self.Su = _rand(rng, (mu, 2 * H), dt)
        self.actsU = np.empty((mu, 3 * H), dt)
        self.dS0 = np.empty((m0, 2 * H), dt)
        self.h = _rand(rng, (mn, H), dt)
        self.c = _rand(rng, (mn, H), dt)
        self.dh = np.empty((mn, H), dt)
        self.dc = np.empty((mn, H), dt)
        self.hcat = _rand(rng, (mi, 2 * H), dt)
        self.Z = np.empty((mi, 5 * H), dt)
        self.acts = _rand(rng, (mi, 5 * H), dt)
        self.dZ = _rand(rng, (mi, 5 * H), dt)
        self.dhcat = np.empty((mi, 2 * H), dt)
        self.logits = np.empty((mn, C), dt)
        self.dlog = _rand(rng, (mn, C), dt)
        self.hroot = _rand(rng, (mt, H), dt)
        self.dU = np.empty_like(self.U)
        self.dWl = np.empty_like(self.wl)
        self.dWo = np.empty_like(self.wo)
        # transposed copies, once (BLAS-friendly layouts)
        self.woT = np.ascontiguousarray(self.wo.T)                  # (H, C)
        self.acc = {k: np.zeros_like(v) for k, v in
                    (("emb", self.emb), ("wl", self.wl), ("bl", self.bl), ("U", self.U), ("b", self.b),
                     ("wo", self.wo), ("bo", self.bo))}
        self.scal = np.array((lr, 1e-10), dtype=dt)
        self.ar = np.arange(mn)

    # ------------------------------------------------------------------
    def products(self, phase):
        """The floor: one closure running every minibatch's matrix products
        (and the embedding gather) and nothing else."""
        return self.make(phase, ("products",))

    def make(self, phase, pieces, products=True):
        """A closure running one pass over the minibatches with ``pieces``
        (a prefix of :data:`TREE_PIECES`) of the computation; ``products=False``
        leaves the matrix products out (the rest alone, to check that the
        pieces add up). That is sound for evaluation only: in training the
        state gradients ``dh`` are started by the classifier's backward
        product and accumulated into by the levels' scatters, so without the
        products they grow batch after batch until the kernels see
        overflowing values (measured: 1.5x slower than with the products'
        fresh values)."""
        pieces = tuple(pieces)
        if pieces != TREE_PIECES[:len(pieces)]:
            raise ValueError(f"TreeLevelReference: pieces must be a prefix of {TREE_PIECES}, got {pieces}")
        train = phase == "train"
        G, T, L, O = "gathers" in pieces, "gates" in pieces, "loss" in pieces, "optimizer" in pieces
        K, KT, OK = self.K, self.KT, self.OK
        mm, take = (np.matmul if products else _no_product), np.take
        emb, wl, bl, U, b, wo, bo, woT = self.emb, self.wl, self.bl, self.U, self.b, self.wo, self.bo, self.woT
        Xu, Zu, dZu, dXu, Su, actsU, dS0 = self.Xu, self.Zu, self.dZu, self.dXu, self.Su, self.actsU, self.dS0
        h, c, dh, dc, hcat, Z, acts, dZ, dhcat = (self.h, self.c, self.dh, self.dc, self.hcat, self.Z, self.acts,
                                                  self.dZ, self.dhcat)
        logits, dlog, hroot, dU, dWl, dWo = self.logits, self.dlog, self.hroot, self.dU, self.dWl, self.dWo
        H = self.H
        acc, scal = self.acc, self.scal
        # transposed weights: a real step changes the weights, so the optimizer
        # piece refreshes these copies (charged to it); without it they are made once
        UT, wlT = np.ascontiguousarray(U.T), np.ascontiguousarray(wl.T)
        out = {}

        def one(bt):
            nu, n0, N, ni = bt["nu"], bt["n0"], bt["N"], bt["ni"]
            uniq, rows = bt["uniq"], bt["rows"]
            # ---- forward
            take(emb, uniq, axis=0, out=Xu[:nu], mode="clip")
            mm(Xu[:nu], wl, out=Zu[:nu])
            if T:
                KT.tree_lstm_leaf_node_fwd(Zu[:nu], bl, Su[:nu], actsU[:nu])
            if G:
                take(Su[:nu, :H], rows, axis=0, out=h[:n0], mode="clip")
                take(Su[:nu, H:], rows, axis=0, out=c[:n0], mode="clip")
            for lo, hi, r0, r1, lk, rk in bt["levels_k"]:
                if G:
                    KT.gather_pairs(h, lk, rk, hcat[r0:r1])
                mm(hcat[r0:r1], U, out=Z[r0:r1])
                if T:
                    KT.tree_lstm_levels_fwd(Z[r0:r1], b, c, lk, rk, lo, h, acts[r0:r1])
            if not train:
                nt = bt["nt"]
                if G:
                    take(h, bt["roots"], axis=0, out=hroot[:nt], mode="clip")
                z = mm(hroot[:nt], woT, out=logits[:nt])
                if L:
                    z += bo
                    z = z.astype(np.float64)
                    z -= z.max(axis=1, keepdims=True)
                    e = np.exp(z)
                    e /= e.sum(axis=1, keepdims=True)
                return
            z = mm(h[:N], woT, out=logits[:N])
            if L:
                # softmax cross-entropy, summed over nodes / n_trees, and its gradient
                z += bo
                z -= z.max(axis=1, keepdims=True)
                e = np.exp(z)
                s = e.sum(axis=1, keepdims=True)
                lab = bt["labels"]
                ar = self.ar[:N]
                out["loss"] = float((np.log(s[:, 0]) - z[ar, lab]).sum()) / bt["nt"]
                e /= s
                e[ar, lab] -= 1.0
                e *= 1.0 / bt["nt"]
                dlog[:N] = e
            # ---- backward
            mm(dlog[:N], wo, out=dh[:N])
            mm(dlog[:N].T, h[:N], out=dWo)
            if T:
                dc[:N] = 0.0
            for lo, hi, r0, r1, lk, rk in reversed(bt["levels_k"]):
                if T:
                    KT.tree_lstm_levels_bwd(dh, dc, acts[r0:r1], c, lk, rk, lo, dZ[r0:r1])
                mm(dZ[r0:r1], UT, out=dhcat[r0:r1])
                if G:
                    KT.scatter_pairs_add(dhcat[r0:r1], lk, rk, dh)
            mm(hcat[:ni].T, dZ[:ni], out=dU)
            if G:
                dS0[:n0, :H] = dh[:n0]
                dS0[:n0, H:] = dc[:n0]
                dSu = K.embedding_bwd(rows, dS0[:n0], nu)
            if T:
                KT.tree_lstm_leaf_node_bwd(dSu, actsU[:nu], Su[:nu], dZu[:nu])
            mm(Xu[:nu].T, dZu[:nu], out=dWl)
            mm(dZu[:nu], wlT, out=dXu[:nu])
            if L:
                out["db"] = dZ[:ni].sum(0)
                out["dbl"] = dZu[:nu].sum(0)
                out["dbo"] = dlog[:N].sum(0)
            if O:
                for p, a, g in ((wl, acc["wl"], dWl), (U, acc["U"], dU), (wo, acc["wo"], dWo),
                                (bl, acc["bl"], out["dbl"]), (b, acc["b"], out["db"]), (bo, acc["bo"], out["dbo"])):
                    OK.adagrad_dense(p.reshape(-1), a.reshape(-1), g.reshape(-1), scal)
                OK.adagrad_rows(emb, acc["emb"], uniq, dXu[:nu], scal)
                UT[...] = U.T
                wlT[...] = wl.T
                woT[...] = wo.T

        batches = self.batches

        def run():
            for bt in batches:
                one(bt)

        run.first = lambda: (one(batches[0]), out)[1]
        return run

    def check(self, loss, dU, dW_leaf):
        """Run the full reference (without the optimizer) on the first
        minibatch and compare its loss and the gradients of ``U`` and
        ``w_leaf`` with a contender's; raises SystemExit if they differ."""
        res = self.make("train", TREE_PIECES[:-1]).first()
        ok = (abs(res["loss"] - loss) <= 1e-4 * max(1.0, abs(loss)) and np.allclose(self.dU, dU, atol=1e-5, rtol=1e-3)
              and np.allclose(self.dWl, dW_leaf, atol=1e-5, rtol=1e-3))
        if not ok:
            raise SystemExit(f"level reference disagrees with dynnets: loss {res['loss']} vs {loss}, "
                             f"max |dU| diff {np.abs(self.dU - dU).max():.3g}, "
                             f"max |dW_leaf| diff {np.abs(self.dWl - dW_leaf).max():.3g}")
        return res["loss"]


class PackedLSTMReference:
    """The packed LSTM sentence classifier written by hand on preallocated buffers.

    Parameters
    ----------
    weights : dict
        ``SequenceClassifier(cell="lstm").state_dict()`` as arrays (PyTorch
        names and layouts: ``weight_ih_l0`` (4H, E), ``weight_hh_l0`` (4H, H),
        biases, ``out.weight`` (C, H)); copied.
    batches : list of PackedBatch
        The minibatches (``collate(...)``): packed ids, ``batch_sizes``, ``last``.
    lr : float
    seed : int

    The products per minibatch, as dynnets' packed path does them (each
    distinct word's input projection once, no product at the first step,
    whose previous state is zero):

    * forward: the embedding gather of the distinct words (u, E); the input
      projection (u, E) @ (E, 4H); per step t >= 1 (n_t, H) @ (H, 4H); the
      classifier (B, H) @ (H, C);
    * backward: the classifier's (B, C) @ (C, H) and (C, B) @ (B, H); per step,
      in reverse, (n_t, 4H) @ (4H, H); the recurrent weights' (4H, R) @ (R, H)
      over the R rows of steps >= 1; the input weights' (4H, u) @ (u, E) and
      the words' (u, 4H) @ (4H, E).
    """

    def __init__(self, weights, batches, lr=0.05, seed=0):
        from dynnets.autograd import kernels as K
        from dynnets.autograd import kernels_tree as KT
        from dynnets.nn import optim_kernels as OK

        self.K, self.KT, self.OK = K, KT, OK
        w = {k: np.array(v, copy=True, order="C") for k, v in weights.items()}
        self.emb = w["embedding.weight"]
        self.dt = dt = self.emb.dtype
        self.wih, self.whh = w["weight_ih_l0"], w["weight_hh_l0"]
        self.bih, self.bhh = w["bias_ih_l0"], w["bias_hh_l0"]
        self.wo, self.bo = w["out.weight"], w["out.bias"]
        G4, self.E = self.wih.shape
        self.H = H = G4 // 4
        self.C = C = self.wo.shape[0]
        self.batches = []
        for pb in batches:
            uniq, rows = _rows_unique(pb.ids)
            sizes = np.asarray(pb.batch_sizes).tolist()
            offs = [0]
            for s in sizes[:-1]:
                offs.append(offs[-1] + s)
            steps = [(n, o, offs[t - 1]) for t, (n, o) in enumerate(zip(sizes, offs)) if t]
            later = sizes[1:]
            prev_rows = (np.concatenate([np.arange(p, p + n) for n, o, p in steps]).astype(np.int64)
                         if steps else np.zeros(0, np.int64))
            self.batches.append(dict(uniq=uniq, rows=rows, nu=len(uniq), total=int(sum(sizes)), n0=sizes[0],
                                     steps=steps, R=int(sum(later)), prev_rows=prev_rows,
                                     last=np.ascontiguousarray(pb.last, dtype=np.int64),
                                     labels=np.ascontiguousarray(pb.labels, dtype=np.int64), B=len(pb.labels)))
        mu = max(b["nu"] for b in self.batches)
        mt = max(b["total"] for b in self.batches)
        mb = max(b["B"] for b in self.batches)
        mr = max(max(b["R"] for b in self.batches), 1)
        m0 = max(b["n0"] for b in self.batches)
        rng = np.random.default_rng(seed)
        E = self.E
        self.Xu = _rand(rng, (mu, E), dt)
        self.Gu = np.empty((mu, 4 * H), dt)
        self.dGu = _rand(rng, (mu, 4 * H), dt)
        self.dXu = np.empty((mu, E), dt)
        self.gx = _rand(rng, (mt, 4 * H), dt)
        self.pre = np.empty((mt, 4 * H), dt)
        self.h = _rand(rng, (mt, H), dt)
        self.c = _rand(rng, (mt, H), dt)
        self.acts = _rand(rng, (mt, 4 * H), dt)
        self.dh = np.empty((mt, H), dt)
        self.dc = np.empty((mt, H), dt)
        self.dg = _rand(rng, (mt, 4 * H), dt)
        self.dhbuf = np.empty((m0, H), dt)
        self.hprev = _rand(rng, (mr, H), dt)
        self.hlast = _rand(rng, (mb, H), dt)
        self.logits = np.empty((mb, C), dt)
        self.dlog = _rand(rng, (mb, C), dt)
        self.dhlast = np.empty((mb, H), dt)
        self.dWih = np.empty_like(self.wih)
        self.dWhh = np.empty_like(self.whh)
        self.dWo = np.empty_like(self.wo)
        self.acc = {k: np.zeros_like(getattr(self, k)) for k in ("emb", "wih", "whh", "bih", "bhh", "wo", "bo")}
        self.scal = np.array((lr, 1e-10), dtype=dt)

    def products(self):
        """The floor: every minibatch's matrix products (and the embedding gather) alone."""
        return self.make(("products",))

    def make(self, pieces):
        """One training pass over the minibatches with ``pieces`` (a prefix
        of :data:`LSTM_PIECES`).

        (No variant without the products here: the step loop adds each
        input projection into the recurrent product's output in place, so
        without the products that buffer grows batch after batch until the
        gate kernels see overflowing values, which time differently: measured
        10x slower.)"""
        pieces = tuple(pieces)
        if pieces != LSTM_PIECES[:len(pieces)]:
            raise ValueError(f"PackedLSTMReference: pieces must be a prefix of {LSTM_PIECES}, got {pieces}")
        G, T, L, O = "gathers" in pieces, "gates" in pieces, "loss" in pieces, "optimizer" in pieces
        K, KT, OK = self.K, self.KT, self.OK
        mm, take = np.matmul, np.take
        emb, wih, whh, bih, bhh, wo, bo = self.emb, self.wih, self.whh, self.bih, self.bhh, self.wo, self.bo
        Xu, Gu, dGu, dXu, gx, pre, h, c, acts, dh, dc, dg = (self.Xu, self.Gu, self.dGu, self.dXu, self.gx, self.pre,
                                                           self.h, self.c, self.acts, self.dh, self.dc, self.dg)
        dhbuf, hprev, hlast = self.dhbuf, self.hprev, self.hlast
        logits, dlog, dhlast = self.logits, self.dlog, self.dhlast
        dWih, dWhh, dWo = self.dWih, self.dWhh, self.dWo
        acc, scal = self.acc, self.scal
        wihT, whhT, woT = (np.ascontiguousarray(wih.T), np.ascontiguousarray(whh.T), np.ascontiguousarray(wo.T))
        out = {}

        def one(bt):
            nu, total, n0, B, R = bt["nu"], bt["total"], bt["n0"], bt["B"], bt["R"]
            uniq, rows, last, steps = bt["uniq"], bt["rows"], bt["last"], bt["steps"]
            # ---- forward
            take(emb, uniq, axis=0, out=Xu[:nu], mode="clip")
            mm(Xu[:nu], wihT, out=Gu[:nu])
            if T:
                Gu[:nu] += bih
            if G:
                take(Gu[:nu], rows, axis=0, out=gx[:total], mode="clip")
            if T:
                KT.lstm_seq_fwd(gx[:n0], bhh, c, -1, 0, h, acts)
            for n, o, p in steps:
                z = mm(h[p:p + n], whhT, out=pre[o:o + n])
                if T:
                    z += gx[o:o + n]
                    KT.lstm_seq_fwd(z, bhh, c, p, o, h, acts)
            if G:
                take(h, last, axis=0, out=hlast[:B], mode="clip")
            z = mm(hlast[:B], woT, out=logits[:B])
            if L:
                z += bo
                z -= z.max(axis=1, keepdims=True)
                e = np.exp(z)
                s = e.sum(axis=1, keepdims=True)
                lab = bt["labels"]
                ar = np.arange(B)
                out["loss"] = float((np.log(s[:, 0]) - z[ar, lab]).mean())
                e /= s
                e[ar, lab] -= 1.0
                e *= 1.0 / B
                dlog[:B] = e
            # ---- backward
            mm(dlog[:B], wo, out=dhlast[:B])
            mm(dlog[:B].T, hlast[:B], out=dWo)
            if G:
                dh[:total] = 0.0
                dh[last] = dhlast[:B]
            if T:
                dc[:total] = 0.0
            for n, o, p in reversed(steps):
                if T:
                    KT.lstm_seq_bwd(dh, dc, acts, c, p, o, n, dg)
                z = mm(dg[o:o + n], whh, out=dhbuf[:n])
                if T:
                    dh[p:p + n] += z
            if T:
                KT.lstm_seq_bwd(dh, dc, acts, c, -1, 0, n0, dg)
            if G and R:
                take(h, bt["prev_rows"], axis=0, out=hprev[:R], mode="clip")
            mm(dg[n0:total].T, hprev[:R], out=dWhh)
            if G:
                dGs = K.embedding_bwd(rows, dg[:total], nu)
            else:
                dGs = dGu[:nu]
            mm(dGs.T, Xu[:nu], out=dWih)
            mm(dGs, wih, out=dXu[:nu])
            if L:
                out["dbih"] = dGs.sum(0)
                out["dbhh"] = dg[:total].sum(0)
                out["dbo"] = dlog[:B].sum(0)
            if O:
                for p_, a, g in ((wih, acc["wih"], dWih), (whh, acc["whh"], dWhh), (wo, acc["wo"], dWo),
                                 (bih, acc["bih"], out["dbih"]), (bhh, acc["bhh"], out["dbhh"]),
                                 (bo, acc["bo"], out["dbo"])):
                    OK.adagrad_dense(p_.reshape(-1), a.reshape(-1), g.reshape(-1), scal)
                OK.adagrad_rows(emb, acc["emb"], uniq, dXu[:nu], scal)
                wihT[...] = wih.T
                whhT[...] = whh.T
                woT[...] = wo.T

        batches = self.batches

        def run():
            for bt in batches:
                one(bt)

        run.first = lambda: (one(batches[0]), out)[1]
        return run

    def check(self, loss, dW_hh, dW_ih):
        """The full reference (without the optimizer) on the first minibatch
        against a contender's loss and recurrent/input weight gradients."""
        res = self.make(LSTM_PIECES[:-1]).first()
        ok = (abs(res["loss"] - loss) <= 1e-5 * max(1.0, abs(loss))
              and np.allclose(self.dWhh, dW_hh, atol=1e-6, rtol=1e-3)
              and np.allclose(self.dWih, dW_ih, atol=1e-6, rtol=1e-3))
        if not ok:
            raise SystemExit(f"packed LSTM reference disagrees with dynnets: loss {res['loss']} vs {loss}, "
                             f"max |dW_hh| diff {np.abs(self.dWhh - dW_hh).max():.3g}, "
                             f"max |dW_ih| diff {np.abs(self.dWih - dW_ih).max():.3g}")
        return res["loss"]
