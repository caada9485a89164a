"""The public boundary's cost (issue 26): the calls users make through `perfmodel` (arguments checked by
perfmodel/frames/boundary.py) beside the same calls on perfmodel.api (no checks), in one process, medians of
interleaved calls after a warm-up. `python bench/bench_boundary.py`; docs/speed.md records a run."""
from __future__ import annotations

import statistics
import time

import perfmodel as pm
from perfmodel import api

CASES = {
    "point(llama-2-13b, h100-sxm, batch=1, context=1024)": (
        lambda: pm.point("llama-2-13b", "h100-sxm", batch=1, context=1024),
        lambda: api.point("llama-2-13b", "h100-sxm", 1, 1024)),
    "decode(llama-2-13b, h100-sxm, batch=[1, 64], context=1024)": (
        lambda: pm.decode("llama-2-13b", "h100-sxm", batch=[1, 64], context=1024),
        lambda: pm.frames._frame(api.decode("llama-2-13b", "h100-sxm", [1, 64], 1024))),
}


def main(n: int = 2000) -> None:
    for name, (checked, bare) in CASES.items():
        for f in (checked, bare):
            for _ in range(50):
                f()
        a, b = [], []
        for _ in range(n):  # interleaved, so both see the same load
            t = time.perf_counter(); checked(); a.append(time.perf_counter() - t)
            t = time.perf_counter(); bare(); b.append(time.perf_counter() - t)
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{name}: checked {ma * 1e6:.1f} us, unchecked {mb * 1e6:.1f} us, boundary {(ma - mb) * 1e6:+.1f} us "
              f"({ma / mb - 1:+.1%})")


if __name__ == "__main__":
    main()
