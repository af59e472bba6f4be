"""The shipped samples are learnable from structure and not from a bag of words.

A minimal binary Tree-LSTM (Tai et al. 2015, N-ary Tree-LSTM, eqs. 9-14) in
plain numpy, run level by level over a :class:`TreeBatch` with a hand-written
backward pass, against a bag of words (multinomial naive Bayes on word
counts). This also exercises the schedule the way a model uses it.

Sizes are kept small (H=16, 10 trees per batch) so that most matrix products
stay below OpenBLAS's threading threshold: with two BLAS threads on a loaded
two-core machine the test took 5-37 s instead of about 1 s.
"""

import numpy as np

from dynnets.data import BucketSampler, Vocabulary, load_samples, merge, tree_arrays
from dynnets.data.synthetic import constructions

D, H, C = 16, 16, 5


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def init(rng, V):
    P = {"E": rng.normal(0, 0.1, (V, D)),
         "Wx": rng.normal(0, D ** -0.5, (D, 3 * H)), "bx": np.zeros(3 * H),
         "U": rng.normal(0, (2 * H) ** -0.5, (2 * H, 5 * H)), "b": np.zeros(5 * H),
         "V": rng.normal(0, H ** -0.5, (H, C)), "bv": np.zeros(C)}
    P["b"][H:3 * H] = 1.0  # forget-gate bias
    return P


def forward(b, P):
    hs, cs, cache = np.zeros((b.n_nodes, H)), np.zeros((b.n_nodes, H)), {}
    L = b.n_leaves
    x = P["E"][b.leaf_word_ids]
    z = x @ P["Wx"] + P["bx"]
    i, o, u = _sig(z[:, :H]), _sig(z[:, H:2 * H]), np.tanh(z[:, 2 * H:])
    cs[:L] = i * u
    tc = np.tanh(cs[:L])
    hs[:L] = o * tc
    cache[0] = (x, i, o, u, tc)
    for lvl in range(1, b.n_levels):
        s, r = b.level(lvl), b.internal(lvl)
        left, right = b.left[r], b.right[r]
        X = np.concatenate([hs[left], hs[right]], axis=1)
        z = X @ P["U"] + P["b"]
        i, fl, fr, o = (_sig(z[:, k * H:(k + 1) * H]) for k in range(4))
        u = np.tanh(z[:, 4 * H:])
        cs[s] = i * u + fl * cs[left] + fr * cs[right]
        tc = np.tanh(cs[s])
        hs[s] = o * tc
        cache[lvl] = (X, i, fl, fr, o, u, tc, left, right)
    return hs, cs, hs @ P["V"] + P["bv"], cache


def loss_and_grads(b, P):
    hs, cs, logits, cache = forward(b, P)
    y, n = b.labels, b.n_nodes
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    loss = -np.log(p[np.arange(n), y]).mean()
    dlog = p
    dlog[np.arange(n), y] -= 1
    dlog /= n
    G = {"V": hs.T @ dlog, "bv": dlog.sum(0), "U": np.zeros_like(P["U"]), "b": np.zeros_like(P["b"]),
         "E": np.zeros_like(P["E"])}
    dh, dc_all = dlog @ P["V"].T, np.zeros_like(cs)
    for lvl in range(b.n_levels - 1, 0, -1):
        s = b.level(lvl)
        X, i, fl, fr, o, u, tc, left, right = cache[lvl]
        dc = dc_all[s] + dh[s] * o * (1 - tc ** 2)
        dz = np.concatenate([dc * u * i * (1 - i), dc * cs[left] * fl * (1 - fl), dc * cs[right] * fr * (1 - fr),
                             dh[s] * tc * o * (1 - o), dc * i * (1 - u ** 2)], axis=1)
        G["U"] += X.T @ dz
        G["b"] += dz.sum(0)
        dX = dz @ P["U"].T
        # Each node has one parent, so the indices of a level are distinct.
        dh[left] += dX[:, :H]
        dh[right] += dX[:, H:]
        dc_all[left] += dc * fl
        dc_all[right] += dc * fr
    L = b.n_leaves
    x, i, o, u, tc = cache[0]
    dc = dc_all[:L] + dh[:L] * o * (1 - tc ** 2)
    dz = np.concatenate([dc * u * i * (1 - i), dh[:L] * tc * o * (1 - o), dc * i * (1 - u ** 2)], axis=1)
    G["Wx"], G["bx"] = x.T @ dz, dz.sum(0)
    np.add.at(G["E"], b.leaf_word_ids, dz @ P["Wx"].T)
    return loss, G


def test_tree_lstm_gradient_on_schedule():
    data = load_samples()
    vocab = Vocabulary.from_trees(data["train"])
    rng = np.random.default_rng(1)
    P = init(rng, len(vocab))
    b = merge(tree_arrays(data["train"][:3], vocab))
    _, G = loss_and_grads(b, P)
    for k in ("U", "Wx", "V", "b"):
        for _ in range(3):
            idx = tuple(int(rng.integers(s)) for s in P[k].shape)
            old = P[k][idx]
            P[k][idx] = old + 1e-6
            lp, _ = loss_and_grads(b, P)
            P[k][idx] = old - 1e-6
            lm, _ = loss_and_grads(b, P)
            P[k][idx] = old
            assert np.isclose((lp - lm) / 2e-6, G[k][idx], rtol=1e-4, atol=1e-9), k


def test_tree_lstm_learns_bag_of_words_does_not():
    data = load_samples()
    vocab = Vocabulary.from_trees(data["train"])
    rng = np.random.default_rng(0)
    P = init(rng, len(vocab))
    arrays = tree_arrays(data["train"], vocab)
    M = {k: np.zeros_like(v) for k, v in P.items()}
    S = {k: np.zeros_like(v) for k, v in P.items()}
    step = 0
    sampler = BucketSampler([a.n_leaves for a in arrays], 10, seed=0)
    for _ in range(10):
        for batch in sampler:
            _, G = loss_and_grads(merge([arrays[i] for i in batch]), P)
            step += 1
            for k in P:  # Adam
                M[k] = 0.9 * M[k] + 0.1 * G[k]
                S[k] = 0.999 * S[k] + 0.001 * G[k] ** 2
                P[k] -= 0.01 * (M[k] / (1 - 0.9 ** step)) / (np.sqrt(S[k] / (1 - 0.999 ** step)) + 1e-8)
    test = data["test"]
    b = merge(tree_arrays(test, vocab))
    pred = forward(b, P)[2].argmax(1)[b.root_index]
    gold = b.labels[b.root_index]
    tree_acc = (pred == gold).mean()

    def counts(trees):
        X = np.zeros((len(trees), len(vocab)))
        for r, t in enumerate(trees):
            X[r] = np.bincount(vocab.ids(t.words()), minlength=len(vocab))
        return X

    # Multinomial naive Bayes with add-one smoothing.
    Xtr, ytr = counts(data["train"]), np.array([t.label for t in data["train"]])
    word_counts = np.stack([Xtr[ytr == c].sum(0) for c in range(C)]) + 1.0
    log_theta = np.log(word_counts / word_counts.sum(1, keepdims=True))
    log_prior = np.log(np.bincount(ytr, minlength=C) / len(ytr))
    bow_pred = (counts(test) @ log_theta.T + log_prior).argmax(1)
    bow_acc = (bow_pred == gold).mean()
    hard = np.array([bool(constructions(t) & {"negation", "contrast"}) for t in test])
    majority = np.bincount(ytr).max() / len(ytr)

    tree_hard = (pred[hard] == gold[hard]).mean()
    bow_hard = (bow_pred[hard] == gold[hard]).mean()
    print(f"test roots: tree-lstm {tree_acc:.3f} (negation/contrast {tree_hard:.3f}), "
          f"bag of words {bow_acc:.3f} ({bow_hard:.3f}), majority class {majority:.3f}")
    assert tree_acc > 0.75, tree_acc
    assert tree_hard > 0.65, tree_hard
    assert bow_acc < 0.5, bow_acc
    assert bow_hard < 0.4, bow_hard
    assert tree_acc > bow_acc + 0.3
    assert majority < 0.35
