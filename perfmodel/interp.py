"""Multilinear interpolation in log space over measured tables (perfmodel.kernels): a point or arrays of points on
an ascending grid, each coordinate held at the grid's edge outside it, and the grid built from a table whose rows
cover part of it (holes filled from their neighbours)."""
from __future__ import annotations

import bisect
import math

import numpy as np

_LOG_AXES: dict = {}  # id(axis) -> (axis, its logs as an array and a list): the tables' axes are fixed at load


def _log_axis(ax: np.ndarray):
    hit = _LOG_AXES.get(id(ax))
    if hit is None or hit[0] is not ax:
        if len(_LOG_AXES) > 4096:  # tables loaded again and again (tests): let the old axes go
            _LOG_AXES.clear()
        la = np.log(ax)
        hit = _LOG_AXES[id(ax)] = (ax, la, la.tolist())
    return hit[1], hit[2]


def _interp_point(axes: list[np.ndarray], vals: np.ndarray, q: list[float]) -> float:
    """_interp at one point (every coordinate a Python or numpy scalar), without numpy's per-call overhead: the
    serving simulator prices one step at a time, and the array path spent ~0.4 ms a call on small arrays."""
    lo, step, wt = [], [], []
    for ax, x in zip(axes, q):
        la = _log_axis(ax)[1]
        if len(la) == 1:
            lo.append(0)
            step.append(0)
            wt.append(0.0)
            continue
        lx = min(max(math.log(max(float(x), 1e-30)), la[0]), la[-1])
        i = min(max(bisect.bisect_right(la, lx) - 1, 0), len(la) - 2)
        lo.append(i)
        step.append(1)
        wt.append((lx - la[i]) / (la[i + 1] - la[i]))
    out = 0.0
    for corner in range(2 ** len(axes)):
        w, ix = 1.0, []
        for d in range(len(axes)):
            bit = (corner >> d) & 1
            ix.append(lo[d] + bit * step[d])
            w = w * (wt[d] if bit else 1.0 - wt[d])
        out = out + w * float(vals[tuple(ix)])
    return out


def _interp(axes: list[np.ndarray], vals: np.ndarray, q: list[np.ndarray]) -> np.ndarray:
    """Multilinear interpolation of vals (on the grid `axes`, each ascending and > 0) at points q, in log(axis),
    each coordinate held at the grid's edge outside it."""
    if all(np.ndim(x) == 0 for x in q):
        return np.float64(_interp_point(axes, vals, q))
    q = np.broadcast_arrays(*[np.asarray(x, float) for x in q])
    idx, wts = [], []
    for ax, x in zip(axes, q):
        la = _log_axis(ax)[0]
        lx = np.clip(np.log(np.maximum(x, 1e-30)), la[0], la[-1])
        if len(ax) == 1:
            idx.append((np.zeros(lx.shape, int), np.zeros(lx.shape, int)))
            wts.append(np.zeros(lx.shape))
            continue
        i = np.clip(np.searchsorted(la, lx, side="right") - 1, 0, len(ax) - 2)
        idx.append((i, i + 1))
        wts.append((lx - la[i]) / (la[i + 1] - la[i]))
    out = 0.0
    for corner in range(2 ** len(axes)):
        w, ix = 1.0, []
        for d in range(len(axes)):
            bit = (corner >> d) & 1
            ix.append(idx[d][bit])
            w = w * (wts[d] if bit else 1.0 - wts[d])
        out = out + w * vals[tuple(ix)]
    return out


def _grid(df, axes: list[str], value: np.ndarray):
    """(axes arrays, values cube) of a table whose rows cover some of the grid; holes are filled from their
    neighbours (mean of the filled ones, repeated), so every cell holds a measured-neighbourhood value."""
    ax = [np.unique(df[a].to_numpy(float)) for a in axes]
    cube = np.full([len(a) for a in ax], np.nan)
    pos = [np.searchsorted(a, df[n].to_numpy(float)) for a, n in zip(ax, axes)]
    flat = np.ravel_multi_index(pos, cube.shape)
    order = np.lexsort((value, flat))  # by cell, then by value: the median of a cell's repeats is its middle row
    f, v = flat[order], np.asarray(value, float)[order]
    starts = np.r_[0, np.nonzero(np.diff(f))[0] + 1]
    counts = np.diff(np.r_[starts, len(f)])
    lo, hi = starts + (counts - 1) // 2, starts + counts // 2
    cube.flat[f[starts]] = (v[lo] + v[hi]) / 2.0
    for _ in range(sum(cube.shape)):
        holes = np.isnan(cube)
        if not holes.any():
            break
        acc, cnt = np.zeros(cube.shape), np.zeros(cube.shape)
        for d in range(cube.ndim):
            for s in (1, -1):
                nb = np.roll(cube, s, axis=d)
                edge = [slice(None)] * cube.ndim
                edge[d] = 0 if s == 1 else -1
                nb[tuple(edge)] = np.nan
                ok = ~np.isnan(nb)
                acc[ok] += nb[ok]
                cnt[ok] += 1
        fill = holes & (cnt > 0)
        cube[fill] = acc[fill] / cnt[fill]
    return ax, cube
