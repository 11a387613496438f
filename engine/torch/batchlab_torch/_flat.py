"""Flattening call arguments into leaves and back, fast.

``torch.utils._pytree`` handles every registered container, at tens of
microseconds a call; discovery flattens the arguments of every torch call
of the user's forward, so it uses this one: tuples, lists and dicts (the
containers torch calls and module calls take), anything else a leaf. A spec
is ``None`` for a leaf, else ``(type, keys, children)``.
"""

from __future__ import annotations

from typing import Any

Spec = Any


def flatten(x: Any) -> tuple[list[Any], Spec]:
    leaves: list[Any] = []
    return leaves, _go(x, leaves)


def _go(x: Any, leaves: list[Any]) -> Spec:
    t = type(x)
    if t is tuple or t is list:
        for i in x:
            ti = type(i)
            if ti is tuple or ti is list or ti is dict:
                return (t, None, tuple([_go(i, leaves) for i in x]))
        leaves.extend(x)  # a container of leaves: the common case, flat
        return (t, None, (None,) * len(x))
    if t is dict:
        return (dict, tuple(x.keys()), tuple([_go(v, leaves) for v in x.values()]))
    leaves.append(x)
    return None


def unflatten(leaves: list[Any], spec: Spec) -> Any:
    it = iter(leaves)
    return _back(it, spec)


def _back(it: Any, spec: Spec) -> Any:
    if spec is None:
        return next(it)
    t, keys, children = spec
    vals = [_back(it, c) for c in children]
    if t is dict:
        return dict(zip(keys, vals))
    return t(vals)


def spec_key(spec: Spec) -> str:
    """A spec as text, for keys (types by name)."""
    if spec is None:
        return "*"
    t, keys, children = spec
    inner = ",".join(spec_key(c) for c in children)
    return f"{t.__name__}{list(keys) if keys else ''}({inner})"
