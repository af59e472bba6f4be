"""From a user's sentence to a prediction record: what ``dynnets predict`` prints
and ``dynnets serve`` answers, built in one place so that both give the same JSON.

A record (:func:`predict_sentence`) holds ``words``, ``root`` (the
sentence's class probabilities), ``pred`` (the predicted class, the argmax
of ``root``), ``pred_name`` (its name), ``gold`` (the root's label of an
SST tree, None for unlabelled input and plain text), ``nodes`` (per-node
predictions of a tree model in preorder, None for other models), ``input``,
``tree`` (how the input was read), ``brackets`` (the tree's structure
without labels) and ``unknown_words``. :func:`json_record` gives the form
``predict --json`` prints.
"""
from __future__ import annotations

__all__ = ["InputError", "read_sentence", "predict_sentence", "json_record", "bare_brackets", "is_tree_model"]


class InputError(ValueError):
    """A sentence or tree that cannot be read; the message is one line naming where and why."""


def is_tree_model(model):
    """Whether ``model`` predicts every node of a tree (the tree models)."""
    return bool(getattr(model, "is_tree", False))


def read_sentence(model, text, binarize=None, where="sentence 1"):
    """The tree of ``text`` for ``model`` (:func:`dynnets.data.text.read_tree`) and how it was read.

    Raises
    ------
    InputError
        One line: ``"<where>, column <c>: <reason>"`` for a malformed tree (a
        bad label, unbalanced brackets, a node that is not binary for a binary
        model), ``"<where>: <reason>"`` for other unreadable input.
    """
    from .data.text import read_tree
    from .data.trees import TreeParseError
    try:
        return read_tree(text, binarize=binarize, binary=getattr(model, "needs_binary", False), where=where)
    except TreeParseError as exc:
        at = f"line {exc.line}, column {exc.column}" if exc.line > 1 else f"column {exc.column}"
        hint = ": pass --binarize left or --binarize right" if exc.kind == "not_binary" else ""
        raise InputError(f"{exc.path}, {at}: {exc.reason}{hint}") from None
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None


def predict_sentence(model, text, binarize=None, where="sentence 1", blas_threads=1):
    """Read ``text`` and predict it with one forward pass.

    Returns
    -------
    (record, tree)
        The record (see the module docstring; ``nodes`` without their
        texts, linear in the sentence's size) and the tree that was predicted.
    """
    from .data.sst import class_names
    from .runs import node_predictions
    tree, how = read_sentence(model, text, binarize, where)
    labelled = how == "labelled tree"
    got = node_predictions(model, tree, model.vocab, gold=labelled, texts=False, blas_threads=blas_threads)
    p = got["root"]
    k = max(range(len(p)), key=p.__getitem__)       # np.argmax's choice: the first of equal maxima
    # the sentence's prediction at the top level, for every model (the nodes hold it only with --nodes)
    rec = {"words": got["words"], "root": p, "pred": k, "pred_name": class_names(len(p))[k],
           "gold": tree.label if labelled else None, "nodes": got["nodes"]}
    rec["input"] = text
    rec["tree"] = how
    rec["brackets"] = bare_brackets(tree)
    rec["unknown_words"] = list(dict.fromkeys(w for w in rec["words"] if w not in model.vocab))
    return rec, tree


def json_record(record, nodes=False):
    """The record as ``dynnets predict --json`` prints it: ``nodes`` None
    unless ``nodes``, each node with its words as ``text`` when given."""
    from .runs import node_text
    out = dict(record)
    if not nodes or out["nodes"] is None:
        out["nodes"] = None
    else:
        out["nodes"] = [dict(n, text=node_text(record, n)) for n in record["nodes"]]
    return out


def bare_brackets(tree):
    """The tree's bracket structure without labels: ``((it (is good)) .)`` (iterative: any depth)."""
    parts = []
    stack = [tree]
    while stack:
        n = stack.pop()
        if isinstance(n, str):
            parts.append(n)
        elif n.is_leaf:
            parts.append(n.word)
        else:
            stack.append(")")
            for k, c in enumerate(reversed(n.children)):
                stack.append(c)
                if k < len(n.children) - 1:
                    stack.append(" ")
            parts.append("(")
    return "".join(parts)
