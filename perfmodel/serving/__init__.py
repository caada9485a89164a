"""The serving simulator: traffic (traffic.py), KV memory managers (kvmemory.py), the iteration-level
scheduler on the engine's step cost (scheduler.py) and the query layer (api.py).

`perfmodel.serving.serve_sim(...)` and friends are re-exported here; scheduler.py's docstring
describes the policies, the timing definitions and the step-cost cache.
"""
from __future__ import annotations

from .api import (CLOSED, ECONOMICS, KV_REPORT, SUMMARY, _table, closed_loop, kv_memory, serve_runs, serve_sim, timeline)
from .kvmemory import Contiguous, Group, KVSizes, Paged, kv_sizes
from .scheduler import MANAGERS, POLICIES, PREFILL, SimResult, StepCost, TIMELINE, simulate
from .traffic import (DEFAULT_OUTPUT, DEFAULT_PROMPT, LOGNORMAL_SIGMA, TRACE_COLUMNS, Lengths, Traffic, make_traffic,
                      parse_lengths, read_trace)

__all__ = ["CLOSED", "closed_loop", "ECONOMICS", "KV_REPORT", "SUMMARY", "kv_memory", "serve_runs", "serve_sim", "timeline", "Contiguous",
           "Group", "KVSizes", "Paged", "kv_sizes", "MANAGERS", "POLICIES", "PREFILL", "SimResult", "StepCost",
           "TIMELINE", "simulate", "DEFAULT_OUTPUT", "DEFAULT_PROMPT", "LOGNORMAL_SIGMA", "TRACE_COLUMNS", "Lengths",
           "Traffic", "make_traffic", "parse_lengths", "read_trace"]
