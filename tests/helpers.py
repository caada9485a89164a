"""Small shared helpers for the tests."""
import numpy as np

from perfmodel.ops import build_ops


def phase_ops(model, B, S, phase="decode", **kw):
    return build_ops(model, B, 1.0 if phase == "decode" else S, S, phase, **kw)


def total(ops, names, field="flops"):
    """Sum of one field over all ops with these names, all layers counted."""
    return sum(np.asarray(getattr(o, field), float) * o.count for o in ops if o.name in names)


def intensity(ops, names):
    return total(ops, names, "flops") / total(ops, names, "bytes")
