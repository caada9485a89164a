"""The hardware spec: the Hardware record, its strict reading from a YAML mapping, and its checked edit
(Hardware.replace). Quantities are SI (bytes, bytes/s, FLOP/s, W, s). perfmodel.specs re-exports all of it."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .efficiency import Achievable, achievable_from_dict, link_algorithms
from .errors import SpecError
from .fields import PEAK_KEYS, _check_keys, _int, _need, _qty, _str


# ---------------------------------------------------------------- hardware
_HW_QTY = {"memory_capacity": "bytes", "memory_bandwidth": "bytes/s", "interconnect_bandwidth": "bytes/s",
           "l2_cache": "bytes", "tdp": "W", "kernel_overhead": "s",
           # multi-device serving (docs/parallelism.md): alpha-beta costs of the scale-up link and the network
           "link_bandwidth": "bytes/s", "link_latency": "s", "network_bandwidth": "bytes/s", "network_latency": "s",
           # cost and energy (docs/cost.md): a measured board power, and a rental price per device-hour
           "power": "W", "price_per_hour": "USD/h",
           # calibrated by `perfmodel measure`: how often a multi-row product moves its weight operand,
           # and how often decode attention's per-head products move the K/V cache
           "gemm_weight_passes": "ratio", "attention_kv_passes": "ratio"}


@dataclass
class Hardware:
    """An accelerator, in SI units. `sources` maps each field to its datasheet citation."""

    name: str
    memory_capacity: float  # bytes
    memory_bandwidth: float  # bytes/s
    peak_flops: dict  # dtype -> FLOP/s, dense
    interconnect_bandwidth: float | None = None  # bytes/s per device
    l2_cache: float | None = None  # bytes
    tdp: float | None = None  # W
    kernel_overhead: float | None = None  # s added to every op (launch/dispatch); calibrated by measurement
    link_bandwidth: float | None = None  # bytes/s per device per direction on the scale-up link (NVLink, ICI, ...)
    link_latency: float | None = None  # s per message on that link
    devices_per_node: int | None = None  # devices joined by the scale-up link
    network_bandwidth: float | None = None  # bytes/s per device per direction between nodes (e.g. 400 Gb/s IB)
    network_latency: float | None = None  # s per message between nodes
    power: float | None = None  # W, a measured board power under load (energy uses it before tdp)
    price_per_hour: float | None = None  # USD per device-hour
    gemm_weight_passes: float | None = None  # weight traffic multiplier of a matmul with > 1 row (BLAS packing)
    attention_kv_passes: float | None = None  # the same for the K/V read of attention (None: gemm_weight_passes)
    link_algorithms: tuple | None = None  # collective algorithms the scale-up link supports (None: the default set)
    achievable: Achievable | None = None  # what good kernels reach on it (the achievable mode's terms)
    sources: dict = field(default_factory=dict)
    description: str = ""
    key: str = ""  # catalog name or path it was loaded from

    def peak(self, dtype: str) -> float:
        try:
            return self.peak_flops[dtype]
        except KeyError:
            have = ", ".join(self.peak_flops) or "none"
            raise SpecError(self.key or self.name, f"peak_flops.{dtype}",
                            f"{self.name} has no {dtype} peak (it has: {have})") from None

    def ridge(self, dtype: str = "bf16") -> float:
        """The accelerator's intensity: peak FLOP/s / bandwidth (FLOP per byte)."""
        return self.peak(dtype) / self.memory_bandwidth

    def replace(self, *args, **kw) -> "Hardware":
        """A modified copy, each changed field checked as a file's would be: quantities as numbers in SI units
        or texts with units ('4 TB/s'), peak_flops as {dtype: value}. Its source becomes 'code'."""
        _keywords_only(self, args)
        return _replace_hardware(self, kw)


def hardware_from_dict(data: dict, where: str, key: str = "") -> Hardware:
    allowed = {"name", "source", "description", "peak_flops", "devices_per_node", "link_algorithms", "achievable",
               *_HW_QTY}
    _check_keys(data, allowed, where)
    _need(data, ["name", "memory_capacity", "memory_bandwidth", "peak_flops"], where)
    default_src = data.get("source")
    vals, sources = {}, {}
    for fld, dim in _HW_QTY.items():
        if data.get(fld) is not None:
            vals[fld], sources[fld] = _qty(data[fld], where, fld, dim, default_src)
    for fld in ("gemm_weight_passes", "attention_kv_passes"):  # reads of the streamed operand: at least one
        if fld in vals and vals[fld] < 1:
            raise SpecError(where, fld, f"{vals[fld]:g} is below 1: it counts reads of the streamed operand "
                                        "(1 = read once, as a GPU GEMM does)")
    pf = data["peak_flops"]
    if not isinstance(pf, dict) or not pf:
        raise SpecError(where, "peak_flops", "must be a mapping dtype: FLOP/s, e.g. {bf16: 989 TFLOP/s}")
    _check_keys(pf, PEAK_KEYS, where, "peak_flops.")
    peaks = {}
    for k, v in pf.items():
        if v is None:
            continue
        peaks[k], sources[f"peak_flops.{k}"] = _qty(v, where, f"peak_flops.{k}", "flop/s", default_src)
    if not peaks:
        raise SpecError(where, "peak_flops", "needs at least one dtype")
    dpn = data.get("devices_per_node")
    if dpn is not None:
        if isinstance(dpn, dict):
            _check_keys(dpn, {"value", "source"}, where, "devices_per_node.")
            sources["devices_per_node"] = str(dpn.get("source") or default_src or "")
            dpn = dpn.get("value")
        vals["devices_per_node"] = _int(dpn, where, "devices_per_node")
    if data.get("link_algorithms") is not None:
        vals["link_algorithms"], sources["link_algorithms"] = link_algorithms(data["link_algorithms"], where)
    if data.get("achievable") is not None:
        vals["achievable"] = achievable_from_dict(data["achievable"], where)
    return Hardware(name=_str(data["name"], where, "name"), peak_flops=peaks, sources=sources,
                    description=str(data.get("description") or ""), key=key or where, **vals)


def _keywords_only(spec, args) -> None:
    if args:
        raise SpecError(f"<{spec.name} modified>", None, f"replace takes field=value keywords only, got {len(args)} "
                                                         "positional value(s)")


def _replace_hardware(hw: Hardware, kw: dict) -> Hardware:
    where = f"<{hw.name} modified>"
    _check_keys(kw, {"name", "description", "peak_flops", "devices_per_node", "link_algorithms", "achievable",
                     *_HW_QTY}, where)
    vals, sources = {}, dict(hw.sources)
    for fld, v in kw.items():
        if fld in _HW_QTY:
            vals[fld] = None if v is None else _qty(v, where, fld, _HW_QTY[fld], "code")[0]
            sources[fld] = "code"
        elif fld == "peak_flops":
            if not isinstance(v, dict) or not v:
                raise SpecError(where, "peak_flops", "must be a mapping dtype: FLOP/s, e.g. {'bf16': 989e12}")
            _check_keys(v, PEAK_KEYS, where, "peak_flops.")
            vals[fld] = {k: _qty(x, where, f"peak_flops.{k}", "flop/s", "code")[0] for k, x in v.items() if x is not None}
            sources.update({f"peak_flops.{k}": "code" for k in vals[fld]})
        elif fld == "devices_per_node":
            vals[fld] = None if v is None else _int(v, where, fld)
        elif fld in ("name", "description"):
            vals[fld] = _str(v, where, fld)
        elif fld == "link_algorithms":
            vals[fld] = None if v is None else link_algorithms(v, where)[0]
        elif v is not None and not isinstance(v, Achievable):
            raise SpecError(where, fld, f"must be an Achievable (or None), got {type(v).__name__}")
        else:
            vals[fld] = v
    for fld in ("gemm_weight_passes", "attention_kv_passes"):
        if vals.get(fld) is not None and vals[fld] < 1:
            raise SpecError(where, fld, f"{vals[fld]:g} is below 1: it counts reads of the streamed operand")
    return dataclasses.replace(hw, sources=sources, **vals)
