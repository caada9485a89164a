"""Grid sweeps over models x hardware x formats x batch x context, streamed to CSV or Parquet.

The grid is evaluated with array maths: batch x context broadcast inside one engine call; Python
loops only over model x hardware x format combinations and over chunks of the batch axis (so
memory stays bounded for 10^7+ rows). Columns follow the decode JSON contract.
"""
from __future__ import annotations

import itertools
import re
import sys
import time
from pathlib import Path

import numpy as np

from . import engine
from .api import _names, _prec, specs
from .errors import SpecError
from .timemodel import impl_name

COLUMNS = ["model", "hardware", "weights_dtype", "kv_dtype", "batch", "context", "mode", "latency_s",
           "throughput_tok_s", "weight_bytes", "kv_cache_bytes", "memory_bytes", "fits", "bound", "intensity"]
_AXIS = re.compile(r"^\s*([0-9.eE+]+)\s*:\s*([0-9.eE+]+)\s*:\s*(x?)([0-9.eE+]+)\s*$")


def parse_axis(text, name: str, integer: bool = True) -> np.ndarray:
    """'1,8,64', '1:512:x2' (geometric, times 2, up to 512) or '128:131072:128' (arithmetic, step 128)."""
    if not isinstance(text, str):
        a = np.atleast_1d(np.asarray(text, dtype=np.float64))
    else:
        parts, vals = [p for p in text.split(",") if p.strip()], []
        if not parts:
            raise SpecError(name, None, "needs at least one value")
        for p in parts:
            m = _AXIS.match(p)
            try:
                if m:
                    a0, b, geo, k = float(m.group(1)), float(m.group(2)), m.group(3), float(m.group(4))
                    if b < a0 or a0 <= 0 or (geo and k <= 1) or (not geo and k <= 0):
                        raise ValueError
                    if geo:
                        n = int(np.floor(np.log(b / a0) / np.log(k) + 1e-9)) + 1
                        vals.append(a0 * k ** np.arange(n))
                    else:
                        vals.append(np.arange(a0, b + k * 1e-9, k))
                else:
                    vals.append(np.array([float(p)]))
            except (ValueError, OverflowError):
                raise SpecError(name, None, f"cannot read {p.strip()!r}: write a list '1,8,64', a:b:xk (geometric)"
                                            " or a:b:k (arithmetic)") from None
        a = np.concatenate(vals)
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise SpecError(name, None, "values must be positive")
    if integer and np.any(a != np.round(a)):
        raise SpecError(name, None, "values must be whole numbers")
    if a.size > 50_000_000:
        raise SpecError(name, None, f"{a.size} values on one axis is too many")
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


def iter_chunks(models, hardware, batch, context, weights_dtype=("bf16",), kv_dtype=(None,), act_dtype="bf16",
                mode="roofline", sets=None, chunk_rows: int = 1_000_000, impl=None):
    """Yields dicts of flat columns, at most about chunk_rows rows each (mode: roofline, achievable or simple)."""
    from .api import check_mode

    impl = check_mode(mode, impl, sets=sets)
    B = parse_axis(batch, "--batch")
    S = parse_axis(context, "--context")
    wds = _names(weights_dtype) if isinstance(weights_dtype, str) else list(weights_dtype)
    kds = _names(kv_dtype) if isinstance(kv_dtype, str) else list(kv_dtype)
    ms, hws = specs(models, hardware, sets)
    per = max(1, int(chunk_rows) // S.size)
    for m, hw, wd, kd in itertools.product(ms, hws, wds, kds):
        prec = _prec(wd, kd, act_dtype)
        tm = engine.time_model(mode, hw, impl)
        for i in range(0, B.size, per):
            r = engine.evaluate(m, hw, B[i:i + per], S, "decode", mode, prec, tm=tm)
            n = r["latency_s"].size
            cols = {"model": np.full(n, m.name, dtype=object), "hardware": np.full(n, hw.key, dtype=object),
                    "weights_dtype": np.full(n, wd, dtype=object),
                    "kv_dtype": np.full(n, kd or act_dtype, dtype=object),
                    "mode": np.full(n, mode, dtype=object)}
            for k in ("batch", "context", "latency_s", "throughput_tok_s", "weight_bytes", "kv_cache_bytes",
                      "memory_bytes", "fits", "bound", "intensity"):
                cols[k] = np.ascontiguousarray(r[k]).ravel()
            names = COLUMNS
            if mode == "achievable":  # the estimate depends on the implementation profile: say which
                cols["impl"], names = np.full(n, impl_name(impl), dtype=object), COLUMNS + ["impl"]
            yield {k: cols[k] for k in names}


def grid_size(models, hardware, batch, context, weights_dtype=("bf16",), kv_dtype=(None,)) -> int:
    n = lambda x: len(_names(x)) if isinstance(x, str) else len(list(x))  # noqa: E731
    return (parse_axis(batch, "--batch").size * parse_axis(context, "--context").size * n(models) * n(hardware)
            * n(weights_dtype) * n(kv_dtype))


def sweep(models="llama-2-13b", hardware="h100-sxm", batch="1:512:x2", context="128:131072:x2",
          weights_dtype=("bf16",), kv_dtype=(None,), act_dtype="bf16", mode="roofline", sets=None, out=None,
          chunk_rows: int = 1_000_000, progress: bool | None = None, impl=None):
    """The whole grid as a DataFrame, or streamed to `out` (.csv or .parquet) in chunks.

    With `out`, returns {"path", "rows", "seconds"} and never holds more than one chunk in memory.
    """
    import pandas as pd

    total = grid_size(models, hardware, batch, context, weights_dtype, kv_dtype)
    bar = _Progress(total, progress)
    chunks = iter_chunks(models, hardware, batch, context, weights_dtype, kv_dtype, act_dtype, mode, sets, chunk_rows,
                         impl)
    t0 = time.perf_counter()
    if out is None:
        frames = []
        for c in chunks:
            frames.append(pd.DataFrame(c))
            bar.step(len(c["batch"]))
        bar.close()
        return _ints(pd.concat(frames, ignore_index=True))
    path = Path(out)
    if path.suffix not in (".csv", ".parquet"):
        raise SpecError("-o", None, f"write .csv or .parquet, got {path.name!r}")
    writer, rows = None, 0
    try:
        for c in chunks:
            df = _ints(pd.DataFrame(c))
            if path.suffix == ".csv":
                df.to_csv(path, mode="w" if rows == 0 else "a", header=rows == 0, index=False)
            else:
                try:
                    import pyarrow as pa
                    import pyarrow.parquet as pq
                except ImportError:
                    raise SpecError("-o", None, "Parquet output needs pyarrow (pip install pyarrow); "
                                                "or write .csv") from None
                table = pa.Table.from_pandas(df, preserve_index=False)
                writer = writer or pq.ParquetWriter(path, table.schema)
                writer.write_table(table)
            rows += len(df)
            bar.step(len(df))
    finally:
        if writer is not None:
            writer.close()
        bar.close()
    return {"path": str(path), "rows": rows, "seconds": time.perf_counter() - t0}


def _ints(df):
    for c in ("batch", "context"):
        df[c] = df[c].astype("int64")
    return df
