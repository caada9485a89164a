"""Grid sweeps over models x hardware x formats x batch x context, to a DataFrame or streamed to CSV or Parquet.

The grid is evaluated with array maths: each engine call broadcasts a block of batch x context; Python loops
only over model x hardware x format combinations and over blocks (about `chunk_rows` rows each), so a
stream's memory does not depend on the number of rows. Columns follow the decode JSON contract.

Speed (docs/speed.md): text columns are categoricals (one byte a row, not a Python string), the whole
DataFrame is preallocated and filled block by block (no concatenation, no block consolidation), and
files are written by pyarrow (its CSV writer formats numbers in C, about 10x pandas' to_csv). Values are
those of the point queries bit for bit (tests/test_sweep.py).
"""
from __future__ import annotations

import itertools
import re
import sys
import time
from pathlib import Path

import numpy as np

from . import engine
from .api import _names, _prec, _warn_context, specs
from .errors import SpecError
from .timemodel import impl_name
from .units import parse_count

COLUMNS = ["model", "hardware", "weights_dtype", "kv_dtype", "batch", "context", "mode", "latency_s",
           "throughput_tok_s", "weight_bytes", "kv_cache_bytes", "memory_bytes", "fits", "bound", "intensity"]
TEXT = ("model", "hardware", "weights_dtype", "kv_dtype", "mode", "bound", "impl")  # categorical columns
FLOATS = ("latency_s", "throughput_tok_s", "weight_bytes", "kv_cache_bytes", "memory_bytes", "intensity")
BOUNDS = ["compute", "memory"]
MAX_ROWS = 10_000_000  # rows per sweep unless max_rows says more: about 14 s to CSV on one core here (docs/speed.md)
_N = r"([0-9.eE+]+\s*(?:Ki|Mi|Gi|k|K|M|G)?)"  # a count, units.parse_count: 128k, 128Ki
_AXIS = re.compile(r"^\s*" + _N + r"\s*:\s*" + _N + r"\s*:\s*(x?)" + _N + r"\s*$")


def _count(a0: float, b: float, geo: bool, k: float) -> int:
    """Values in a:b:k or a:b:xk, counted before anything is allocated."""
    if geo:
        return int(np.floor(np.log(b / a0) / np.log(k) + 1e-9)) + 1
    return int(np.floor((b - a0) / k + 1e-9)) + 1


def parse_axis(text, name: str, integer: bool = True, limit: int = MAX_ROWS) -> np.ndarray:
    """'1,8,64', '1:512:x2' (geometric, times 2, up to 512) or '128:131072:128' (arithmetic, step 128).
    More than `limit` values is refused from the range syntax alone, before any array exists."""
    if not isinstance(text, str):
        a = np.atleast_1d(np.asarray(text, dtype=np.float64))
    else:
        if not text.strip():
            raise SpecError(name, None, "needs at least one value")
        from .fields import split_list

        parts, vals, n = split_list(text, name), [], 0
        for p in parts:
            m = _AXIS.match(p)
            try:
                if m:
                    a0, b, geo, k = parse_count(m.group(1)), parse_count(m.group(2)), m.group(3), parse_count(m.group(4))
                    if not (np.isfinite(a0) and np.isfinite(b) and np.isfinite(k)) or b < a0 or a0 <= 0 \
                            or (geo and k <= 1) or (not geo and k <= 0):
                        raise ValueError
                    c = _count(a0, b, bool(geo), k)
                else:
                    parse_count(p.strip())
                    c = 1
            except (ValueError, OverflowError, ZeroDivisionError):
                raise SpecError(name, None, f"cannot read {p.strip()!r}: write a list '1,8,64', a:b:xk (geometric)"
                                            " or a:b:k (arithmetic)") from None
            n += c
            if n > limit:
                raise SpecError(name, None, f"at least {n:,} values, over the limit of {limit:,} rows a sweep evaluates "
                                            "(pass --max-rows N to go past it)")
            try:
                if not m:
                    vals.append(np.array([parse_count(p.strip())]))
                elif geo:
                    vals.append(a0 * k ** np.arange(c))
                else:
                    vals.append(np.arange(a0, b + k * 1e-9, k)[:c])
            except ValueError:
                raise SpecError(name, None, f"cannot read {p.strip()!r}: write a list '1,8,64', a:b:xk (geometric)"
                                            " or a:b:k (arithmetic)") from None
        a = np.concatenate(vals)
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise SpecError(name, None, "values must be positive")
    if integer and np.any(a != np.round(a)):
        raise SpecError(name, None, "values must be whole numbers")
    if np.any(a > 2.0 ** 53):  # past it whole numbers are not exact in float64 (and int64 casts overflow)
        raise SpecError(name, None, f"values must be at most 2**53 (9.007e15), got {float(a.max()):.4g}")
    if a.size > limit:
        raise SpecError(name, None, f"{a.size:,} values, over the limit of {limit:,} rows a sweep evaluates "
                                    "(pass --max-rows N to go past it)")
    return a


class _Progress:
    """A one-line progress bar on stderr, shown once a sweep has run for more than `after` seconds."""

    def __init__(self, total: int, enabled: bool | None, after: float = 1.5):
        self.total, self.done, self.t0, self.after = total, 0, time.perf_counter(), after
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.shown = False

    def step(self, n: int):
        self.done += n
        dt = time.perf_counter() - self.t0
        if self.enabled and dt > self.after:
            f = self.done / self.total
            bar = "#" * int(30 * f)
            sys.stderr.write(f"\rsweep [{bar:<30}] {self.done:,}/{self.total:,} rows  {dt:5.1f} s")
            sys.stderr.flush()
            self.shown = True

    def close(self):
        if self.shown:
            sys.stderr.write("\n")


def _codes(n_categories: int):
    return np.int8 if n_categories < 128 else np.int16 if n_categories < 32768 else np.int32


class Grid:
    """A parsed sweep: its axes, specs and categories, with the row count known before any evaluation."""

    def __init__(self, models, hardware, batch, context, weights_dtype=("bf16",), kv_dtype=(None,),
                 act_dtype="bf16", mode="roofline", sets=None, impl=None, max_rows: int = MAX_ROWS, workers=1,
                 cluster=None):
        from .api import check_mode
        from .workers import check

        self.workers, self.cluster = check(workers, cluster)

        if int(max_rows) < 1:
            raise SpecError("--max-rows", None, f"must be at least 1, got {max_rows}")
        self.max_rows = int(max_rows)
        self.impl = check_mode(mode, impl, sets=sets)
        self.mode, self.act_dtype, self.sets = mode, act_dtype, sets
        self.B = parse_axis(batch, "--batch", limit=self.max_rows)
        self.S = parse_axis(context, "--context", limit=self.max_rows)
        self.wds = _names(weights_dtype) if isinstance(weights_dtype, str) else list(weights_dtype)
        kv_dtype = (None,) if kv_dtype is None else kv_dtype  # None: the activation format, as everywhere else
        self.kds = _names(kv_dtype) if isinstance(kv_dtype, str) else list(kv_dtype)
        for d in self.wds:  # a bad format is one line before any spec is read
            _prec(d, None, act_dtype)
        for d in self.kds:
            _prec("bf16", d, act_dtype)
        n = lambda x: len(_names(x)) if isinstance(x, str) else len(list(x))  # noqa: E731
        self.rows = self.B.size * self.S.size * n(models) * n(hardware) * len(self.wds) * len(self.kds)
        if self.rows > self.max_rows:
            raise SpecError("sweep", None, f"{self.rows:,} rows, over the limit of {self.max_rows:,} "
                                           "(pass --max-rows N, or max_rows=N, to go past it)")
        self.ms, self.hws = specs(models, hardware, sets)
        for m in self.ms:  # a context beyond max_context still computes; say so, as decode does
            _warn_context(m, self.S)
        kvs = [kd or act_dtype for kd in self.kds]
        self.categories = {"model": list(dict.fromkeys(m.name for m in self.ms)),
                           "hardware": list(dict.fromkeys(h.key for h in self.hws)),
                           "weights_dtype": list(dict.fromkeys(self.wds)), "kv_dtype": list(dict.fromkeys(kvs)),
                           "mode": [mode], "bound": BOUNDS}
        self.columns = list(COLUMNS)
        if mode == "achievable":  # the estimate depends on the implementation profile: say which
            self.categories["impl"], self.columns = [impl_name(self.impl)], COLUMNS + ["impl"]

    def blocks(self, chunk_rows: int = 1_000_000):
        """Yields (row offset, {column: array}) in row order (model, hardware, weights, KV, batch, context),
        about chunk_rows rows a block; text columns are integer codes into self.categories."""
        chunk_rows = max(1, int(chunk_rows))
        B, S, cat = self.B, self.S, self.categories
        if S.size <= chunk_rows:  # blocks of whole batch rows
            spans = [(slice(i, i + max(1, chunk_rows // S.size)), slice(None))
                     for i in range(0, B.size, max(1, chunk_rows // S.size))]
        else:  # one batch value at a time, the context axis in pieces
            spans = [(slice(i, i + 1), slice(j, j + chunk_rows)) for i in range(B.size)
                     for j in range(0, S.size, chunk_rows)]
        import uuid

        tasks, token = [], uuid.uuid4().hex
        for i, (m, hw, wd, kd) in enumerate(itertools.product(self.ms, self.hws, self.wds, self.kds)):
            const = {"model": cat["model"].index(m.name), "hardware": cat["hardware"].index(hw.key),
                     "weights_dtype": cat["weights_dtype"].index(wd),
                     "kv_dtype": cat["kv_dtype"].index(kd or self.act_dtype), "mode": 0, "impl": 0}
            const = {k: (v, _codes(len(cat[k]))) for k, v in const.items() if k in cat}
            tasks += [((token, i), m, hw, wd, kd, self.act_dtype, self.mode, self.impl, B[sb], S[ss], const)
                      for sb, ss in spans]
        row = 0
        if self.workers == 1 and self.cluster is None or len(tasks) == 1:
            if self.cluster is not None:  # one block runs here, but a scheduler named and unreachable is an error
                from .workers import probe

                probe(self.cluster)
            blocks = map(_block, tasks)  # in this process (the time model built once per spec, below)
        else:
            from . import workers

            blocks = workers.imap(_block, tasks, self.workers, self.cluster)
        for cols in blocks:
            yield row, cols
            row += cols["batch"].size


_TM: dict = {}  # the last spec's time model in this process, by (sweep token, spec index): its blocks share it


def _block(t: tuple) -> dict:
    """One block of a sweep: (model, hardware, weights, KV, act, mode, impl, batch values, context values, constant
    columns) -> its columns (a task for perfmodel.workers; the same arrays wherever it runs)."""
    key, m, hw, wd, kd, act, mode, impl, B, S, const = t  # key: (the sweep's token, the spec's index)
    prec = _prec(wd, kd, act)
    tm = _TM.get(key)
    if tm is None:
        _TM.clear()
        tm = _TM[key] = engine.time_model(mode, hw, impl)
    r = engine.evaluate(m, hw, B, S, "decode", mode, prec, tm=tm)
    n = r["latency_s"].size
    cols = {k: np.full(n, v, dtype=dt) for k, (v, dt) in const.items()}
    cols["batch"] = r["batch"].ravel().astype(np.int64)
    cols["context"] = r["context"].ravel().astype(np.int64)
    for k in FLOATS:
        cols[k] = np.ascontiguousarray(r[k]).ravel()
    cols["fits"] = np.ascontiguousarray(r["fits"]).ravel()
    cols["bound"] = (np.ascontiguousarray(r["bound"]).ravel() == "memory").astype(np.int8)
    return cols


def grid_size(models, hardware, batch, context, weights_dtype=("bf16",), kv_dtype=(None,),
              max_rows: int = 2**62) -> int:
    """Rows a sweep would produce, from the axis syntax alone."""
    if int(max_rows) < 1:
        raise SpecError("--max-rows", None, f"must be at least 1, got {max_rows}")
    n = lambda x: len(_names(x)) if isinstance(x, str) else len(list(x))  # noqa: E731
    return (parse_axis(batch, "--batch", limit=max_rows).size * parse_axis(context, "--context", limit=max_rows).size
            * n(models) * n(hardware) * n(weights_dtype) * n(kv_dtype))


def iter_chunks(models, hardware, batch, context, weights_dtype=("bf16",), kv_dtype=(None,), act_dtype="bf16",
                mode="roofline", sets=None, chunk_rows: int = 1_000_000, impl=None, max_rows: int = MAX_ROWS,
                workers=1, cluster=None):
    """Yields dicts of flat columns (text as numpy object arrays), about chunk_rows rows each."""
    g = Grid(models, hardware, batch, context, weights_dtype, kv_dtype, act_dtype, mode, sets, impl, max_rows, workers,
             cluster)
    lookup = {k: np.array(v, dtype=object) for k, v in g.categories.items()}
    for _, cols in g.blocks(chunk_rows):
        yield {k: (lookup[k][cols[k]] if k in lookup else cols[k]) for k in g.columns}


def sweep(models="llama-2-13b", hardware="h100-sxm", batch="1:512:x2", context="128:131072:x2",
          weights_dtype=("bf16",), kv_dtype=(None,), act_dtype="bf16", mode="roofline", sets=None, out=None,
          chunk_rows: int = 1_000_000, progress: bool | None = None, impl=None, max_rows: int = MAX_ROWS, workers=1,
          cluster=None):
    """The whole grid as a DataFrame (text columns categorical), or streamed to `out` (.csv or .parquet).

    With `out`, returns {"path", "rows", "seconds"}; memory stays one block whatever the row count, and the
    file appears only when complete (perfmodel.fileio): an interrupted sweep leaves any previous file as it
    was. More than max_rows rows (default 10^7, about 14 s to CSV here) is refused up front. workers, cluster: who
    evaluates the blocks (perfmodel.workers; default this process): the same rows in the same order.
    """
    if out is not None:
        path = Path(out)
        if path.suffix not in (".csv", ".parquet"):
            raise SpecError("-o", None, f"write .csv or .parquet, got {path.name!r}")
        from .fileio import check_writable

        check_writable(path, "-o")  # before any work
    if int(chunk_rows) < 1:
        raise SpecError("--chunk-rows", None, f"must be at least 1, got {chunk_rows}")
    g = Grid(models, hardware, batch, context, weights_dtype, kv_dtype, act_dtype, mode, sets, impl, max_rows, workers,
             cluster)
    bar = _Progress(g.rows, progress)
    t0 = time.perf_counter()
    try:
        if out is None:
            return _frame(g, chunk_rows, bar)
        rows = _stream(g, chunk_rows, bar, Path(out))
    finally:
        bar.close()
    return {"path": str(out), "rows": rows, "seconds": time.perf_counter() - t0}


def _frame(g: Grid, chunk_rows: int, bar: _Progress):
    """Preallocated columns filled block by block, wrapped without a copy."""
    import pandas as pd

    cat = g.categories
    dtypes = {k: _codes(len(cat[k])) for k in cat}
    dtypes.update({"batch": np.int64, "context": np.int64, "fits": np.bool_, **{k: np.float64 for k in FLOATS}})
    data = {k: np.empty(g.rows, dtype=dtypes[k]) for k in g.columns}
    for row, cols in g.blocks(chunk_rows):
        n = cols["batch"].size
        for k in g.columns:
            data[k][row:row + n] = cols[k]
        bar.step(n)
    for k in cat:
        data[k] = pd.Categorical.from_codes(data[k], cat[k], validate=False)
    return pd.DataFrame({k: data[k] for k in g.columns}, copy=False)


def _arrow(cols: dict, g: Grid, csv: bool):
    import pyarrow as pa

    arrays = []
    for k in g.columns:
        if k in g.categories:
            arrays.append(pa.DictionaryArray.from_arrays(cols[k], g._dict[k]))
        elif k == "fits" and csv:  # True/False, as every other perfmodel CSV writes them
            arrays.append(pa.DictionaryArray.from_arrays(cols[k].view(np.int8), g._dict["_fits"]))
        else:
            arrays.append(pa.array(cols[k]))
    return pa.Table.from_arrays(arrays, names=g.columns)


def _csv_bytes(table, quoting: str):
    import pyarrow as pa
    import pyarrow.csv as pcsv

    sink = pa.BufferOutputStream()
    pcsv.write_csv(table, sink, pcsv.WriteOptions(include_header=False, quoting_style=quoting, batch_size=65536))
    return sink.getvalue()


# rows a block when streaming: a few tens of MB in flight, whatever the total (a CSV block's text is ~180 B a row)
STREAM_ROWS = {"csv": 65_536, "parquet": 262_144}


def _stream(g: Grid, chunk_rows: int, bar: _Progress, path: Path) -> int:
    """Blocks are evaluated here while worker threads format them (pyarrow releases the GIL): CSV blocks
    are formatted in parallel and written in order; Parquet blocks go to one writer thread in order."""
    import os
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # a declared dependency; only a broken install lacks it
        raise SpecError("-o", None, "writing a sweep needs pyarrow (pip install pyarrow)") from None
    from .fileio import atomic_path

    csv = path.suffix == ".csv"
    g._dict = {k: pa.array(v) for k, v in g.categories.items()}
    g._dict["_fits"] = pa.array(["False", "True"])
    # unquoted text, as pandas writes it, unless a name holds a comma, a quote or a line break
    quoting = "none" if not any(set(s) & set(',"\r\n') for v in g.categories.values() for s in v) else "needed"
    workers = max(1, min(4, os.cpu_count() or 1)) if csv else 1
    rows, writer, pending = 0, None, deque()
    with atomic_path(path, "-o") as tmp, open(tmp, "wb") as f, ThreadPoolExecutor(workers) as pool:
        try:
            if csv:
                f.write((",".join(g.columns) + "\n").encode())
            for _, cols in g.blocks(min(chunk_rows, STREAM_ROWS[path.suffix[1:]])):
                table = _arrow(cols, g, csv)
                if csv:
                    pending.append((pool.submit(_csv_bytes, table, quoting), table.num_rows))
                else:
                    # dictionary pages for the text columns only: trying them on unique floats costs 2.5x the time
                    writer = writer or pq.ParquetWriter(f, table.schema, use_dictionary=list(g.categories))
                    pending.append((pool.submit(writer.write_table, table), table.num_rows))
                while len(pending) > workers:
                    rows += _drain(pending, f, bar)
            while pending:
                rows += _drain(pending, f, bar)
        except BaseException:
            for fut, _ in pending:
                fut.cancel()
            raise
        finally:
            if writer is not None:
                pool.shutdown(wait=True)
                writer.close()
    return rows


def _drain(pending, f, bar) -> int:
    fut, n = pending.popleft()
    data = fut.result()
    if data is not None:
        f.write(data)
    bar.step(n)
    return n
