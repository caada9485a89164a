"""Disaggregated prefill and decode pools (DistServe, Splitwise): N devices split into a prefill pool of
n_p instances of one layout and a decode pool of n_d instances of another.

- Prefill pool: prefill-only iterations of whole prompts in FIFO order, as many as the token budget
  allows (at least one): the simulator's `separate` prefill with every request ending at its first token.
  Each instance gets a random share of the Poisson arrivals (Poisson at rate / n_p).
- KV transfer: when a prompt's first token is out, its KV cache moves to a decode instance, each prefill
  device sending its shard over its own link: per link max(KV/token on a prefill device, on a decode
  device) x prompt tokens (+ a fixed state), one point-to-point send priced by the time model (op kind
  COMM, coll "send"), inside a node (link_bandwidth, link_latency) when the N devices fit in one node
  (devices_per_node), else across the network. Transfers are priced one at a time: the link's occupancy
  is reported, not queued on.
- TTFT = arrival to first token in the prefill pool + the transfer (the first token is streamed once its
  cache has landed: the conservative choice; a server that streams it at once moves the transfer into
  the second token's gap, which this model counts in TPOT otherwise). A wait for a place in the decode pool
  is counted in TPOT here, so that each pool's SLO is checked on its own; a server that streams every token
  from the decode worker (Dynamo) shows that wait in TTFT instead, as the serving validation
  (serving/silicon.py) models the measured runs.
- Decode pool: requests arrive with their prompt's cache and first token (fastsim's prefilled=True) and
  decode in continuous batches; TPOT = (last token - first token's landing) / (output - 1).

Search (DistServe's two levels): per prefill layout, the rate its instance serves within the TTFT SLO
(with the transfer to the decode layout that costs most); per decode layout, the rate its instance
serves within the TPOT SLO with Poisson arrivals of prefilled requests (the merge of many prefill
instances' outputs, randomly split). A split's estimate is min(n_p x prefill goodput, n_d x decode
goodput). The best estimates are then checked by coupled simulations (prefill pool, transfer, decode
instance fed by the prefill pool's real departures) searched near the estimate; those rows say
`search: coupled`, the others `per pool`.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import engine
from ..errors import DataWarning, SpecError
from ..ops import COMM, Layout, Op
from . import fastsim
from .slo import (TRACE_MIN, Instance, _row, _verdict, analytic, search_seeds, trace_length)

VERIFY = 3  # coupled checks at most, best estimate first, while a better estimate remains


def _pool_layouts(model, d: int) -> list:
    from ..parallel import layouts

    return [Layout(l.tp, 1, 1, 1) for l in layouts(model, d) if l.pp == 1 and l.ep == 1 and l.replicas == 1]


class Transfer:
    """KV-cache transfer time from a prefill instance to a decode instance, per request (vectorized)."""

    def __init__(self, model, hw, prec, lay_p: Layout, lay_d: Layout, devices: int, mode, impl):
        self.across = devices > (hw.devices_per_node or 1)
        per_tok = max(engine.kv_growth_per_token(model, prec, lay_p), engine.kv_growth_per_token(model, prec, lay_d))
        fixed = max(float(engine.per_sequence(model, np.array([0.0]), prec, layout=l)["fixed_state_bytes_per_seq"][0])
                    for l in (lay_p, lay_d))
        self.per_tok, self.fixed = per_tok, fixed
        self.tm = engine.time_model(mode, hw, impl)
        self.hw = hw
        dpn = hw.devices_per_node or 1
        # a stand-in layout whose "pp" group spans two devices of one node, or two nodes
        self.lay = Layout(dpn, 2, 1, 1) if self.across else Layout(1, 2, 1, 1)
        if self.across and not hw.network_latency:
            warnings.warn(f"{hw.key or hw.name} lacks network_latency: the KV transfer across nodes is priced on "
                          "bandwidth only", DataWarning, stacklevel=3)
        self.kind = "network" if self.across else "link"
        self(np.zeros(1))  # a link or network the spec cannot price raises SpecError here, where the planner catches it

    def __call__(self, prompt) -> np.ndarray:
        msg = np.asarray(prompt, dtype=np.float64) * self.per_tok + self.fixed
        op = Op("kv_transfer", "", 1, COMM, comm_bytes=msg, comm_steps=1, link="pp", coll="send", msg=msg, peers=2)
        t, _, _ = self.tm.collective(op, self.hw, self.lay)
        return np.asarray(t, dtype=np.float64) + 0 * msg


def _prefill_run(inst, arr, P, stop=None):
    return fastsim.run(arr, P, np.ones(P.size, dtype=np.int64), inst.sizes, inst.cost, inst.slots, inst.budget,
                       "separate", inst.block, stop=stop)


def prefill_rate(inst, wl, n, rate, seed, transfer) -> dict:
    """One prefill instance at `rate`: the TTFT verdict (prefill + the transfer) over the window."""
    arr, P, O = wl.trace(n, rate, seed)
    w = wl.window(n)
    stop = {"window": w, "ttft": wl.slo_ttft, "tpot": math.inf, "q": wl.q}
    r = _prefill_run(inst, arr, P, stop)
    f = r["first"][w]
    ttft = np.where(f >= 0, f + transfer(P[w]) - arr[w], np.nan)
    v = _verdict(ttft, np.full(ttft.size, np.nan), wl, r["stopped"])
    v.update(rate=rate, seed=seed, mean_output=float(O.mean()))
    return v


def decode_rate(inst, wl, n, rate, seed) -> dict:
    """One decode instance with Poisson arrivals of prefilled requests at `rate`: the TPOT verdict."""
    arr, P, O = wl.trace(n, rate, seed)
    keep = O > 1
    arr, P, O = arr[keep], P[keep], O[keep]
    m = arr.size
    w = wl.window(m)
    stop = {"window": w, "ttft": math.inf, "tpot": wl.slo_tpot, "q": wl.q}
    r = fastsim.run(arr, P, O, inst.sizes, inst.cost, inst.slots, inst.budget, "chunked", inst.block,
                    prefilled=True, stop=stop, ahead=inst.ahead)
    d = r["done"][w]
    tpot = np.where(d >= 0, (r["last"][w] - arr[w]) / (O[w] - 1), np.nan)
    v = _verdict(np.full(tpot.size, np.nan), tpot, wl, r["stopped"])
    v.update(rate=rate, seed=seed, mean_output=float(O.mean()), memory_stalls=r["memory_stalls"],
             preempted=r["preempted"])
    return v


def coupled_rate(pre, n_p, dec, n_d, transfer, wl, n_dec, rate, seed, full=False) -> dict:
    """The whole split at total `rate`: every prefill instance simulated on its random share, the
    transfer, and one decode instance fed by its random share of the prefill pool's departures.
    full=True: the decode pool is simulated (to the end of its measured requests) even when TTFT fails."""
    n = n_dec * n_d
    arr, P, O = wl.trace(n, rate, seed)
    rng = np.random.default_rng([int(seed), 7])
    which = rng.integers(0, n_p, size=n)
    first = np.full(n, -1.0)
    w = wl.window(n)
    for k in range(n_p):
        idx = np.flatnonzero(which == k)
        if idx.size:
            r = _prefill_run(pre, arr[idx], P[idx])
            first[idx] = r["first"]
    land = first + transfer(P)
    ttft = land[w] - arr[w]
    v = _verdict(ttft, np.full(ttft.size, np.nan), wl)
    v.update(rate=rate, seed=seed, mean_output=float(O.mean()))
    if not v["ok"] and not full:
        return v
    to = rng.integers(0, n_d, size=n)
    mine = np.flatnonzero((to == 0) & (O > 1))
    order = mine[np.argsort(land[mine], kind="stable")]
    a_d, P_d, O_d = land[order], P[order], O[order]
    wd = wl.window(order.size)
    stop = {"window": wd, "ttft": math.inf, "tpot": math.inf if full else wl.slo_tpot, "q": wl.q}
    r = fastsim.run(a_d, P_d, O_d, dec.sizes, dec.cost, dec.slots, dec.budget, "chunked", dec.block, prefilled=True,
                    stop=stop, ahead=dec.ahead)
    d = r["done"][wd]
    tpot = np.where(d >= 0, (r["last"][wd] - a_d[wd]) / (O_d[wd] - 1), np.nan)
    v2 = _verdict(ttft, tpot, wl, r["stopped"])
    v2.update(rate=rate, seed=seed, mean_output=float(O.mean()),
              link_busy=float(np.sum(transfer(P)) / max(float(arr[-1] - arr[0]), 1e-30)))
    return v2


def _instance(m, hw, prec, lay, mode, impl, knobs, cache):
    key = (repr(hw), lay)  # the whole spec, as capacity.prepare: variants of one catalog device keep its key
    if key not in cache:
        try:
            cache[key] = Instance(m, hw, prec, lay, mode, impl, knobs["quantum"], knobs["budget"], knobs["slots"],
                                  knobs["block"])
        except SpecError:
            cache[key] = None
    return cache[key]


def rows(m, hw, prec, N: int, mode, impl, wl, knobs, price, cache, keep=False) -> list:
    """The rows of every split of N devices into a prefill and a decode pool (module docstring)."""
    from ..api import economics

    if N < 2:
        return [_row(m, hw, mode, Layout(), N, serving="disaggregated", binding="does not fit", search="none",
                     note="disaggregation needs at least 2 devices")]
    cands = {d: _pool_layouts(m, d) for d in range(1, N)}
    pre_ok, dec_ok = {}, {}
    for d, lays in cands.items():
        for lay in lays:
            inst = _instance(m, hw, prec, lay, mode, impl, knobs, cache)
            if inst is None:
                continue
            if bool(fastsim.fits_alone(inst.sizes, inst.block, wl.max_prompt, 1)):
                pre_ok[lay] = inst
            if bool(fastsim.fits_alone(inst.sizes, inst.block, wl.max_prompt, wl.max_output)):
                dec_ok[lay] = inst
    splits = []
    for lp, ip in pre_ok.items():
        for ld, idn in dec_ok.items():
            for n_p in range(1, N // lp.devices + 1):
                rest = N - n_p * lp.devices
                if rest >= ld.devices and rest % ld.devices == 0:
                    splits.append((lp, n_p, ld, rest // ld.devices))
    if not splits:
        return [_row(m, hw, mode, Layout(), N, serving="disaggregated", binding="does not fit", search="none",
                     note=f"no split of {N} devices gives both pools a layout that holds the model")]
    try:
        worst = {lp: Transfer(m, hw, prec, lp, min(dec_ok, key=lambda l: l.tp), N, mode, impl) for lp in pre_ok}
    except SpecError as e:
        return [_row(m, hw, mode, Layout(), N, serving="disaggregated", binding="does not fit", search="none",
                     note=f"the KV cache cannot move between pools: {e}")]
    # per-pool searches
    pre_g, dec_g = {}, {}
    for lp in {s[0] for s in splits}:
        ip = pre_ok[lp]
        chunk = int(min(ip.budget or wl.mean_prompt, max(wl.mean_prompt, 2)))
        t_tok = ip.step([chunk], [chunk]) / chunk
        if t_tok * wl.prompt_q + float(worst[lp](wl.prompt_q)) > wl.slo_ttft:
            pre_g[lp] = None
            continue
        n = wl.requests or TRACE_MIN
        pre_g[lp] = search_seeds(lambda r, s, ip=ip, lp=lp: prefill_rate(ip, wl, n, r, s, worst[lp]),
                                 1.0 / (wl.mean_prompt * t_tok), wl)
    for ld in {s[2] for s in splits}:
        idn = dec_ok[ld]
        a = analytic(idn, wl)
        if a["rate"] is None:
            dec_g[ld] = None
            continue
        n = trace_length(wl, a)
        c = int(round(wl.mean_prompt + wl.mean_output / 2))
        t_dec = idn.step(np.ones(a["batch"]), np.full(a["batch"], c))
        dec_g[ld] = (search_seeds(lambda r, s, idn=idn: decode_rate(idn, wl, n, r, s),
                                  a["batch"] / (wl.mean_output * t_dec), wl), n)
    out = []
    for lp, n_p, ld, n_d in splits:
        gp, gd = pre_g[lp], dec_g[ld]
        tr = Transfer(m, hw, prec, lp, ld, N, mode, impl)
        base = dict(serving="disaggregated", prefill_tp=lp.tp, prefill_instances=n_p, decode_tp=ld.tp,
                    decode_instances=n_d, seeds=len(wl.seeds), kv_transfer_s=float(tr(wl.mean_prompt)),
                    tp=math.nan, ep=math.nan, replicas=math.nan, pp=math.nan)
        if gp is None or gp["goodput"] is None or gd is None or gd[0]["goodput"] is None:
            which = "prefill pool (TTFT)" if (gp is None or gp["goodput"] is None) else "decode pool (TPOT)"
            out.append(_row(m, hw, mode, Layout(), N, binding="none reached", search="per pool",
                            note=f"the {which} meets its SLO at no rate", **base))
            continue
        p_rate, d_rate = n_p * gp["goodput"], n_d * gd[0]["goodput"]
        est = min(p_rate, d_rate)
        lo = min(n_p * gp["lo"], n_d * gd[0]["lo"])
        hi = min(n_p * gp["hi"], n_d * gd[0]["hi"])
        binding = "ttft" if p_rate <= d_rate else "tpot"
        vp, vd = gp["median"]["vlo"], gd[0]["median"]["vlo"]
        out.append(_row(m, hw, mode, Layout(), N, goodput_rps=est, goodput_lo_rps=lo, goodput_hi_rps=hi,
                        binding=binding, ttft_s=vp["ttft"], tpot_s=vd["tpot"], search="per pool",
                        requests=gd[1], note=f"pools {p_rate:.3g}/s | {d_rate:.3g}/s", **base,
                        _split=(lp, n_p, ld, n_d), _mean_out=vd["mean_output"]))
    # coupled checks, best estimate first
    order = sorted([r for r in out if "_split" in r], key=lambda r: -r["goodput_rps"])
    best = -math.inf
    for k, r in enumerate(order[:VERIFY]):
        if r["goodput_rps"] <= best:
            break
        lp, n_p, ld, n_d = r["_split"]
        tr = Transfer(m, hw, prec, lp, ld, N, mode, impl)
        n_dec = r["requests"]
        res = search_seeds(lambda x, s: coupled_rate(pre_ok[lp], n_p, dec_ok[ld], n_d, tr, wl, int(n_dec), x, s),
                           r["goodput_rps"], wl)
        r["search"] = "coupled"
        r["requests"] = n_dec * n_d
        if res["goodput"] is None:
            v = res["median"]["vhi"]
            r.update(goodput_rps=math.nan, goodput_lo_rps=math.nan, goodput_hi_rps=math.nan, binding="none reached",
                     binding_value_s=v["ttft"] if v["fail"] == "ttft" else v["tpot"],
                     note="the coupled simulation meets the SLOs at no rate tried")
            continue
        med = res["median"]
        v, vh = med["vlo"], med["vhi"]
        r.update(goodput_rps=res["goodput"], goodput_lo_rps=res["lo"], goodput_hi_rps=res["hi"], ttft_s=v["ttft"],
                 tpot_s=v["tpot"], hit_bound=res["hit"], median_seed=med["seed"],
                 fail_rps=math.nan if vh is None else vh["rate"],
                 binding="search bound" if vh is None else vh["fail"],
                 binding_value_s=math.nan if vh is None else (vh["tpot"] if vh["fail"] == "tpot" else vh["ttft"]),
                 note=r["note"] + f", coupled; KV {tr.kind} busy {100 * v.get('link_busy', 0.0):.2g}%")
        if keep:
            r["_search"], r["_instance"], r["_n"] = res, (pre_ok[lp], n_p, dec_ok[ld], n_d, tr), int(n_dec)
        best = max(best, res["goodput"])
    for r in out:
        r.pop("_split", None)
        mo = r.pop("_mean_out", wl.mean_output)
        if np.isfinite(r["goodput_rps"]):
            r["output_tok_s"] = r["goodput_rps"] * mo
            r["goodput_per_device"] = r["goodput_rps"] / N
            if price is not None or hw.price_per_hour:
                r["cost_per_million_tokens"] = economics({"throughput_tok_s": r["output_tok_s"]}, hw, N,
                                                         price)["cost_per_million_tokens"]
    return out


def compare(table: dict) -> dict:
    """Per hardware: does the best disaggregated split (checked by a coupled simulation) beat the best
    colocated layout on goodput per device?"""
    lines = []
    hws = list(dict.fromkeys(table["hardware"]))
    for h in hws:
        sel = np.asarray(table["hardware"]) == h
        g = np.asarray(table["goodput_per_device"], float)
        col = sel & (np.asarray(table["serving"]) == "colocated") & np.isfinite(g)
        dis = sel & (np.asarray(table["serving"]) == "disaggregated") & (np.asarray(table["search"]) == "coupled") & \
            np.isfinite(g)
        if not dis.any() and not (sel & (np.asarray(table["serving"]) == "disaggregated")).any():
            continue
        if not col.any() or not dis.any():
            lines.append(f"{h}: " + ("no colocated layout meets the SLOs" if not col.any() else
                                     "no disaggregated split meets the SLOs"))
            continue
        bc, bd = float(np.max(g[col])), float(np.max(g[dis]))
        word = "beats" if bd > bc else "does not beat"
        lines.append(f"{h}: disaggregated {word} colocated on goodput per device: {bd:.3g} vs {bc:.3g} requests/s "
                     f"per device ({bd / bc:.2f}x)")
    return {"disaggregation": lines}
