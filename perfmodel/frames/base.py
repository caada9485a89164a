"""DataFrames with integer counts, the human-units view (pm.human, df.pm.human()) and the parameter texts the
public functions share."""
from __future__ import annotations

import sys as _sys

# ---------------------------------------------------------------- DataFrames, integer counts, human units
COUNT_COLUMNS = frozenset({
    "batch", "context", "prompt", "generate", "max_batch", "max_tokens", "min_devices", "layers", "params",
    "published_params", "requests", "sequences", "tokens", "slots", "gamma", "best_gamma", "tp", "pp", "ep",
    "redundant_experts",
    "replicas", "devices", "steps", "preemptions", "peak_running", "peak_sequences", "cases", "block_size",
    "samples", "seq", "heads", "kv_heads", "head_dim", "vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads",
    "d_ff", "max_context", "sliding_window", "kv_share", "step_evaluations", "bound_violations",
    "prefill_tp", "prefill_instances", "decode_tp", "decode_instances", "median_seed", "seeds"})


def _frame(table):
    """A dict-of-columns table as a DataFrame: counts as integers (nullable Int64 where a count is
    missing), the `pm` accessor registered. Columns are converted as numpy arrays and the frame is
    built once (assigning columns one by one cost most of a one-row query's time)."""
    import numpy as np
    import pandas as pd  # lazy: a CLI query never pays for pandas

    _register_accessor()
    if isinstance(table, pd.DataFrame):  # a sweep's frame: its columns (categorical text) are kept as they are
        return table
    cols = {}
    for k, v in table.items():
        a = v if isinstance(v, np.ndarray) else np.asarray(v)
        if a.dtype == object:
            if k in COUNT_COLUMNS:
                try:
                    a = pd.to_numeric(pd.Series(list(a))).to_numpy()
                except (TypeError, ValueError):
                    cols[k] = list(a)
                    continue
            else:
                cols[k] = list(a)
                continue
        if k in COUNT_COLUMNS and a.dtype.kind == "f":
            nan = np.isnan(a)
            with np.errstate(invalid="ignore"):  # inf (slots=None) is not whole
                whole = (nan | (np.mod(a, 1) == 0)).all()
            if whole:
                a = pd.array(a, dtype="Int64") if nan.any() else a.astype(np.int64)
        cols[k] = a
    return pd.DataFrame(cols)


def human(df, headers: bool = True):
    """A result shown in human units, as the CLI's tables show it: a DataFrame of strings.

    Parameters
    ----------
    df : DataFrame (or dict of columns)
        Any result of a perfmodel query, in SI units.
    headers : bool
        Rename the columns to the CLI's short headers (latency_s -> latency, throughput_tok_s ->
        tokens/s, ...); False keeps the SI column names.

    Returns
    -------
    DataFrame of str: times in s/ms/us, bytes in kB/MB/GB (1e3 steps), FLOPs with SI prefixes,
    fits as yes/NO. ``df.pm.human()`` is the same call.

    Example
    -------
    >>> pm.human(pm.decode(batch=[1, 64])).loc[1, ["latency", "KV cache"]].tolist()
    ['24.02 ms', '53.69 GB']
    """
    import pandas as pd

    from ..report import _HEAD, _human

    _register_accessor()
    if not isinstance(df, pd.DataFrame):
        df = pd.DataFrame(df)
    out = pd.DataFrame({c: [_human(str(c), v.item() if hasattr(v, "item") else v) for v in df[c].tolist()]
                        for c in df.columns}, index=df.index)
    if headers:
        out.columns = [_HEAD.get(str(c), str(c)) for c in out.columns]
    return out


_ACCESSOR = False


def _register_accessor():
    """df.pm.human(): registered on the first DataFrame perfmodel builds (or at import when pandas is loaded)."""
    global _ACCESSOR
    if _ACCESSOR:
        return
    import pandas as pd

    @pd.api.extensions.register_dataframe_accessor("pm")
    class _PerfmodelAccessor:
        """perfmodel's helpers on any DataFrame: ``df.pm.human()``."""

        def __init__(self, df):
            self._df = df

        def human(self, headers: bool = True):
            """This DataFrame in human units (perfmodel.human)."""
            return human(self._df, headers)

    _ACCESSOR = True


if "pandas" in _sys.modules:  # a notebook that has pandas already: df.pm works from the start
    _register_accessor()

# ---------------------------------------------------------------- shared parameter descriptions
_MODEL = ("a catalog name (see catalog_names('models')), a YAML path, a Hugging Face config.json path, a Model "
          "object, or several of them as a comma string or a list (rows for each)")
_HW = ("a catalog name (see catalog_names('hardware')), a YAML path, a Hardware object, or several as a comma "
       "string or a list")
_MODE = ("'roofline' (the ideal bound: datasheet peaks, no overheads), 'achievable' (an estimate of a good "
         "implementation on that device) or 'simple' (the lecture's (weights + B x KV) / bandwidth)")
_IMPL = ("implementation profile for mode='achievable': 'graphs' (default), 'compiled', 'eager', 'eager-fused' or a "
         "YAML path (list_specs('impl'))")
_FMT = "storage format: fp32, bf16, fp16, fp8, int8, int4, int4-gN, nf4, ... (formats() lists every one)"
_SETS = "spec overrides, e.g. {'n_kv_heads': 8, 'memory_bandwidth': '4 TB/s'} (the CLI's --set key=value)"
_LAYOUT = ("tensor-parallel devices, pipeline stages and expert-parallel groups per replica, and replicas (data "
           "parallel); memory is then per device and throughput counts every replica")
_REDUNDANT = ("extra expert slots R over the ep groups, copies of heavily used experts (expert-parallel load "
              "balancing: SGLang's --ep-num-redundant-experts, TensorRT-LLM's num_slots - E): (E + R) / ep experts "
              "a device, the same tokens")


# ---------------------------------------------------------------- queries
