"""A fleet plan: many capacity searches, one per row of a YAML or CSV file, answered as one table.

Each row names a model and a hardware, a layout (tp, ep, replicas) or a device count (gpus: every layout), and
optionally the workload and SLOs of perfmodel capacity (prompt_len, output_len, slo_ttft, slo_tpot, percentile),
mode, impl, price, disaggregate, slots, token_budget, requests, seeds, seed, tolerance and the dtypes; a missing
field takes capacity's default. `name` labels a row. The answer is every row of every search, with the fleet
row's index and name in front and `chosen` marking the row perfmodel.launch would deploy for it.

The work is bounded up front: the searches' estimated generated tokens are added over the fleet and held to
--max-tokens together (one row's search would pass on its own). The rows are tasks for perfmodel.workers: the
same table serially, with local workers or on a Dask cluster.
"""
from __future__ import annotations

import csv
import io
import math

from ..errors import SpecError

MAX_BYTES = 1 << 20  # 1 MiB of fleet file
MAX_ROWS = 1000
FIELDS = ("name", "model", "hardware", "gpus", "tp", "ep", "replicas", "prompt_len", "output_len", "slo_ttft", "slo_tpot",
          "percentile", "mode", "impl", "disaggregate", "price", "slots", "token_budget", "requests", "seeds", "seed",
          "tolerance", "weights_dtype", "kv_dtype", "act_dtype", "concurrency")
_WHOLE = ("gpus", "tp", "ep", "replicas", "seeds", "seed", "requests")


def read(path: str, opt: str = "FILE") -> list[dict]:
    """The rows of a fleet file: YAML (a list of mappings, or {rows: [...]}) or CSV with a header (by the suffix
    .csv); each a dict of the fields above, blank cells left out. One SpecError line for anything else."""
    from ..fileio import read_capped

    text = read_capped(path, opt, MAX_BYTES, "fleet file")
    if str(path).lower().endswith(".csv"):
        try:
            raw = list(csv.DictReader(io.StringIO(text)))
        except csv.Error as e:
            raise SpecError(path, None, f"not a CSV file: {e}") from None
        for i, r in enumerate(raw):
            if None in r:
                raise SpecError(f"{path} row {i + 1}", None, "has more cells than the header: quote a value with a "
                                                             "comma in it, e.g. \"lognormal:median=250,max=2000\"")
        rows = [{k.strip(): v.strip() for k, v in r.items() if v is not None and v.strip()} for r in raw]
    else:
        from ..yamlio import safe_yaml

        try:
            data = safe_yaml(text)
        except Exception as e:  # yaml.YAMLError and the refusals of safe_yaml
            raise SpecError(path, None, f"not YAML: {str(e).splitlines()[0]}") from None
        if isinstance(data, dict) and set(data) == {"rows"}:
            data = data["rows"]
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise SpecError(path, None, "must be a list of rows (mappings with model, hardware, ...), or {rows: [...]}")
        rows = [{str(k): v for k, v in r.items() if v is not None} for r in data]
    if not rows:
        raise SpecError(path, None, "has no rows")
    if len(rows) > MAX_ROWS:
        raise SpecError(path, None, f"has {len(rows):,} rows, over the {MAX_ROWS:,} a fleet plan takes")
    return [_check(path, i, r) for i, r in enumerate(rows)]


def _check(path, i: int, r: dict) -> dict:
    import difflib

    where = f"{path} row {i + 1}"
    for k in r:
        if k not in FIELDS:
            near = difflib.get_close_matches(k, FIELDS, 1)
            raise SpecError(where, k, "is not a fleet field" + (f" (did you mean {near[0]}?)" if near else
                                                                   f"; fields: {', '.join(FIELDS)}"))
    for k in ("model", "hardware"):
        if not str(r.get(k, "")).strip():
            raise SpecError(where, k, "is required")
    if "gpus" in r and any(k in r for k in ("tp", "ep", "replicas")):
        raise SpecError(where, "gpus", "give gpus (every layout) or tp/ep/replicas (one), not both")
    out = dict(r)
    for k in _WHOLE:
        if k in out:
            v = out[k]
            try:
                x = float(v) if not isinstance(v, bool) else math.nan
            except (TypeError, ValueError):
                x = math.nan
            if not (math.isfinite(x) and x == int(x) and x >= (0 if k == "seed" else 1)):
                raise SpecError(where, k, f"must be a whole number{' >= 0' if k == 'seed' else ' >= 1'}, got {v!r}")
            out[k] = int(x)
    if "disaggregate" in out:
        v = str(out["disaggregate"]).strip().lower()
        if v not in ("true", "false", "yes", "no", "1", "0"):
            raise SpecError(where, "disaggregate", f"must be true or false, got {out['disaggregate']!r}")
        out["disaggregate"] = v in ("true", "yes", "1")
    if "gpus" not in out and "tp" not in out:
        out["tp"] = 1
    return out


def _kwargs(r: dict) -> dict:
    from .slo import BUDGET, DEFAULT_OUTPUT, DEFAULT_PROMPT, SLOTS

    k = {"model": r["model"], "hardware": r["hardware"], "gpus": r.get("gpus"), "tp": r.get("tp"), "pp": 1,
         "ep": r.get("ep", 1), "replicas": r.get("replicas", 1), "prompt_len": r.get("prompt_len", DEFAULT_PROMPT),
         "output_len": r.get("output_len", DEFAULT_OUTPUT), "slo_ttft": r.get("slo_ttft", "1s"),
         "slo_tpot": r.get("slo_tpot", "50ms"), "percentile": r.get("percentile", 99),
         "mode": r.get("mode", "roofline"), "impl": r.get("impl"), "disaggregate": r.get("disaggregate", False),
         "price": r.get("price"), "slots": r.get("slots", SLOTS), "token_budget": r.get("token_budget", BUDGET),
         "requests": r.get("requests"), "seeds": r.get("seeds", 3), "seed": r.get("seed", 0),
         "tolerance": r.get("tolerance", 0.05), "block_size": 16, "cost_quantum": 16,
         "weights_dtype": r.get("weights_dtype", "bf16"), "kv_dtype": r.get("kv_dtype"),
         "act_dtype": r.get("act_dtype", "bf16"), "sets": None, "max_tokens": 10 ** 15,
         "concurrency": r.get("concurrency")}
    if k["token_budget"] is not None and str(k["token_budget"]).strip().lower() == "none":
        k["token_budget"] = None
    return k


def _search(args: tuple):
    """One fleet row's capacity search (a task for perfmodel.workers), itself serial."""
    i, r, estimate = args
    from . import capacity as cap

    try:
        return cap.run(**_kwargs(r), workers=1, estimate_only=estimate)
    except SpecError as e:  # the row's own bad value, named with its row
        where = f"row {i + 1} ({r.get('name') or r['model'] + ' on ' + str(r['hardware'])})"
        raise SpecError(where, e.field, f"{e.where}: {e.problem}" if e.field is None else e.problem) from None


def plan(path, workers=None, cluster=None, max_tokens=None, show=False):
    """The fleet file's searches as one table (dict of columns) and per fleet row its capacity summary."""
    import numpy as np

    from .. import launch, workers as wk
    from . import capacity as cap

    rows = read(path)
    wk.check(workers, cluster)
    est = sum(float(e) for e in wk.run(_search, [(i, r, True) for i, r in enumerate(rows)], 1))
    cap._work(est, max_tokens)
    got = wk.run(_search, [(i, r, False) for i, r in enumerate(rows)], workers, cluster, "fleet: rows", show)
    cols: dict = {"fleet_row": [], "name": [], "prompt_len": [], "output_len": [], "slo_ttft_s": [], "slo_tpot_s": [],
                  "chosen": []}
    table: dict = {}
    summaries = []
    for i, (r, (t, summary)) in enumerate(zip(rows, got)):
        n = len(t["hardware"])
        pick = launch.chosen(t)
        cols["fleet_row"] += [i] * n
        cols["name"] += [str(r.get("name", ""))] * n
        cols["prompt_len"] += [summary["prompt_len"]] * n
        cols["output_len"] += [summary["output_len"]] * n
        cols["slo_ttft_s"] += [summary["slo_ttft_s"]] * n
        cols["slo_tpot_s"] += [summary["slo_tpot_s"]] * n
        cols["chosen"] += [j == pick for j in range(n)]
        for c, v in t.items():
            table.setdefault(c, []).extend(list(v))
        summaries.append(summary)
    out = {c: np.asarray(v, dtype=object if c in ("name", "prompt_len", "output_len") else None)
           for c, v in cols.items()}
    for c, v in table.items():
        out[c] = np.asarray(v, dtype=object if c in ("model", "hardware", "mode", "serving", "binding", "search", "note")
                            else None)
    return out, summaries
