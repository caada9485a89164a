"""Traffic for the serving simulator: arrivals (all at once, Poisson, or a trace CSV), prompt and
output length distributions, and samples per prompt."""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import SpecError
from ..units import parse_count

DEFAULT_PROMPT, DEFAULT_OUTPUT = "512", "lognormal:median=18,max=231"
LOGNORMAL_SIGMA = 1.0  # default spread of ln(length); `lognormal:...,sigma=S` sets it


@dataclass(frozen=True)
class Lengths:
    """A token-length distribution: fixed N, uniform on [lo, hi], or lognormal (median, cap, sigma)."""

    kind: str
    lo: int = 0
    hi: int = 0
    median: float = 0.0
    sigma: float = LOGNORMAL_SIGMA

    @property
    def max(self) -> int:
        return self.hi

    def draw(self, rng: np.random.Generator, shape) -> np.ndarray:
        if self.kind == "fixed":
            return np.full(shape, self.hi, dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(self.lo, self.hi + 1, size=shape)
        x = np.rint(np.exp(rng.normal(math.log(self.median), self.sigma, size=shape)))
        return np.clip(x, 1, self.hi).astype(np.int64)  # rounding and the cap keep the median


MAX_LENGTH = 2**31 - 1  # tokens in one prompt or output: far beyond any model's context
MAX_BUDGET = 1 << 20  # tokens per step: 16x vLLM's largest default max_num_batched_tokens (65,536)
MAX_BLOCK = 1 << 20  # tokens per KV block (engines use 16-256)


def parse_lengths(text, opt: str) -> Lengths:
    """`512`, `fixed:512`, `uniform:64,1024` (or min=,max=), `lognormal:median=18,max=231[,sigma=1]`."""
    if isinstance(text, Lengths):
        return text
    s = str(text).strip()
    kind, _, rest = s.partition(":") if ":" in s else ("fixed", "", s)
    kind = kind.strip().lower()
    named, pos = {}, []
    for part in [p.strip() for p in rest.split(",") if p.strip()]:
        k, eq, v = part.partition("=")
        if eq:
            named[k.strip().lower()] = v.strip()
        else:
            pos.append(part)

    def num(v, what, integer=True, minimum=1):
        try:
            x = parse_count(v) if integer else float(v)  # 2k, 128Ki
        except (TypeError, ValueError):
            x = float("nan")
        if not math.isfinite(x) or x < minimum or (integer and x != int(x)):
            kind_ = "a whole number" if integer else "a number"
            raise SpecError(opt, None, f"{what} must be {kind_} >= {minimum}, got {v!r} in {s!r}")
        if x > MAX_LENGTH:  # numpy's draws are int64, and no model reads more tokens than this
            raise SpecError(opt, None, f"{what} {v!r} is over the longest length taken, {MAX_LENGTH:,} tokens")
        return int(x) if integer else x

    def take(keys, n_pos):
        unknown = set(named) - set(keys)
        if unknown or len(pos) > n_pos or (pos and named):
            raise SpecError(opt, None, f"{kind} takes {', '.join(k + '=' for k in keys)} (got {s!r})")
        vals = dict(zip(keys, pos)) | named
        return vals

    if kind == "fixed":
        v = take(["n"], 1)
        if "n" not in v:
            raise SpecError(opt, None, f"expected a token count, e.g. 512, got {s!r}")
        n = num(v["n"], "the length")
        return Lengths("fixed", n, n)
    if kind == "uniform":
        v = take(["min", "max"], 2)
        if set(v) != {"min", "max"}:
            raise SpecError(opt, None, f"uniform needs min and max, e.g. uniform:64,1024, got {s!r}")
        lo, hi = num(v["min"], "min"), num(v["max"], "max")
        if hi < lo:
            raise SpecError(opt, None, f"uniform max ({hi}) is below min ({lo})")
        return Lengths("uniform", lo, hi)
    if kind == "lognormal":
        v = take(["median", "max", "sigma"], 0)
        if not {"median", "max"} <= set(v):
            raise SpecError(opt, None, f"lognormal needs median= and max=, e.g. {DEFAULT_OUTPUT}, got {s!r}")
        med, cap = num(v["median"], "median", False), num(v["max"], "max")
        sigma = num(v.get("sigma", LOGNORMAL_SIGMA), "sigma", False, 0)
        if cap < med:
            raise SpecError(opt, None, f"lognormal max ({cap}) is below the median ({med:g})")
        return Lengths("lognormal", 1, cap, med, sigma)
    raise SpecError(opt, None, f"unknown distribution {kind!r}: use N, fixed:N, uniform:LO,HI or "
                               f"lognormal:median=M,max=C")


TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


MAX_TRACE_BYTES = 64 * 2**20  # a 100,000-request trace is about 2 MB


def read_trace(path) -> tuple:
    """A trace CSV with a header naming arrival_s, prompt_tokens, output_tokens (any order; other
    columns are ignored). Returns (arrival, prompt, output) arrays and the file's row numbers."""
    import io

    from ..fileio import read_capped

    path = str(path)
    text = read_capped(path, path, MAX_TRACE_BYTES, "trace (a CSV of at most 64 MiB, about 2 million rows)")
    try:
        lines = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise SpecError(path, None, f"not a CSV file: {e}") from None
    rows = [(i + 1, r) for i, r in enumerate(lines) if any(c.strip() for c in r)]
    if not rows:
        raise SpecError(path, None, f"empty trace: expected a header {','.join(TRACE_COLUMNS)} and rows")
    hline, header = rows[0]
    names = [h.strip().lower() for h in header]
    missing = [c for c in TRACE_COLUMNS if c not in names]
    if missing:
        raise SpecError(path, f"row {hline}", f"header lacks column {', '.join(missing)} "
                                              f"(expected {','.join(TRACE_COLUMNS)}, got {','.join(names)})")
    idx = [names.index(c) for c in TRACE_COLUMNS]
    if len(rows) == 1:
        raise SpecError(path, None, "the trace has a header but no requests")
    out = np.zeros((len(rows) - 1, 3))
    for k, (line, r) in enumerate(rows[1:]):
        if len(r) < len(names):
            raise SpecError(path, f"row {line}", f"expected {len(names)} fields, got {len(r)}")
        for j, (col, i) in enumerate(zip(TRACE_COLUMNS, idx)):
            cell = r[i].strip()
            try:
                x = float(cell)
            except ValueError:
                x = float("nan")
            if j == 0 and not (math.isfinite(x) and x >= 0):
                raise SpecError(path, f"row {line}, column {col}", f"expected seconds >= 0, got {cell!r}")
            if j > 0 and not (math.isfinite(x) and x >= 1 and x == int(x)):
                raise SpecError(path, f"row {line}, column {col}", f"expected a whole number >= 1, got {cell!r}")
            out[k, j] = x
    return out[:, 0], out[:, 1].astype(np.int64), out[:, 2].astype(np.int64), [ln for ln, _ in rows[1:]]


@dataclass
class Traffic:
    """Requests in arrival order: arrival (s), prompt tokens (the system prefix excluded), the
    output tokens of each sample (requests x samples), and the most a request may ask for."""

    arrival: np.ndarray
    prompt: np.ndarray
    outputs: np.ndarray
    max_output: int
    shared_prefix: int = 0
    where: list = field(default_factory=list)  # how to name request i in an error

    @property
    def n(self) -> int:
        return len(self.arrival)


def make_traffic(requests=None, rate=None, trace=None, prompt_len=DEFAULT_PROMPT, output_len=DEFAULT_OUTPUT,
                 samples=1, shared_prefix=0, seed=0) -> Traffic:
    """Arrivals, lengths and samples; each random quantity has its own stream of the seed, so
    changing one (say, the output distribution) leaves the others as they were."""
    samples = _whole(samples, "--samples")
    shared_prefix = _whole(shared_prefix, "--shared-prefix", 0)
    rng = [np.random.default_rng([_whole(seed, "--seed", 0), k]) for k in range(3)]
    if trace is not None:
        if rate is not None:
            raise SpecError("--rate", None, "the trace gives the arrival times; drop --rate or --trace")
        for opt, v, d in (("--prompt-len", prompt_len, DEFAULT_PROMPT), ("--output-len", output_len, DEFAULT_OUTPUT)):
            if v is not None and str(v) != d:
                raise SpecError(opt, None, "the trace gives the lengths; drop it or --trace")
        arr, pr, out, lines = read_trace(trace)
        if requests is not None:
            n = _whole(requests, "--requests")
            if n > len(arr):
                raise SpecError("--requests", None, f"{n} requested but {trace} has {len(arr)} rows")
            arr, pr, out, lines = arr[:n], pr[:n], out[:n], lines[:n]
        order = np.argsort(arr, kind="stable")
        where = [f"{trace}: row {lines[i]}" for i in order]
        outs = np.repeat(out[order, None], samples, axis=1)  # every sample asks for the row's tokens
        return Traffic(arr[order], pr[order], outs, int(out.max()), shared_prefix, where)
    n = _whole(64 if requests is None else requests, "--requests")
    P = parse_lengths(prompt_len or DEFAULT_PROMPT, "--prompt-len")
    O = parse_lengths(output_len or DEFAULT_OUTPUT, "--output-len")
    if rate is None:
        arr = np.zeros(n)
    else:
        r = parse_rate(rate)
        arr = np.cumsum(rng[0].exponential(1.0 / r, size=n))  # Poisson: exponential gaps
        arr -= arr[0]  # the first request opens the run
    return Traffic(arr, P.draw(rng[1], n), O.draw(rng[2], (n, samples)), O.max, shared_prefix,
                   [f"request {i}" for i in range(n)])


MAX_WHOLE = 10**15  # no count a simulation takes is larger (the work limits refuse far less); past it: one line


def parse_rate(rate) -> float:
    """--rate: arrivals per second, a positive finite number (a number or its text)."""
    try:
        r = float(rate) if not isinstance(rate, bool) else float("nan")
    except (TypeError, ValueError, OverflowError):
        r = float("nan")
    if not (math.isfinite(r) and r > 0):
        raise SpecError("--rate", None, f"must be a positive number of requests per second, got {rate!r}")
    return r


def _whole(v, opt, minimum=1, maximum=MAX_WHOLE) -> int:
    try:
        x = parse_count(v)  # 4096, 1e5, 100k
    except (TypeError, ValueError, OverflowError):
        x = float("nan")
    if not math.isfinite(x) or x < minimum or x != int(x):
        raise SpecError(opt, None, f"must be a whole number >= {minimum}, got {v!r}")
    if x > maximum:
        raise SpecError(opt, None, f"{v!r} is over the largest value this option takes, {maximum:,}")
    return int(x)


