"""A TF1 MLP classifier, the way TF1 course code and quick baselines were
written: placeholders, ``tf.layers.dense``, a decayed learning rate and a
Saver round trip.

Its habits: ``tf.placeholder(tf.float32, [None, n])`` and an int64 label
placeholder; ``tf.layers.dense(..., activation=tf.nn.relu, name=...)``;
``tf.nn.sparse_softmax_cross_entropy_with_logits`` under
``tf.reduce_mean``; ``global_step = tf.Variable(0, trainable=False)``;
``tf.train.exponential_decay(lr, global_step, decay_steps, decay_rate,
staircase=True)`` fed to ``GradientDescentOptimizer(...).minimize(loss,
global_step=global_step)``; accuracy as ``tf.reduce_mean(tf.cast(tf.equal(
tf.argmax(logits, 1), y), tf.float32))``; mini-batches sliced from numpy
arrays shuffled with ``np.random.permutation``; ``saver.save(sess, path)``
then, in a second ``tf.Session``, ``saver.restore`` and the test accuracy
computed again (it must equal the first session's).

``--dump_init`` writes the initial variables (TF1's names) so that the
parity test can redo the maths in torch.
"""
import argparse

import numpy as np
import tensorflow as tf


def make_data(n, n_features, n_classes, seed):
    rng = np.random.RandomState(seed)
    centers = rng.randn(n_classes, n_features) * 2.0
    y = rng.randint(0, n_classes, size=n)
    x = (centers[y] + rng.randn(n, n_features)).astype(np.float32)
    return x, y.astype(np.int64)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=240)
    p.add_argument("--features", type=int, default=5)
    p.add_argument("--classes", type=int, default=3)
    p.add_argument("--hidden", type=int, default=12)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--decay_steps", type=int, default=5)
    p.add_argument("--decay_rate", type=float, default=0.7)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", default="/tmp/tf_mlp/model.ckpt")
    p.add_argument("--init", default=None)
    p.add_argument("--dump_init", default=None)
    args = p.parse_args(argv)

    x_all, y_all = make_data(args.n, args.features, args.classes, args.seed)
    n_train = int(0.75 * args.n)
    x_train, y_train, x_test, y_test = x_all[:n_train], y_all[:n_train], x_all[n_train:], y_all[n_train:]

    tf.reset_default_graph()
    tf.set_random_seed(args.seed)
    x = tf.placeholder(tf.float32, [None, args.features], name="x")
    y = tf.placeholder(tf.int64, [None], name="y")
    h1 = tf.layers.dense(x, args.hidden, activation=tf.nn.relu, name="hidden1")
    h2 = tf.layers.dense(h1, args.hidden, activation=tf.nn.relu, name="hidden2")
    logits = tf.layers.dense(h2, args.classes, name="logits")
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    global_step = tf.Variable(0, trainable=False, name="global_step")
    learning_rate = tf.train.exponential_decay(args.lr, global_step, args.decay_steps, args.decay_rate,
                                               staircase=True)
    train_op = tf.train.GradientDescentOptimizer(learning_rate).minimize(loss, global_step=global_step)
    correct = tf.equal(tf.argmax(logits, 1), y)
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    saver = tf.train.Saver()

    rng = np.random.RandomState(args.seed)
    losses, lrs, batches = [], [], []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        if args.init:
            init = np.load(args.init)
            for v in tf.global_variables():
                name = v.name.split(":")[0]
                if name in init.files:
                    v.load(init[name], sess)
        if args.dump_init:
            np.savez(args.dump_init, **{v.name.split(":")[0]: sess.run(v) for v in tf.trainable_variables()})
        for epoch in range(args.epochs):
            perm = rng.permutation(n_train)
            for start in range(0, n_train, args.batch_size):
                idx = perm[start:start + args.batch_size]
                lr_now, loss_val, _ = sess.run([learning_rate, loss, train_op], {x: x_train[idx], y: y_train[idx]})
                losses.append(float(loss_val))
                lrs.append(float(lr_now))
                batches.append(idx.tolist())
        test_acc = sess.run(accuracy, {x: x_test, y: y_test})
        step = sess.run(global_step)
        path = saver.save(sess, args.save)

    with tf.Session() as sess:
        saver.restore(sess, path)
        restored_acc = sess.run(accuracy, {x: x_test, y: y_test})
        restored_step = sess.run(global_step)
    return {"losses": losses, "lrs": lrs, "batches": batches, "test_acc": float(test_acc), "step": int(step),
            "restored_acc": float(restored_acc), "restored_step": int(restored_step)}


if __name__ == "__main__":
    main()
