"""DyNet 2.2 reference: the benchmarks' binary Tree-LSTM written per node, as DyNet users write it.

Run as a worker process by ``bench_treelstm.py`` and
``experiments/execution_strategies.py`` through :class:`DynetWorker`: DyNet
reads its autobatch switch once, when ``dynet`` is imported
(``dynet_config.set(autobatch=1)`` first), so each setting needs a process of
its own. The parent writes the weights and trees to an ``.npz``
(:func:`export`); the worker loads them into DyNet parameters and then runs
one command per line of its standard input (``train``: one training pass over
the minibatches; ``eval``: one evaluation pass; ``loss0``: the first
minibatch's loss; ``steps K PATH``: K training minibatches from the initial
weights, then the parameters written to PATH, to compare the optimizer step),
answering each with one JSON line on its standard output, marked ``@@``
(DyNet writes its own messages there too).

The model is the one in ``dynnets.models.TreeLSTM`` (Tai et al. 2015, eqs.
9-14), parameters in DyNet's ``W x + b`` layout, i.e. dynnets' ``x @ W``
weights transposed:

* leaf: ``[i, o, u] = W_leaf x + b_leaf``, ``c = σ(i) ⊙ tanh(u)``, ``h = σ(o) ⊙ tanh(c)``;
* internal node: ``[i, f_l, f_r, o, u] = U [h_l; h_r] + b``,
  ``c = σ(i) ⊙ tanh(u) + σ(f_l) ⊙ c_l + σ(f_r) ⊙ c_r``, ``h = σ(o) ⊙ tanh(c)``;
* every node classified, ``softmax(W_out h + b_out)``; a minibatch's loss is
  the sum of its nodes' negative log-likelihoods divided by its trees.

One computation graph per minibatch (``dy.renew_cg()``). Training: forward,
``backward()``, ``AdagradTrainer.update()``. Evaluation: the root
distributions of a batch's trees, concatenated and read once, so that with
autobatching the whole batch is one forward.

DyNet's Adagrad is ``g2 += g^2; p -= lr g / sqrt(g2 + eps)`` (eps 1e-20),
dynnets' (and PyTorch's) ``p -= lr g / (sqrt(g2) + eps)`` (eps 1e-10): the
same step wherever ``g2`` is not tiny. DyNet clips the global gradient norm to
5 by default; the worker turns that off (``set_clip_threshold(0)``) because
dynnets' benchmark does not clip. Lookup parameters get sparse updates (only
the looked-up rows), as dynnets' row-sparse embedding gradient does.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

__all__ = ["export", "DynetWorker", "MODEL_SOURCE"]


def export(path, weights, examples, batch_size, eval_batch, lr):
    """Write what the worker needs to ``path`` (an ``.npz``).

    Parameters
    ----------
    weights : dict name -> ndarray
        dynnets' ``TreeLSTM.state_dict()`` (``embedding.weight``, ``w_leaf``,
        ``b_leaf``, ``U``, ``b``, ``out.weight``, ``out.bias``).
    examples : list of dynnets TreeExample
        The trees, in minibatch order.
    """
    left, right, word, label, ptr = [], [], [], [], [0]
    for e in examples:
        a = e.arrays
        for i, kids in enumerate(e.children):
            left.append(kids[0] if kids else -1)
            right.append(kids[1] if kids else -1)
            word.append(int(a.word_ids[i]) if not kids else -1)
            label.append(int(a.labels[i]))
        ptr.append(len(left))
    arrays = {f"w/{k}": np.ascontiguousarray(v) for k, v in weights.items()}
    arrays.update(left=np.asarray(left, np.int64), right=np.asarray(right, np.int64),
                  word=np.asarray(word, np.int64), label=np.asarray(label, np.int64), ptr=np.asarray(ptr, np.int64),
                  batch_size=np.int64(batch_size), eval_batch=np.int64(eval_batch), lr=np.float64(lr))
    np.savez(path, **arrays)


class DynetWorker:
    """A DyNet worker process (this file run as a script) and its command pipe.

    Parameters
    ----------
    npz : path from :func:`export`
    autobatch : int
        DyNet's ``autobatch`` setting (1: on, 0: off).
    threads : int or None
        ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``/``MKL_NUM_THREADS`` of the
        worker; None leaves the environment's.
    """

    def __init__(self, npz, autobatch, threads=None, seed=0, mem=1024):
        env = dict(os.environ)
        if threads:
            for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                env[k] = str(threads)
        self.autobatch = int(autobatch)
        self.history = []
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), str(npz), "--autobatch", str(self.autobatch),
             "--seed", str(seed), "--mem", str(mem)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, bufsize=1)
        self.info = self._read()

    def _read(self):
        lines = []
        for line in self.proc.stdout:
            if line.startswith("@@ "):
                out = json.loads(line[3:])
                if "error" in out:
                    raise RuntimeError(f"DyNet worker (autobatch {self.autobatch}): {out['error']}")
                return out
            lines.append(line)
        raise RuntimeError(f"DyNet worker (autobatch {self.autobatch}) exited with {self.proc.wait()}: "
                           + "".join(lines[-20:]))

    def call(self, command):
        """Send one command line; return its JSON answer (a dict)."""
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        out = self._read()
        self.history.append((command.split()[0], out))
        return out

    def runner(self, command):
        """A zero-argument callable running ``command`` (for ``interleaved``)."""
        return lambda: self.call(command)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            self.proc.wait(timeout=30)


# --------------------------------------------------------------------------
# the worker
# --------------------------------------------------------------------------

MODEL_SOURCE = "DyTreeLSTM"


def _model_class(dy):
    class DyTreeLSTM:
        """The Tree-LSTM as DyNet users write it: per node, one graph per minibatch."""

        def __init__(self, pc, w):
            self.H = w["U"].shape[0] // 2
            self.E = pc.lookup_parameters_from_numpy(w["embedding.weight"])
            self.W_leaf = pc.parameters_from_numpy(w["w_leaf"].T.copy())
            self.b_leaf = pc.parameters_from_numpy(w["b_leaf"])
            self.U = pc.parameters_from_numpy(w["U"].T.copy())
            self.b = pc.parameters_from_numpy(w["b"])
            self.W_out = pc.parameters_from_numpy(w["out.weight"])
            self.b_out = pc.parameters_from_numpy(w["out.bias"])

        def node_states(self, left, right, word):
            H = self.H
            hs, cs = [], []
            for l, r, x in zip(left, right, word):
                if l < 0:
                    z = dy.affine_transform([self.b_leaf, self.W_leaf, self.E[x]])
                    i, o = dy.logistic(dy.pick_range(z, 0, H)), dy.logistic(dy.pick_range(z, H, 2 * H))
                    c = dy.cmult(i, dy.tanh(dy.pick_range(z, 2 * H, 3 * H)))
                else:
                    z = dy.affine_transform([self.b, self.U, dy.concatenate([hs[l], hs[r]])])
                    g = dy.logistic(dy.pick_range(z, 0, 4 * H))
                    i, fl, fr, o = (dy.pick_range(g, k * H, (k + 1) * H) for k in range(4))
                    c = (dy.cmult(i, dy.tanh(dy.pick_range(z, 4 * H, 5 * H))) + dy.cmult(fl, cs[l])
                         + dy.cmult(fr, cs[r]))
                hs.append(dy.cmult(o, dy.tanh(c)))
                cs.append(c)
            return hs

        def loss(self, trees):
            losses = []
            for left, right, word, labels in trees:
                for h, y in zip(self.node_states(left, right, word), labels):
                    losses.append(dy.pickneglogsoftmax(dy.affine_transform([self.b_out, self.W_out, h]), y))
            return dy.esum(losses) * (1.0 / len(trees))

        def root_probs(self, trees):
            roots = [self.node_states(left, right, word)[-1] for left, right, word, _ in trees]
            return dy.concatenate_cols([dy.softmax(dy.affine_transform([self.b_out, self.W_out, h])) for h in roots])

    return DyTreeLSTM


def _dist_version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dyNET38")
    except PackageNotFoundError:
        return "unknown"


def _worker(argv):
    import argparse
    import time

    ap = argparse.ArgumentParser(description="DyNet Tree-LSTM worker (see the module docstring)")
    ap.add_argument("npz")
    ap.add_argument("--autobatch", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mem", type=int, default=1024)
    args = ap.parse_args(argv)

    def say(obj):
        sys.stdout.write("@@ " + json.dumps(obj) + "\n")
        sys.stdout.flush()

    try:
        import dynet_config
        dynet_config.set(mem=args.mem, random_seed=args.seed + 1, autobatch=args.autobatch)
        import dynet as dy
    except Exception as exc:     # reported to the parent, which raises
        say({"error": f"cannot import dynet: {type(exc).__name__}: {exc}"})
        return 1
    d = np.load(args.npz)
    w = {k[2:]: d[k] for k in d.files if k.startswith("w/")}
    ptr = d["ptr"].tolist()
    cols = [d[k].tolist() for k in ("left", "right", "word", "label")]
    trees = [tuple(c[ptr[t]:ptr[t + 1]] for c in cols) for t in range(len(ptr) - 1)]
    B, EB, lr = int(d["batch_size"]), int(d["eval_batch"]), float(d["lr"])
    train_batches = [trees[i:i + B] for i in range(0, len(trees), B)]
    eval_batches = [trees[i:i + EB] for i in range(0, len(trees), EB)]
    DyTreeLSTM = _model_class(dy)

    def fresh():
        pc = dy.ParameterCollection()
        model = DyTreeLSTM(pc, w)
        trainer = dy.AdagradTrainer(pc, learning_rate=lr)
        trainer.set_clip_threshold(0)
        return pc, model, trainer

    pc, model, trainer = fresh()
    dy.renew_cg()
    loss0 = model.loss(train_batches[0]).value()
    say({"ready": True, "autobatch": args.autobatch, "loss0": loss0, "version": _dist_version(),
         "clip_threshold": trainer.get_clip_threshold(),
         "threads_env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}})
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            out = {}
            if cmd[0] == "train":
                for batch in train_batches:
                    dy.renew_cg()
                    loss = model.loss(batch)
                    loss.value()
                    loss.backward()
                    trainer.update()
            elif cmd[0] == "eval":
                for batch in eval_batches:
                    dy.renew_cg()
                    model.root_probs(batch).npvalue()
            elif cmd[0] == "loss0":
                dy.renew_cg()
                out["loss"] = model.loss(train_batches[0]).value()
            elif cmd[0] == "steps":
                k, path = int(cmd[1]), cmd[2]
                p2, m2, t2 = fresh()
                losses = []
                for batch in train_batches[:k]:
                    dy.renew_cg()
                    loss = m2.loss(batch)
                    losses.append(loss.value())
                    loss.backward()
                    t2.update()
                np.savez(path, **{"embedding.weight": m2.E.as_array(), "w_leaf": m2.W_leaf.as_array().T,
                                  "b_leaf": m2.b_leaf.as_array(), "U": m2.U.as_array().T, "b": m2.b.as_array(),
                                  "out.weight": m2.W_out.as_array(), "out.bias": m2.b_out.as_array()})
                out["losses"] = losses
            else:
                raise ValueError(f"unknown command {cmd[0]!r}")
            out.update(seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)
            say(out)
        except Exception as exc:
            say({"error": f"{type(exc).__name__}: {exc}"})
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
