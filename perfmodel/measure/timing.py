"""The timing loop: warm-up, repeats, the median; an injectable clock so the logic is testable.

A sample is the time of `inner` back-to-back calls divided by `inner`. The loop brackets each
sample with the timer's start/stop:

- `WallTimer(clock, sync)`: sync() (a device synchronize, or nothing on the CPU), read the clock,
  run, sync() again, read the clock. With a fake clock the whole loop runs in tests.
- CUDA events (perfmodel.measure.cuda.EventTimer): record an event before and after, wait for
  the second, elapsed_time in ms.

`inner` is chosen once, after warm-up, so that a sample lasts at least `min_sample_s` (timer
resolution and Python call overhead otherwise dominate micro-second ops). The callable receives
the call index so that it can rotate among buffer copies and always read cold memory.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

import numpy as np


class WallTimer:
    """Host clock around a synchronize (default: time.perf_counter, no synchronize)."""

    def __init__(self, clock=time.perf_counter, sync=None):
        self.clock, self.sync = clock, sync or (lambda: None)
        self._t0 = 0.0

    def start(self) -> None:
        self.sync()
        self._t0 = self.clock()

    def stop(self) -> float:
        self.sync()
        return self.clock() - self._t0


@dataclass
class Timing:
    """Per-call seconds of each timed sample (warm-up excluded) and how they were taken."""

    samples: list
    warmup: int
    inner: int
    load: tuple = ()  # 1-minute load average before and after (CPU contention is visible here)
    cpu_util: float = float("nan")  # process CPU time / wall time over the samples (threads busy)
    extra: dict = field(default_factory=dict)

    @property
    def median(self) -> float:
        return float(np.median(self.samples))

    @property
    def min(self) -> float:
        return float(np.min(self.samples))

    @property
    def max(self) -> float:
        return float(np.max(self.samples))

    @property
    def repeats(self) -> int:
        return len(self.samples)

    def record(self) -> dict:
        return {"median_s": self.median, "min_s": self.min, "max_s": self.max, "repeats": self.repeats,
                "warmup": self.warmup, "inner": self.inner, "samples_s": [float(s) for s in self.samples],
                "load_before": self.load[0] if self.load else None, "load_after": self.load[1] if self.load else None,
                "cpu_util": None if math.isnan(self.cpu_util) else round(self.cpu_util, 3)}


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:  # not on every platform
        return float("nan")


class Sampler:
    """One case's timed calls, one sample at a time, so that the suite can interleave cases.

    `warm(n)` makes n untimed calls, then grows `inner` until one sample lasts at least
    `min_sample_s`; each `sample()` then times `inner` back-to-back calls and keeps their mean.
    The call index goes on counting across samples (a case rotates its buffer copies by it).
    """

    def __init__(self, fn, timer=None, min_sample_s: float = 0.0, max_inner: int = 10_000, cpu_clock=time.process_time):
        self.fn, self.timer, self.cpu_clock = fn, timer or WallTimer(), cpu_clock
        self.min_sample_s, self.max_inner = min_sample_s, max_inner
        self.i, self.inner, self.warmup = 0, 1, 0
        self.samples: list = []
        self.wall = self.cpu = 0.0
        self.load0 = _load()

    def _calls(self, n: int) -> float:
        self.timer.start()
        for _ in range(n):
            self.fn(self.i)
            self.i += 1
        return self.timer.stop()

    def warm(self, warmup: int = 1) -> "Sampler":
        if warmup < 0:
            raise ValueError(f"need warmup >= 0, got {warmup}")
        for _ in range(warmup):
            self.fn(self.i)
            self.i += 1
        self.warmup += warmup
        if self.min_sample_s > 0:  # grow the inner loop until one sample is long enough to time reliably
            while True:
                dt = self._calls(self.inner)
                if dt >= self.min_sample_s or self.inner >= self.max_inner:
                    break
                grow = self.inner * 2 if dt <= 0 else max(self.inner * 2, math.ceil(self.inner * 1.2 * self.min_sample_s / dt))
                self.inner = min(self.max_inner, grow)
        self.load0 = _load()
        return self

    def sample(self) -> float:
        c0 = self.cpu_clock()
        dt = self._calls(self.inner)
        self.cpu += self.cpu_clock() - c0
        self.wall += dt
        self.samples.append(dt / self.inner)
        return self.samples[-1]

    def timing(self) -> Timing:
        util = self.cpu / self.wall if self.wall > 0 else float("nan")
        return Timing(list(self.samples), self.warmup, self.inner, (self.load0, _load()), util)


def time_fn(fn, repeats: int = 5, warmup: int = 1, timer=None, min_sample_s: float = 0.0,
            max_inner: int = 10_000, cpu_clock=time.process_time) -> Timing:
    """Time fn(i) (i = call index, for buffer rotation): `warmup` untimed calls, then `repeats`
    samples of `inner` calls each, back to back. Returns per-call seconds of each sample."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}")
    s = Sampler(fn, timer, min_sample_s, max_inner, cpu_clock).warm(warmup)
    for _ in range(repeats):
        s.sample()
    return s.timing()
