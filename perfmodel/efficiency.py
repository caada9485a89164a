"""The terms of the achievable time model, as data: a hardware spec's `achievable:` block (what a good
kernel reaches on that device, from bandwidth tests, GEMM, attention and collective benchmarks) and an
implementation profile (what the software around the kernels costs: launches, CUDA graphs, the
scheduler, which ops share a kernel, which collective algorithms it has).

Parsed and checked at load, in SI units. Every term is `{value: ..., source: "..."}` and the loader
refuses one without a source, an efficiency outside (0, 1] or a negative overhead, in one line that
names the file and the field. perfmodel.timemodel prices the op list with them; docs/derivations.md
("Achievable time") derives every term.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .errors import SpecError
from .fields import _check_keys, _int, _need, _qty, _str
from .units import parse_quantity

# collective algorithms (docs/derivations.md, "Collectives"): which collective each one serves
ALGORITHMS = {"ring": ("allreduce", "allgather", "alltoall", "send"), "tree": ("allreduce",),
              "oneshot": ("allreduce",), "twoshot": ("allreduce",), "nvls": ("allreduce",),
              "direct": ("allgather", "alltoall", "send"),
              # DeepEP's dispatch and combine kernels: what SGLang, vLLM and TensorRT-LLM run the EP all-to-all in
              "deepep": ("alltoall",)}
# without a `link_algorithms` field a scale-up link offers these (point-to-point access to every peer);
# NVLS needs reduction inside the switch, so a spec names it
DEFAULT_LINK_ALGORITHMS = ("ring", "tree", "oneshot", "twoshot", "direct")
NETWORK_ALGORITHMS = ("ring", "tree", "direct")
DEQUANT_FAMILIES = ("int8", "int4", "nf4", "fp8", "fp4")


def dequant_family(fmt_name: str) -> str:
    """The kernel family that dequantizes weights of this format (int4-g128 -> int4, nf4-dq -> nf4, ...)."""
    n = fmt_name.lower()
    for fam, prefixes in (("int4", ("int4",)), ("nf4", ("nf4",)), ("fp8", ("fp8",)), ("int8", ("int8",)),
                          ("fp4", ("fp4", "mxfp4", "nvfp4")), ("fp6", ("fp6", "mxfp6"))):
        if n.startswith(prefixes):
            return fam
    return n


@dataclass(frozen=True)
class Algorithm:
    """One collective algorithm on one kind of link, from collective benchmarks:
    t = max(latency(p), steps(p) * one-hop latency) + bytes(p, n) / (efficiency * link bandwidth)."""

    latency: tuple  # ((group size p, s), ...) measured small-message time of the whole collective at p devices
    efficiency: float  # achieved fraction of the link's bandwidth per direction (bus bandwidth / link bandwidth)
    max_bytes: float = math.inf  # the library uses it for messages up to this size

    def at(self, p: float, steps=None) -> float:
        """Latency at p devices: linear between measured sizes; below the smallest, its value; above the
        largest, its value times steps(p) / steps(p_largest) when `steps` is given (ring, tree), else its
        value. A single value written without sizes (stored at p = 0) holds for every p."""
        pts = self.latency
        if pts[0][0] == 0 or p <= pts[0][0]:
            return pts[0][1]
        for (p0, t0), (p1, t1) in zip(pts, pts[1:]):
            if p <= p1:
                return t0 + (t1 - t0) * (p - p0) / (p1 - p0)
        p_max, t_max = pts[-1]
        return t_max * (steps(p) / steps(p_max) if steps else 1.0)


@dataclass(frozen=True)
class Dequant:
    """A weight-only kernel against the 16-bit one on the same device."""

    bandwidth: float  # fraction of the 16-bit kernel's HBM bandwidth it reaches while memory-bound (small batch)
    compute: float  # fraction of the 16-bit tensor rate it reaches while compute-bound (large batch)


@dataclass(frozen=True)
class Achievable:
    """What good kernels reach on one device (the hardware spec's `achievable:` block)."""

    hbm_efficiency: float  # bandwidth of a large read-dominated streaming kernel / datasheet bandwidth
    kernel_latency: float  # s: the fixed time of one small kernel (back to back in a CUDA graph)
    gemm_latency: float  # s: the fixed time of one GEMM kernel beyond its streaming time (skinny-GEMM benchmarks)
    gemm_efficiency: dict  # peak key (bf16, fp8, ...) -> large-GEMM rate / datasheet peak
    attention_compute: dict  # peak key -> fused attention kernel (prefill) rate at long keys / datasheet peak
    attention_half_keys: float  # keys per query at which the attention kernel reaches half that rate
    attention_bandwidth: float  # decode attention kernel bandwidth / datasheet bandwidth (large reads)
    attention_latency: float  # s: the fixed time of one decode attention kernel
    dequant: dict  # family -> Dequant
    link: dict  # algorithm -> Algorithm on the scale-up link
    network: dict  # algorithm -> Algorithm across nodes
    sm_count: int | None = None  # streaming multiprocessors (compute units) for wave quantization
    gemm_tiles: tuple = ()  # ((rows, cols), ...) output tiles the GEMM library chooses from
    sources: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Impl:
    """An implementation profile: the software's fixed costs and choices (hardware/impl/*.yaml)."""

    name: str
    launch: float  # s of host time to launch one kernel (0 when a CUDA graph replays the step)
    layer_overhead: float  # s of host time per layer (Python module calls in eager frameworks)
    step_overhead: float  # s per forward step that overlaps nothing (scheduling, sampling, host sync)
    kernels: dict  # op name -> kernels it launches (default 1; 0: it runs inside another op's kernel)
    collectives: tuple  # collective algorithms the stack uses
    description: str = ""
    sources: dict = field(default_factory=dict)
    key: str = ""
    # the serving engine's step loop (docs/engine-overheads.md): host time per step that the GPU waits for
    # (step_overhead, step_per_seq per sequence in the step) and host time per step that an async scheduler
    # hides under the GPU's forward pass (host_step, host_per_seq): a step takes
    # max(device, launches + host_step + host_per_seq * n) + step_overhead + step_per_seq * n
    step_per_seq: float = 0.0
    host_step: float = 0.0
    host_per_seq: float = 0.0
    # host time per op of a step that holds a prompt, which the engine runs outside its CUDA graphs (SGLang captures
    # decode steps only): with `launch`, under max() with the device time
    prefill_launch: float = 0.0
    engine: str = ""  # "vllm 0.24.0": whose measured kernel tables (perfmodel.kernels) price its ops
    engine_version: str = ""
    # the engine version a measured run used (serving validation): each kind of table of exactly that version where
    # AIConfigurator measured it, else engine_version's (kernels._table_dir)
    exact_version: str = ""
    kernel_tables: str = "auto"  # "auto" (AIConfigurator's, for `engine`), "none", or a `perfmodel measure` results.csv
    accumulate: str = "fp32"  # what its fp16 GEMMs accumulate in: fp32 (PyTorch, cuBLAS defaults) or fp16
    overlap_schedule: bool = False  # the scheduler forms step k + 1 while step k runs (serving: fastsim.run's ahead)
    moe_backend: str = ""  # the engine's MoE backend (moe_backends.MOE_BACKENDS); "": the fastest measured


# ---------------------------------------------------------------- parsing
def _sourced(raw, where, fld, default_src=None):
    """(value, source) of `{value: ..., source: ...}` or of a plain value under a file-level source."""
    if isinstance(raw, dict):
        _check_keys(raw, {"value", "source"}, where, f"{fld}.")
        _need(raw, ["value"], where, f"{fld}.")
        src, raw = raw.get("source") or default_src, raw["value"]
    else:
        src = default_src
    if not src:
        raise SpecError(where, fld, "has no source: write {value: ..., source: \"benchmark or paper ...\"}")
    return raw, str(src)


def _frac(raw, where, fld, default_src=None) -> tuple[float, str]:
    """An efficiency: a number in (0, 1] with a source."""
    v, src = _sourced(raw, where, fld, default_src)
    try:
        x = parse_quantity(v, "ratio", allow_zero=True)
    except ValueError:
        x = -1.0
    if not (0 < x <= 1):
        raise SpecError(where, fld, f"{v!r} is outside (0, 1]: an efficiency is a fraction of the datasheet peak")
    return x, src


def _time(raw, where, fld, default_src=None) -> tuple[float, str]:
    """An overhead: seconds >= 0 with a source."""
    v, src = _sourced(raw, where, fld, default_src)
    try:
        return parse_quantity(v, "s", allow_zero=True), src
    except ValueError as e:
        raise SpecError(where, fld, f"{e} (an overhead is a time >= 0, e.g. '2 us')") from None


def _per_dtype(raw, where, fld, sources) -> dict:
    if not isinstance(raw, dict) or not raw:
        raise SpecError(where, fld, "must be a mapping dtype: {value: fraction, source: ...}, e.g. bf16: ...")
    from .fields import PEAK_KEYS

    _check_keys(raw, PEAK_KEYS, where, f"{fld}.")
    out = {}
    for k, v in raw.items():
        out[k], sources[f"{fld}.{k}"] = _frac(v, where, f"{fld}.{k}")
    return out


def _latency_table(raw, where, fld) -> tuple[tuple, str]:
    """A collective's latency: one time for every group size, or {p: time} measured at several sizes."""
    v, src = _sourced(raw, where, fld)
    if not isinstance(v, dict):
        return ((0, _time({"value": v, "source": src}, where, fld)[0]),), src
    if not v:
        raise SpecError(where, fld, "needs at least one {devices: time} entry")
    pts = []
    for k, x in v.items():
        n = _int(k, where, f"{fld}.{k}")
        pts.append((n, _time({"value": x, "source": src}, where, f"{fld}.{k}")[0]))
    return tuple(sorted(pts)), src


def _algorithms(raw, where, fld, allowed, sources) -> dict:
    if not isinstance(raw, dict) or not raw:
        raise SpecError(where, fld, f"must map algorithms ({', '.join(allowed)}) to {{latency, efficiency}}")
    _check_keys(raw, allowed, where, f"{fld}.")
    out = {}
    for name, spec in raw.items():
        f = f"{fld}.{name}"
        if not isinstance(spec, dict):
            raise SpecError(where, f, "must be a mapping {latency: ..., efficiency: ..., max_bytes: ...}")
        _check_keys(spec, {"latency", "efficiency", "max_bytes"}, where, f"{f}.")
        _need(spec, ["latency", "efficiency"], where, f"{f}.")
        lat, sources[f"{f}.latency"] = _latency_table(spec["latency"], where, f"{f}.latency")
        eff, sources[f"{f}.efficiency"] = _frac(spec["efficiency"], where, f"{f}.efficiency")
        mx = math.inf
        if spec.get("max_bytes") is not None:
            mx, sources[f"{f}.max_bytes"] = _qty(spec["max_bytes"], where, f"{f}.max_bytes", "bytes", None)
        out[name] = Algorithm(lat, eff, mx)
    if "ring" not in out:
        raise SpecError(where, f"{fld}.ring", "missing: every collective falls back to the ring, so it needs its terms")
    if math.isfinite(out["ring"].max_bytes):
        raise SpecError(where, f"{fld}.ring.max_bytes", "the ring serves every message size; drop max_bytes")
    return out


ACHIEVABLE_KEYS = {"hbm_efficiency", "kernel_latency", "gemm_latency", "gemm_efficiency", "attention_compute",
                   "attention_half_keys", "attention_bandwidth", "attention_latency", "dequant", "link", "network",
                   "sm_count", "gemm_tiles"}
ACHIEVABLE_REQUIRED = ["hbm_efficiency", "kernel_latency", "gemm_latency", "gemm_efficiency", "attention_compute",
                       "attention_half_keys", "attention_bandwidth", "attention_latency"]


def _sourced_int(raw, where, fld, src: dict, minimum=1):
    v, s = _sourced(raw, where, fld)
    src[fld.split(".", 1)[-1]] = s
    return v if isinstance(v, list) else _int(v, where, fld, minimum)


def achievable_from_dict(raw, where: str, fld: str = "achievable") -> Achievable:
    """The `achievable:` block of a hardware spec."""
    if not isinstance(raw, dict):
        raise SpecError(where, fld, "must be a mapping of the achievable-mode terms (docs/specs.md)")
    _check_keys(raw, ACHIEVABLE_KEYS, where, f"{fld}.")
    _need(raw, ACHIEVABLE_REQUIRED, where, f"{fld}.")
    src: dict = {}
    f = lambda k: f"{fld}.{k}"  # noqa: E731
    hbm, src["hbm_efficiency"] = _frac(raw["hbm_efficiency"], where, f("hbm_efficiency"))
    lat = {}
    for k in ("kernel_latency", "gemm_latency", "attention_latency"):
        lat[k], src[k] = _time(raw[k], where, f(k))
    gemm = _per_dtype(raw["gemm_efficiency"], where, f("gemm_efficiency"), src)
    attc = _per_dtype(raw["attention_compute"], where, f("attention_compute"), src)
    half = _sourced_int(raw["attention_half_keys"], where, f("attention_half_keys"), src, minimum=0)
    attb, src["attention_bandwidth"] = _frac(raw["attention_bandwidth"], where, f("attention_bandwidth"))
    deq = {}
    if raw.get("dequant") is not None:
        d = raw["dequant"]
        if not isinstance(d, dict):
            raise SpecError(where, f("dequant"), f"must map weight formats ({', '.join(DEQUANT_FAMILIES)}) to "
                                                 "{bandwidth, compute}")
        _check_keys(d, DEQUANT_FAMILIES, where, f"{fld}.dequant.")
        for fam, spec in d.items():
            g = f"{fld}.dequant.{fam}"
            if not isinstance(spec, dict):
                raise SpecError(where, g, "must be a mapping {bandwidth: ..., compute: ...}")
            _check_keys(spec, {"bandwidth", "compute"}, where, f"{g}.")
            _need(spec, ["bandwidth", "compute"], where, f"{g}.")
            bw, src[f"dequant.{fam}.bandwidth"] = _frac(spec["bandwidth"], where, f"{g}.bandwidth")
            cp, src[f"dequant.{fam}.compute"] = _frac(spec["compute"], where, f"{g}.compute")
            deq[fam] = Dequant(bw, cp)
    link = _algorithms(raw["link"], where, f("link"), ALGORITHMS, src) if raw.get("link") is not None else {}
    net = (_algorithms(raw["network"], where, f("network"), NETWORK_ALGORITHMS, src)
           if raw.get("network") is not None else {})
    sms = _sourced_int(raw["sm_count"], where, f("sm_count"), src) if raw.get("sm_count") is not None else None
    tiles: tuple = ()
    if raw.get("gemm_tiles") is not None:
        v = _sourced_int(raw["gemm_tiles"], where, f("gemm_tiles"), src)
        if not isinstance(v, list) or not v or not all(isinstance(t, list) and len(t) == 2 for t in v):
            raise SpecError(where, f("gemm_tiles"), "must be a list of [rows, cols] tile shapes, e.g. [[128, 128]]")
        tiles = tuple((_int(a, where, f("gemm_tiles")), _int(b, where, f("gemm_tiles"))) for a, b in v)
    if bool(tiles) != bool(sms):
        raise SpecError(where, f("gemm_tiles"), "the wave-quantization model needs both gemm_tiles and sm_count")
    return Achievable(hbm, lat["kernel_latency"], lat["gemm_latency"], gemm, attc, float(half), attb,
                      lat["attention_latency"], deq, link, net, sms, tiles, src)


def link_algorithms(raw, where: str) -> tuple[tuple, str]:
    """The hardware's `link_algorithms` field: the collective algorithms its scale-up link supports."""
    if isinstance(raw, dict):
        _check_keys(raw, {"value", "source"}, where, "link_algorithms.")
        src = _str(raw.get("source"), where, "link_algorithms.source")
        raw = raw.get("value")
    else:
        raise SpecError(where, "link_algorithms", "write {value: [ring, ...], source: \"...\"}")
    if not isinstance(raw, list) or not raw or any(a not in ALGORITHMS for a in raw):
        raise SpecError(where, "link_algorithms", f"must be a list of {', '.join(ALGORITHMS)}; got {raw!r}")
    if "ring" not in raw:
        raise SpecError(where, "link_algorithms", "must include ring (every collective falls back to it)")
    return tuple(raw), src


IMPL_KEYS = {"name", "description", "source", "launch", "layer_overhead", "step_overhead", "kernels", "collectives",
             "step_per_seq", "host_step", "host_per_seq", "prefill_launch", "engine", "kernel_tables", "accumulate",
             "overlap_schedule", "moe_backend"}


def impl_from_dict(data: dict, where: str, key: str = "") -> Impl:
    _check_keys(data, IMPL_KEYS, where)
    _need(data, ["name", "launch", "layer_overhead", "step_overhead", "kernels", "collectives"], where)
    src: dict = {}
    d = data.get("source")
    vals = {}
    for f in ("launch", "layer_overhead", "step_overhead"):
        vals[f], src[f] = _time(data[f], where, f, d)
    for f in ("step_per_seq", "host_step", "host_per_seq", "prefill_launch"):
        if f in data:
            vals[f], src[f] = _time(data[f], where, f, d)
    if "engine" in data:
        eng, src["engine"] = _sourced(data["engine"], where, "engine", d)
        parts = str(eng).split()
        from .kernels import ENGINES

        if len(parts) != 2 or parts[0] not in ENGINES:
            raise SpecError(where, "engine", f"must be '<{'|'.join(ENGINES)}> <version>', e.g. 'vllm 0.24.0'; got {eng!r}")
        vals["engine"], vals["engine_version"] = parts
    if "accumulate" in data:
        acc, src["accumulate"] = _sourced(data["accumulate"], where, "accumulate", d)
        if acc not in ("fp32", "fp16"):
            raise SpecError(where, "accumulate", f"must be fp32 or fp16 (what fp16 GEMMs accumulate in); got {acc!r}")
        vals["accumulate"] = acc
    if "overlap_schedule" in data:
        ov, src["overlap_schedule"] = _sourced(data["overlap_schedule"], where, "overlap_schedule", d)
        if not isinstance(ov, bool):
            raise SpecError(where, "overlap_schedule", f"must be true or false (does the scheduler form the next step "
                                                       f"while one runs); got {ov!r}")
        vals["overlap_schedule"] = ov
    if "moe_backend" in data:  # the MoE backend the engine runs: which MoE kernels' measurements price the experts
        from .moe_backends import MOE_BACKENDS

        names = MOE_BACKENDS.get(vals.get("engine"))
        if names is None:
            raise SpecError(where, "moe_backend", "names a TensorRT-LLM MoE backend (moe_config.backend) or vLLM's "
                                                  f"MARLIN; this profile's engine is {vals.get('engine') or 'not set'}")
        raw = data["moe_backend"]
        be = raw.get("value") if isinstance(raw, dict) else raw
        if not isinstance(be, str) or be.upper() not in names:  # the name before its source: the first thing wrong
            raise SpecError(where, "moe_backend", f"must be one of {', '.join(names)} for {vals['engine']}; got {be!r}")
        be, src["moe_backend"] = _sourced(raw, where, "moe_backend", d)
        vals["moe_backend"] = be.upper()
    if "kernel_tables" in data:  # a setting, not a figure: where measured kernel times come from
        kt = data["kernel_tables"]
        if not isinstance(kt, str) or not kt.strip():
            raise SpecError(where, "kernel_tables", f"must be auto, none or the path of a `perfmodel measure` results.csv; "
                                                    f"got {kt!r}")
        vals["kernel_tables"] = kt.strip()
    kern, src["kernels"] = _sourced(data["kernels"], where, "kernels", d)
    if not isinstance(kern, dict) or not all(isinstance(k, str) and k for k in kern):
        raise SpecError(where, "kernels", f"must map op names to the kernels each launches, e.g. {{attn_av: 0}}; "
                                          f"got {kern!r}")
    kernels = {k: _int(v, where, f"kernels.{k}", 0) for k, v in kern.items()}
    coll, src["collectives"] = _sourced(data["collectives"], where, "collectives", d)
    if not isinstance(coll, list) or not coll or any(a not in ALGORITHMS for a in coll):
        raise SpecError(where, "collectives", f"must be a list of {', '.join(ALGORITHMS)}; got {coll!r}")
    if "ring" not in coll:
        raise SpecError(where, "collectives", "must include ring (every collective falls back to it)")
    return Impl(name=_str(data["name"], where, "name"), kernels=kernels, collectives=tuple(coll),
                description=" ".join(str(data.get("description") or "").split()), sources=src, key=key or where,
                **vals)
