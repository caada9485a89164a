"""Formatting tables for people (aligned, human units) and for scripts (JSON/CSV, SI units)."""
from __future__ import annotations

import csv
import io
import json
import math

import numpy as np

from .units import fmt_bytes, fmt_count, fmt_time

FORMATS = ("table", "json", "csv")

_HEAD = {"latency_s": "latency", "throughput_tok_s": "tokens/s", "weight_bytes": "weights", "kv_cache_bytes": "KV cache",
         "memory_bytes": "memory", "kv_bytes_per_token": "KV/token", "time_s": "time", "ttft_s": "TTFT",
         "decode_s": "decode", "kv_bytes_per_seq": "KV/seq", "memory_capacity": "capacity", "overhead_bytes": "overhead", "flops": "FLOPs"}


# with a layout (tp, pp, ep or replicas > 1) the memory columns are one device's, batches one replica's, and
# throughput counts every replica: the headers say so
_LAYOUT_HEAD = {"weight_bytes": "weights/device", "kv_cache_bytes": "KV cache/device", "memory_bytes": "memory/device",
                "kv_bytes_per_token": "KV/token/device", "memory_capacity": "capacity/device",
                "batch": "batch/replica", "max_batch": "max batch/replica", "max_tokens": "max tokens/replica",
                "throughput_tok_s": "tokens/s (all replicas)", "peak_running": "peak seqs/replica",
                "kv_capacity_bytes": "KV capacity/replica", "requests": "requests/replica", "tokens": "tokens/replica"}


def has_layout(table: dict) -> bool:
    """Whether any row spreads a model over more than one device (tp, pp, ep or replicas > 1)."""
    return any(_is_num(v) and float(v) > 1 for k in ("tp", "pp", "ep", "replicas") for v in table.get(k, ()))


def header(col: str, layout: bool = False) -> str:
    return (_LAYOUT_HEAD.get(col) if layout else None) or _HEAD.get(col, col)


def _human(col: str, v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, (bool, np.bool_)):
        if col == "fits":
            return "yes" if v else "NO"
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    v = float(v)
    if col == "throughput_tok_s" or col.endswith("_ratio") or col.startswith("bits"):
        return f"{v:.5g}"
    if "bytes" in col or col.startswith("memory_") and col != "memory_bandwidth" or col in ("l2_cache",):
        return fmt_bytes(v)
    if "macs" in col or col.endswith("flops") and not col.startswith("peak"):
        return fmt_count(v)
    if col.endswith("_s"):
        return fmt_time(v)
    if col in ("memory_bandwidth", "interconnect_bandwidth", "link_bandwidth", "network_bandwidth"):
        return fmt_bytes(v) + "/s"
    if col.endswith("_flops") and col.startswith("peak"):
        return fmt_count(v) + "FLOP/s"
    if col in ("flops", "bytes", "params", "published_params", "active_params", "published_active_params"):
        return fmt_count(v)
    if col == "tdp":
        return f"{v:g} W"
    if v.is_integer() and abs(v) < 1e15:
        return f"{int(v)}"
    return f"{v:.4g}"


def _json_value(v):
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if not math.isfinite(v):
            return None  # never print NaN/inf: JSON null means "not applicable"
        return int(v) if v.is_integer() and abs(v) < 2**53 else v
    return v


def rows(table: dict, columns=None) -> list[dict]:
    cols = [c for c in (columns or table) if c in table]
    n = len(next(iter(table.values()))) if table else 0
    return [{c: _json_value(table[c][i]) for c in cols} for i in range(n)]


def render(table: dict, fmt: str, columns=None, human_columns=None) -> str:
    """JSON/CSV carry the contract's `columns` and then every other field the table shows, in SI units."""
    if columns is not None and human_columns is not None:
        columns = list(columns) + [c for c in human_columns if c not in columns]
    if fmt == "json":
        return json.dumps(rows(table, columns), indent=1)
    if fmt == "csv":
        buf = io.StringIO()
        recs = rows(table, columns)
        w = csv.DictWriter(buf, fieldnames=list(recs[0]) if recs else list(columns or table), lineterminator="\n")
        w.writeheader()
        w.writerows(recs)
        return buf.getvalue().rstrip("\n")
    cols = [c for c in (human_columns or columns or table) if c in table]
    n = len(table[cols[0]]) if cols else 0
    lay = has_layout(table)
    cells = [[header(c, lay) for c in cols]] + [[_human(c, table[c][i]) for c in cols] for i in range(n)]
    return align(cells, [all(_is_num(table[c][i]) for i in range(n)) for c in cols])


def align(cells: list[list[str]], right: list[bool]) -> str:
    """Rows of text cells (the first the header) as columns two spaces apart, a rule under the header;
    right-aligned where `right` says (numbers), left otherwise."""
    widths = [max(len(r[j]) for r in cells) for j in range(len(right))]
    lines = []
    for k, r in enumerate(cells):
        lines.append("  ".join(x.rjust(w) if a else x.ljust(w) for x, w, a in zip(r, widths, right)).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_vertical(table: dict, fmt: str) -> str:
    """One record as field: value lines (for `show`)."""
    if fmt != "table":
        return render(table, fmt)
    w = max(len(k) for k in table)
    return "\n".join(f"{k.ljust(w)}  {_human(k, v[0])}" for k, v in table.items())


def _is_num(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
