"""Nested structures of loop variables and branch results (lists, tuples,
namedtuples, dicts; anything else is a leaf) for :mod:`.control_flow`:
flatten to leaves and build again, compare two structures, describe one in
an error message."""
from __future__ import annotations

__all__ = ["flatten", "unflatten", "flatten_like", "same_structure", "describe"]


def flatten(x, leaves):
    """Structure of ``x`` (lists, tuples, dicts; anything else is a leaf),
    appending its leaves to ``leaves``."""
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return (type(x), [flatten(v, leaves) for v in x])
    if isinstance(x, tuple):     # a namedtuple
        return (type(x), [flatten(v, leaves) for v in x], True)
    if isinstance(x, dict):
        return (dict, [(k, flatten(v, leaves)) for k, v in x.items()])
    leaves.append(x)
    return None


def unflatten(struct, it):
    if struct is None:
        return next(it)
    tp, items = struct[0], struct[1]
    if tp is dict:
        return {k: unflatten(s, it) for k, s in items}
    vals = [unflatten(s, it) for s in items]
    if len(struct) == 3:
        return tp(*vals)
    return tp(vals)


def flatten_like(struct, x, leaves):
    """The leaves of ``x`` where ``struct`` has leaves (shape invariants are
    tuples themselves, so they are split along the loop variables' structure)."""
    if struct is None:
        leaves.append(x)
        return
    tp, items = struct[0], struct[1]
    if tp is dict:
        if not isinstance(x, dict) or set(x) != {k for k, _ in items}:
            raise ValueError(f"while_loop: shape_invariants must have the structure of loop_vars, {describe(struct)}")
        for k, s in items:
            flatten_like(s, x[k], leaves)
        return
    if not isinstance(x, (list, tuple)) or len(x) != len(items):
        raise ValueError(f"while_loop: shape_invariants must have the structure of loop_vars, {describe(struct)}; "
                         f"got {x!r}")
    for s, v in zip(items, x):
        flatten_like(s, v, leaves)


def same_structure(a, b):
    """Whether two structures match (a list and a tuple count as the same, as
    in TF1's loops)."""
    if a is None or b is None:
        return a is None and b is None
    seq = (list, tuple)
    if not (a[0] is b[0] or (a[0] in seq and b[0] in seq)) or len(a[1]) != len(b[1]):
        return False
    if a[0] is dict:
        return all(ka == kb and same_structure(sa, sb) for (ka, sa), (kb, sb) in zip(a[1], b[1]))
    return all(same_structure(x, y) for x, y in zip(a[1], b[1]))


def describe(struct):
    if struct is None:
        return "x"
    tp, items = struct[0], struct[1]
    if tp is dict:
        return "{" + ", ".join(f"{k!r}: {describe(s)}" for k, s in items) + "}"
    inner = ", ".join(describe(s) for s in items)
    return f"[{inner}]" if tp is list else f"({inner}{',' if len(items) == 1 else ''})"
