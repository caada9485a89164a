"""How one op of the op list is priced: the roofline's ideal bound, or what a good implementation achieves.

One pricing, two parameter sets (docs/derivations.md, "Achievable time", derives every term):

- roofline: every efficiency is 1 and every overhead 0. An op takes max(FLOPs / peak, bytes /
  bandwidth); a collective takes the cheapest algorithm the link supports at the full link bandwidth
  with one link latency per sequential step. It is an ideal bound: no real system is faster.
- achievable: the hardware spec's `achievable:` block (microbenchmark-level: bandwidth tests, GEMM,
  attention and collective benchmarks) and an implementation profile (hardware/impl/*.yaml: kernel
  launches, CUDA graphs, the scheduler, which ops share a kernel, which collectives the stack has).

Per op instance, with P the tensor peak of its format, BW the datasheet bandwidth (lecture notation):

  compute    t_c = FLOPs / (P * e_gemm * e_shape * e_dequant_c)          (matmul)
                   FLOPs / (P * e_attn_c * keys / (keys + half_keys))     (attention)
  memory     t_m = bytes / (BW * e_hbm * e_dequant_bw)                    (matmul, vector)
                   bytes / (BW * e_attn_bw)                               (attention)
  device     t_gpu = max(t_c, t_m) + kernels * latency   (gemm_latency, attention_latency or kernel_latency)
  host       t_cpu = kernels * launch (+ layer_overhead on the first op of a layer)
                     + kernels * prefill_launch     (a step holding a prompt, run outside the CUDA graphs)
  step       max(sum t_gpu, sum t_cpu) + step_overhead        (the host queues kernels ahead of the GPU)

  collective t = min over algorithms a of  steps_a(p) * latency_a + bytes_a(p, n) / (e_a * link bandwidth)

`kernels` is 0 for an op the implementation runs inside another op's kernel (FlashAttention's AV,
a residual add fused into the next norm), else 1. Every efficiency lies in (0, 1], every overhead is
>= 0 and every achievable collective latency is >= the link's one-hop latency, so per op the
achievable time is never below the roofline's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .efficiency import ALGORITHMS, DEFAULT_LINK_ALGORITHMS, NETWORK_ALGORITHMS, Achievable, Algorithm, Impl, \
    dequant_family
from .errors import SpecError
from .formats import get_format, is_weight_only
from .ops import ATTENTION, COMM, MATMUL, Layout, Op, Precision
from .specs import Hardware

MODES = ("roofline", "simple", "achievable")
DEFAULT_IMPL = "graphs"


def steps_and_bytes(coll: str, alg: str, p: float, n):
    """(sequential steps, bytes each device sends per direction) of one collective over p devices with
    an n-byte message per device (docs/derivations.md, "Collectives")."""
    if coll == "send":
        return 1.0, n
    if coll in ("allgather", "alltoall"):  # every device ends with (p-1)/p of the data from its peers
        return (1.0 if alg in ("direct", "deepep") else p - 1.0), (p - 1.0) / p * n
    if alg == "ring":  # reduce-scatter then all-gather around the ring
        return 2.0 * (p - 1.0), 2.0 * (p - 1.0) / p * n
    if alg == "tree":  # double binary tree (NCCL): up and down log2(p) levels, the ring's bytes
        return 2.0 * math.ceil(math.log2(p)), 2.0 * (p - 1.0) / p * n
    if alg == "oneshot":  # every device reads every peer's whole buffer and reduces locally
        return 1.0, (p - 1.0) * n
    if alg == "twoshot":  # reduce-scatter and all-gather, each one step of direct peer access
        return 2.0, 2.0 * (p - 1.0) / p * n
    if alg == "nvls":  # the NVSwitch reduces: each device sends its buffer once (and gets the sum back)
        return 2.0, 1.0 * n
    raise ValueError(f"unknown algorithm {alg!r}")


def remote_nodes(E: float, k: int, m: float) -> float:
    """The other nodes a token's k experts (of E, E/m on each of m nodes, routed uniformly) live on, on average:
    (m - 1)(1 - C(E - E/m, k) / C(E, k)). An expert all-to-all across nodes (DeepEP's internode kernels) sends a
    token once to each of them and fans it out over NVLink there, so these copies are all that must cross."""
    miss = 1.0
    for i in range(int(k)):  # C(E - E/m, k) / C(E, k) as a product
        miss *= max(E - E / m - i, 0.0) / (E - i)
    return (m - 1.0) * (1.0 - miss)


def link_of(hw: Hardware, layout: Layout, group: str) -> tuple[float, float, str]:
    """(bandwidth per direction, one-hop latency, "link" or "network") of the link a device group uses.

    Devices are placed tp innermost, then ep, then pp: a group stays on the scale-up link (NVLink,
    ICI) while its span fits in one node of devices_per_node, and uses the network beyond that.
    """
    span = {"tp": layout.tp, "ep": layout.tp * layout.ep, "pp": layout.tp * layout.ep * layout.pp}[group]
    if span > 1 and not hw.devices_per_node and not hw.network_bandwidth:  # name what is missing first
        raise SpecError(hw.key or hw.name, "devices_per_node", f"is missing: a {group} group of {span} devices needs "
                                                               "devices_per_node and link_bandwidth (devices in one "
                                                               "node and their link), or network_bandwidth; add "
                                                               "them to the hardware spec")
    if span <= (hw.devices_per_node or 1):
        bw, lat, name = hw.link_bandwidth, hw.link_latency, "link"
    else:
        bw, lat, name = hw.network_bandwidth, hw.network_latency, "network"
    if not bw:
        what = "link_bandwidth" if name == "link" else "network_bandwidth"
        fix = ("add it to the hardware spec" if name == "link" else
               f"add it to the hardware spec, or, for {span} devices in one box, --set devices_per_node={span}")
        raise SpecError(hw.key or hw.name, what, f"is needed for a {group} group of {span} devices "
                                                 f"(devices_per_node={hw.devices_per_node or 1}); {fix}")
    return bw, lat or 0.0, name


def crosses_nodes(hw: Hardware, layout: Layout) -> bool:
    """True when some collective group of the layout spans more than one node."""
    return layout.tp * layout.ep * layout.pp > (hw.devices_per_node or 1)


def missing_data(hw: Hardware, layout: Layout, mode: str = "roofline") -> list[str]:
    """The spec fields a layout's collectives need but the spec lacks (their cost is then optimistic):
    network_latency when a group crosses nodes; in the achievable mode, the measured collectives."""
    out = []
    multi = layout.tp * layout.ep * layout.pp > 1
    if crosses_nodes(hw, layout) and not hw.network_latency:
        out.append("network_latency")
    if mode == "achievable" and multi and hw.achievable is not None:
        if not hw.achievable.link:
            out.append("achievable.link")
        if crosses_nodes(hw, layout) and not hw.achievable.network:
            out.append("achievable.network")
    return out


@dataclass(frozen=True)
class TimeModel:
    """The parameters one op is priced with (see the module docstring); `roofline()` is the ideal set."""

    mode: str
    hbm: float = 1.0
    kernel_latency: float = 0.0
    gemm_latency: float = 0.0
    gemm: dict | None = None  # peak key -> efficiency (None: 1 for every dtype)
    attn_compute: dict | None = None
    attn_half_keys: float = 0.0
    attn_bandwidth: float = 1.0
    attn_latency: float = 0.0
    dequant: dict | None = None  # family -> Dequant (None: 1, 1)
    sm_count: int | None = None
    tiles: tuple = ()
    launch: float = 0.0
    layer_overhead: float = 0.0
    step_overhead: float = 0.0
    kernels: dict | None = None  # op name -> kernels it launches (default 1)
    link: dict | None = None  # algorithm -> Algorithm (None: ideal on the hardware's algorithm set)
    network: dict | None = None
    where: str = ""  # the spec these terms came from (for error messages)
    step_per_seq: float = 0.0  # s per sequence in the step, not overlapped (the engine's step loop)
    host_step: float = 0.0  # s per step of host work an async scheduler overlaps with the GPU
    host_per_seq: float = 0.0  # s per sequence of that overlapped host work
    prefill_launch: float = 0.0  # s of host time per op of a step that holds a prompt (no CUDA graph)
    kernels_table: object = None  # perfmodel.kernels.KernelSet: measured per-op times (None: the datasheet model)
    # fp16 GEMMs at the FP16-accumulate rate (peak_flops.fp16_acc16, where a part has a faster one): "max" for the
    # roofline (a bound takes the fastest rate), else the implementation's accumulate dtype (fp32 or fp16)
    accumulate: str = "max"
    # the MoE backend the engine was told to run (TensorRT-LLM's moe_config.backend, vLLM's MARLIN; "": the fastest
    # measured kernel of any backend; AUTO: what TensorRT-LLM resolves it to, moe_backends.trtllm_auto_moe): the MoE
    # tables of that backend price the experts, none: the datasheet
    moe_backend: str = ""

    # -- construction ---------------------------------------------------------------------------
    @staticmethod
    def roofline() -> "TimeModel":
        return TimeModel("roofline")

    @staticmethod
    def achievable(hw: Hardware, impl: Impl) -> "TimeModel":
        """The profile's kernel_tables: "auto" (AIConfigurator's tables for its engine when the extra is installed),
        "none", or a `perfmodel measure` results.csv / output folder (`--set impl.kernel_tables=PATH`)."""
        a: Achievable | None = hw.achievable
        where = hw.key or hw.name
        if a is None:
            raise SpecError(where, "achievable", f"{hw.name} has no achievable-mode terms; add an `achievable:` "
                                                 "block (docs/specs.md) or start the file with `base:` a catalog device")
        keep = set(impl.collectives)
        # a block without measured collectives prices them at the ideal bound (missing_data() says so)
        link = {k: v for k, v in a.link.items() if k in keep} or None
        net = {k: v for k, v in a.network.items() if k in keep} or None
        from . import kernels as K

        choice = impl.kernel_tables
        if choice == "none":
            ks = None
        elif choice == "auto":
            ks = K.load(hw, impl.engine, impl.engine_version, exact=impl.exact_version) if impl.engine else None
        else:
            ks = K.load(hw, None, None, choice)
        return TimeModel("achievable", a.hbm_efficiency, a.kernel_latency, a.gemm_latency, dict(a.gemm_efficiency),
                         dict(a.attention_compute), a.attention_half_keys, a.attention_bandwidth, a.attention_latency,
                         dict(a.dequant), a.sm_count, a.gemm_tiles, impl.launch, impl.layer_overhead,
                         impl.step_overhead, dict(impl.kernels), link, net, where, impl.step_per_seq, impl.host_step,
                         impl.host_per_seq, impl.prefill_launch, ks, impl.accumulate, impl.moe_backend)

    def ideal(self, hw: Hardware) -> "TimeModel":
        """This model with every efficiency 1, every overhead 0, no size limits, and collectives at the link's
        one-hop latency on every algorithm the hardware supports: it prices exactly as the roofline does."""
        algs = lambda names: {a: Algorithm(((0, 0.0),), 1.0) for a in names}  # noqa: E731
        # None: efficiency 1 for every dtype and weight format, one kernel per op (at no cost here)
        return replace(self, hbm=1.0, kernel_latency=0.0, gemm_latency=0.0, gemm=None, attn_compute=None,
                       attn_half_keys=0.0, attn_bandwidth=1.0, attn_latency=0.0, dequant=None, sm_count=None, tiles=(),
                       launch=0.0, layer_overhead=0.0, step_overhead=0.0, step_per_seq=0.0, host_step=0.0,
                       host_per_seq=0.0, prefill_launch=0.0, kernels_table=None, accumulate="max", kernels=None,
                       link=algs(hw.link_algorithms or DEFAULT_LINK_ALGORITHMS), network=algs(NETWORK_ALGORITHMS))

    # -- pieces ---------------------------------------------------------------------------------
    def _eff(self, table: dict | None, key: str, what: str) -> float:
        if table is None:
            return 1.0
        if key not in table:
            raise SpecError(self.where, f"achievable.{what}.{key}", f"missing: no measured {what} for {key} on this "
                                                                    f"device (it has: {', '.join(table) or 'none'})")
        return table[key]

    def _dequant(self, fmt: str):
        fam = dequant_family(fmt)  # called only where self.dequant is a table
        if fam not in self.dequant:  # priced as the 16-bit GEMM, and said: an optimistic figure, not a refusal
            import warnings

            from .errors import DataWarning

            warnings.warn(f"{self.where} has no measured weight-only {fam} kernel (achievable.dequant.{fam}; it has "
                          f"{', '.join(self.dequant) or 'none'}): its {fam} GEMMs are priced at the 16-bit GEMM's "
                          "efficiencies, an optimistic figure", DataWarning, stacklevel=3)
            return 1.0, 1.0
        d = self.dequant[fam]
        return d.bandwidth, d.compute

    def shape_efficiency(self, gemm, row_tile: float | None = None):
        """Tile quantization: useful output elements / the elements of the tiles that cover them, with the
        library choosing the tile that wastes least (NVIDIA, Matrix Multiplication Background User's Guide:
        'Tile quantization'). Wave quantization is not charged: stream-K (CUTLASS 3 'StreamK' tile scheduler;
        Osama et al., 'Stream-K', PPoPP 2023) splits the last wave's tiles along K across the idle SMs, and
        split-K does the same for a product with fewer tiles than SMs, so a partial wave costs its work only.
        A product with fewer rows than the smallest tile runs as a skinny kernel (GEMV, split-K) whose rows
        are not padded. row_tile: the kernel's own row block (weight-only kernels: Marlin's 16 rows)."""
        if not self.tiles or gemm is None:
            return 1.0
        rows, cols, inst = gemm
        rows, inst = np.asarray(rows, float), np.maximum(np.asarray(inst, float), 1.0)
        per = rows / inst  # rows of one computing instance (expert, head)
        tiles = ((row_tile, tc) for _, tc in self.tiles) if row_tile else self.tiles
        floor_rows = row_tile or min(tr for tr, _ in self.tiles)
        best = None
        for tr, tc in tiles:
            # below the smallest tile's rows a skinny (GEMV, split-K) kernel runs instead: its rows are not padded
            # beyond whole rows (1-row blocks: ceil(per) rows)
            tr = np.where(per < floor_rows, 1.0, tr)
            work = np.ceil(inst) * np.ceil(per / tr) * tr * math.ceil(cols / tc) * tc
            best = work if best is None else np.minimum(best, work)
        return rows * cols / best  # <= 1: work >= ceil(inst) * per * cols >= rows * cols

    def collective(self, op: Op, hw: Hardware, layout: Layout):
        """(time, bytes each device sends, "link" or "network") of one collective op, the cheapest algorithm
        chosen per point (as NCCL's tuner does: the least predicted time).

        Inside a node: t_a = max(L_a(p), steps_a(p) * hop) + bytes_a(p, n) / (e_a * link bandwidth).
        A group of p devices with g of them in each of m nodes runs hierarchically (as NCCL does): its
        inter-node steps (those of the same algorithm over m ranks) cost the network's hop, the others the
        link's, and all its bytes cross the slower network; achievable: L = L_net,a(m) + L_link,ring(g).
        """
        bw, hop, kind = link_of(hw, layout, op.link)
        p = float(op.peers)
        stride = {"tp": 1, "ep": layout.tp, "pp": layout.tp * layout.ep}[op.link]
        g = float(min(op.peers, max(1, (hw.devices_per_node or 1) // stride)))  # group members per node
        m = float(math.ceil(p / g))  # nodes the group spans
        net = kind == "network"
        names = NETWORK_ALGORITHMS if net else (hw.link_algorithms or DEFAULT_LINK_ALGORITHMS)
        table = self.network if net else self.link
        if table is not None and "ring" not in table:
            raise SpecError(self.where, f"achievable.{kind}", f"is missing: a {op.link} group of this layout uses the "
                                                              f"{kind}, and its collectives need measured terms")
        n = np.asarray(op.msg, float)
        if op.coll == "alltoall" and table is not None and "deepep" in table:
            names = ("deepep",)  # serving engines run the EP all-to-all in DeepEP's kernels, not NCCL's
        steps_at = lambda name, q: steps_and_bytes(op.coll, name, float(q), 1.0)[0]  # noqa: E731
        best_t = best_b = None
        for name in names:
            if op.coll not in ALGORITHMS[name] or (table is not None and name not in table):
                continue
            steps, sent = steps_and_bytes(op.coll, name, p, n)
            if net:  # inter-node steps on the network's hop, the rest on the link's
                inter = steps_at(name, m)
                floor = inter * hop + max(steps - inter, 0.0) * (hw.link_latency or 0.0)
            else:
                floor = steps * hop
            if table is None:  # the roofline: full bandwidth, one hop per sequential step
                if net and op.coll == "alltoall" and op.moe is not None:  # a token crosses once per remote node
                    _, _, _, k, E, _, _ = op.moe
                    sent = n / k * remote_nodes(E, k, m)  # n = M k D bytes: M D bytes a copy
                t = floor + sent / bw
            else:
                a = table[name]
                scale = (lambda q, name=name: steps_at(name, q)) if name in ("ring", "tree") else None
                lat = a.at(m if net else p, scale)
                if net and g > 1 and self.link is not None and "ring" in self.link:
                    lat += self.link["ring"].at(g, lambda q: steps_at("ring", q))  # the intra-node part
                t = np.maximum(lat, floor) + sent / (a.efficiency * bw)
                t = np.where(n <= a.max_bytes, t, np.inf)
            t = t + 0 * n
            if best_t is None:
                best_t, best_b = t, sent + 0 * n
            else:
                better = t < best_t
                best_t, best_b = np.where(better, t, best_t), np.where(better, sent, best_b)
        return best_t, best_b, kind

    # -- one op list ------------------------------------------------------------------------------
    def price(self, ops: list[Op], hw: Hardware, prec: Precision, layout: Layout | None = None, comm: bool = True,
              sources: list | None = None):
        """Per op instance: (t_compute, t_memory, t_gpu, bytes, t_cpu, t_step). `sources`, if given, receives
        per op what priced it: "datasheet", or the measured table's name (perfmodel.kernels)."""
        lay = layout or Layout()
        _, af, kf, _ = prec.formats()
        tensor_key = af.peak
        tensor = hw.peak(tensor_key)
        if tensor_key == "fp16" and "fp16_acc16" in hw.peak_flops and self.accumulate in ("max", "fp16"):
            tensor = hw.peak("fp16_acc16")  # one rule: the rate of what the GEMMs accumulate in (a bound: the fastest)
        # attention computes in its own dtype, not the GEMMs': fp8 only when both its query (the activations) and
        # its cache are fp8 (FA3's fp8 forward), else 16-bit (vLLM and SGLang dequantize an fp8 cache into a
        # 16-bit kernel); no attention kernel has an fp4 form
        attn_key = "fp8" if (af.peak in ("fp8", "fp4") and kf.bits == 8 and "fp8" in hw.peak_flops) else \
            ("bf16" if "bf16" in hw.peak_flops else tensor_key)
        vector = hw.peak_flops.get("fp32", tensor)
        bw = hw.memory_bandwidth
        fixed = hw.kernel_overhead or 0.0  # a calibrated per-kernel cost (perfmodel measure; 0 for datasheet specs)
        passes = {MATMUL: hw.gemm_weight_passes or 1.0,  # calibrated: a BLAS that packs the streamed operand moves it again
                  ATTENTION: hw.attention_kv_passes or hw.gemm_weight_passes or 1.0}
        e_gemm = self._eff(self.gemm, tensor_key, "gemm_efficiency")
        kernels = self.kernels or {}
        ks = self.kernels_table
        out = []
        for op in ops:
            src = "datasheet"
            launch = self.launch + (self.prefill_launch if op.phase == "prefill" else 0.0)  # host s per kernel
            if op.kind == COMM:
                if not comm:
                    out.append((0.0, 0.0, 0.0, 0.0, 0.0, 0.0))
                    if sources is not None:
                        sources.append(src)
                    continue
                t, sent, kind = self.collective(op, hw, lay)
                if ks is not None and op.coll == "allreduce" and kind == "link":
                    # the engine's own all-reduce call, timed over its whole range (it picks custom or NCCL by
                    # size itself). On a switched NVLink platform (HGX, NVL72: its peers one hop apart, so the spec
                    # lists one-shot) that is the platform's time, not undercut by the datasheet model's (whose B200
                    # one-shot latency is NCCL 2.27's symmetric-memory kernel, 3 us; the engines' calls take 5-8 us).
                    # A PCIe card's table is one server's topology (P2P through a switch or the root complex):
                    # there the faster of it and the model stands
                    tm_ = ks.allreduce_time(op.peers, op.msg)
                    if tm_ is not None:
                        switched = "oneshot" in (hw.link_algorithms or ())
                        t, src = (tm_ + 0.0 * t if switched else np.minimum(t, tm_)), ks.source  # shaped as t
                elif ks is not None and op.coll == "alltoall" and op.moe is not None:
                    # the EP all-to-all runs in the engine's kernels: TensorRT-LLM's NVLink ones on a rack with
                    # multi-node NVLink (kernels._load_nvlink_alltoall), else DeepEP's: their measured time
                    M, D, _, topk, E, _, ep = op.moe
                    nodes = max(1, math.ceil(ep / (hw.devices_per_node or 1)))
                    phase = "dispatch" if op.name.endswith("dispatch") else "combine"
                    tm_ = ks.alltoall_ep_time(phase, _A2A_DTYPE.get(af.peak, "bfloat16"), D, topk, E, ep, M) \
                        if ks.alltoall_ep and nodes == 1 else None  # NVLink kernels need the group in one domain
                    if tm_ is None:
                        tm_ = ks.alltoall_time(phase, D, topk, E, nodes, M)
                    if tm_ is not None:
                        t, src = tm_ + 0 * t, ks.source
                out.append((0.0 * t, t, t, sent, launch, 0.0))
                if sources is not None:
                    sources.append(src)
                continue
            k = float(kernels.get(op.name, 1))  # kernels this op launches (0: inside another op's kernel)
            b = op.bytes
            measured = None
            if op.kind == MATMUL:
                e_c, e_m = e_gemm, self.hbm
                wf = get_format(op.wfmt) if op.wfmt else None
                row_tile = None
                if self.dequant is not None and wf is not None and wf.bits < 16:
                    if is_weight_only(wf, af):  # dequantized on the fly: a measured kernel is needed
                        d_bw, d_c = self._dequant(op.wfmt)
                        e_m, e_c = e_m * d_bw, e_c * d_c
                        row_tile = 16.0  # Marlin-style kernels: blocks of 16 rows (IST-DASLab/marlin: thread_m_blocks x 16)
                    elif dequant_family(op.wfmt) in self.dequant:  # W8A8 etc.: its kernel's streaming rate, if measured
                        e_m = e_m * self.dequant[dequant_family(op.wfmt)].bandwidth
                if ks is not None:
                    measured = _measured_gemm(ks, op, wf, af, hw, self.moe_backend)
                e_c = e_c * self.shape_efficiency(op.gemm, row_tile)
                tc, tm = op.flops / (tensor * e_c), b / (bw * e_m)
                latency = self.gemm_latency
            elif op.kind == ATTENTION:
                e_c = self._eff(self.attn_compute, attn_key, "attention_compute")
                keys = getattr(op, "keys", None)
                if keys is not None and self.attn_half_keys:
                    e_c = e_c * keys / (keys + self.attn_half_keys)  # short key ranges leave the kernel's tiles idle
                tc, tm = op.flops / (hw.peak(attn_key) * e_c), b / (bw * self.attn_bandwidth)
                latency = self.attn_latency
                if ks is not None and op.attn is not None:
                    measured = _measured_attention(ks, op, kf, hw.peak(attn_key), bw)
            else:
                tc, tm = op.flops / vector, b / (bw * self.hbm)
                latency = self.kernel_latency
            if ks is not None and op.gdn is not None:  # roofline peak: the attention rate (core), CUDA cores (conv)
                measured = _measured_gdn(ks, op, hw.peak(attn_key) if op.kind == ATTENTION else vector, bw)
            pack = 0.0
            kp = passes.get(op.kind, 1.0)
            if kp != 1.0:
                # a BLAS that packs the streamed operand (weights; a K/V head shared by several query rows)
                # copies it (k - 1) more times, on the same cores and before the FMA kernel: it adds to
                # the time instead of hiding under max()
                streamed = op.w_read if op.kind == MATMUL else op.kv_read
                extra = np.where(np.asarray(op.rows) > 1, (kp - 1.0) * streamed, 0.0)
                b, pack = b + extra, extra / bw
            if measured is not None:  # t = max(r, 1) x the op's own ideal time: r carries latency, tiles, efficiency
                r, peak = measured  # and whatever the kernel paid beside (kernel_overhead, packing): not added again
                tc, tm, pack = op.flops / peak * r, op.bytes / bw * r, 0.0
                t_gpu = np.maximum(tc, tm)
                src = ks.source
            else:
                t_gpu = np.maximum(tc, tm) + pack + fixed + k * latency
            t_cpu = k * launch + (self.layer_overhead if op.name == "attn_norm" else 0.0)
            t_step = 0.0
            if op.name == "embed":  # once per step: the engine loop's fixed host time
                t_step, t_cpu = self.step_overhead, t_cpu + self.host_step  # host_step: overlapped, under max()
            elif op.name == "lm_head" and (self.step_per_seq or self.host_per_seq):
                n_seq = op.gemm[0]  # its rows are the sequences that sample a token this step
                t_step, t_cpu = self.step_per_seq * n_seq, t_cpu + self.host_per_seq * n_seq
            out.append((tc, tm + pack, t_gpu, b, t_cpu, t_step))
            if sources is not None:
                sources.append(src)
        return out


# table dtypes (perfmodel.kernels): dense GEMMs by the activations' bits (4: NVFP4 W4A4), fused MoE kernels by
# the weights' format family
_GEMM_DTYPE = {16: "bfloat16", 8: "fp8", 4: "nvfp4"}
_A2A_DTYPE = {"fp4": "nvfp4", "fp8": "fp8"}  # the dispatched payload: quantized before the all-to-all (TensorRT-LLM's post-quant dispatch)
# GEMMs whose input arrives already in fp8 under static per-tensor scales, as AIConfigurator prices them
# (sdk/models/llama.py: low_precision_input on proj_gemm and ffn2_gemm): no quantize kernel of their own
_FP8_INPUT = frozenset({"o_proj", "mlp_down"})
_MOE_DTYPE = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8", "int4": "int4_wo", "fp4": "w4a16_mxfp4"}


def _measured_gemm(ks, op: Op, wf, af, hw: Hardware, moe_backend: str = ""):
    """(max(r, 1), the peak r is relative to) of a matmul from the measured tables, or None. `moe_backend` names
    the MoE backend whose tables price the experts (TimeModel.moe_backend)."""
    if op.gemm is None or wf is None or op.flops is None:
        return None
    rows, cols, inst = op.gemm
    if op.moe is not None:  # a fused MoE kernel: both expert GEMMs take the ratio of the whole measured kernel
        dt = _MOE_DTYPE.get(dequant_family(wf.name))  # fp32 experts: no measured kernel
        # the checkpoint's expert format, what TensorRT-LLM's AUTO backend choice reads: MXFP4 (gpt-oss) apart from
        # NVFP4, which share the fp4 family and, with fp4 activations, the nvfp4 tables
        fmt = ("w4a16_mxfp4" if wf.name.startswith("mxfp4") else "nvfp4") if dt == "w4a16_mxfp4" else dt
        if dt is None:
            return None
        tokens, D, F, topk, E, tp, ep = op.moe
        # fp8 MoE checkpoints are block-scaled (DeepSeek-V3/R1, Qwen3 FP8, MiniMax-M2: config.json
        # quantization_config weight_block_size [128, 128]): fp8_block first, per-tensor fp8 where its shape is nearer
        dts = ["fp8_block", "fp8"] if dt == "fp8" else [dt]
        if fmt == "w4a16_mxfp4" and af.peak in ("fp4", "fp8"):
            # MXFP4 experts with 8- or 4-bit activations run MXFP4 x MXFP8 (W4A8): no engine pairs MXFP4 weights with
            # FP4 activations. TensorRT-LLM's gpt-oss guide: Blackwell, "MXFP8 | MXFP4 | TRTLLM", its default;
            # vLLM: VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 (FlashInfer's trtllm-gen kernel). The W4A16 table where
            # its shape is nearer (vLLM's tables time W4A8 only at DeepSeek-V4's shapes)
            dts = ["w4a8_mxfp4_mxfp8", "w4a16_mxfp4"]
        elif dt == "w4a16_mxfp4" and af.peak == "fp4":
            dts = ["nvfp4"]
        from .kernels import _PEAK
        from .moe_backends import trtllm_auto_moe

        # a named backend runs the checkpoint's format (the first) and prices the nearer format's shape with it too
        be = (trtllm_auto_moe("fp8_block" if fmt == "fp8" else fmt, ks.system) if moe_backend == "AUTO" else
              moe_backend) if moe_backend else None
        shape, bes = (D, F, topk, E, tp, ep), None if be is None else dict.fromkeys(dts, be)
        r = ks.moe_ratio(dts, shape, tokens, bes, hw)
        if r is None:
            return None
        dt = ks.moe_dtype(dts, shape, bes)  # the table that priced it: r is relative to its ideal, at its peak
        return np.maximum(r, 1.0), hw.peak(_PEAK[dt]) if _PEAK[dt] in hw.peak_flops else hw.peak(af.peak)
    if np.any(np.asarray(inst) != 1.0):  # per-head or per-expert products: no dense GEMM table
        return None
    # the table of what the tensor cores compute in: W16A16, W8A8, W4A8 (fp8), W4A4 (nvfp4); a GEMM whose weights
    # stay in 16 bits (the router, the LM head) runs a 16-bit kernel whatever the other layers' activations, and
    # its ratio is to the 16-bit ideal (the op's own bytes and FLOPs: an fp8 table's ratio on 2-byte weights
    # doubled the router); weight-only products (W4A16, W8A16) dequantize into a 16-bit kernel no table measures
    if wf.bits == 16 and af.bits <= 16:
        dt, peak = "bfloat16", "bf16"
    elif wf.bits == af.bits or (af.bits == 8 and wf.bits < 8):
        dt, peak = _GEMM_DTYPE.get(af.bits), af.peak
    else:
        dt = None
    if dt is None:
        return None
    rows = np.asarray(rows, float)
    k = np.asarray(op.flops, float) / (2.0 * np.maximum(rows, 1e-30) * cols)
    # fp8: block-scaled weights (fp8-b128) take the block-scaled kernels' table, per-tensor the per-tensor one
    # with static activation scales (kernels._static_fp8: the measured dynamic-quantization overhead taken out,
    # and the static quantize kernel too where the input arrives in fp8); each falls back to the next where its
    # own has no entry for the device
    if dt != "fp8":
        order = [dt]
    elif wf.name == "fp8-b128":
        order = ["fp8_block", "fp8"]
    else:
        order = ["fp8_static_lp" if op.name in _FP8_INPUT else "fp8_static", "fp8", "fp8_block"]
    r = None
    for name in order:
        r = ks.gemm_ratio(name, rows, cols, k)
        if r is not None:
            break
    if r is None:
        return None
    return np.maximum(r, 1.0), hw.peak(peak)  # read once a table answered: it exists only where the peak does


def _measured_attention(ks, op: Op, kf, peak: float, bw: float | None = None):
    """(max(r, 1), peak) of an attention op from the measured context or generation tables, or None.

    A prompt chunk after a cached prefix (T new tokens over klen > T keys) is not a shape the context tables
    measure (prompts with no prefix): it is priced as the slower of the prompt with its causal pairs (its FLOPs)
    and the generation kernel over its klen keys (the cache it streams), each measured; `bw` (the device's
    memory bandwidth) turns the second into a ratio over the op's own ideal time."""
    Nq, Nkv, hd, T = op.attn
    klen = op.keys
    if klen is None:
        return None
    kvd = "fp8" if kf.bits == 8 else "bfloat16" if kf.bits == 16 else None
    if kvd is None:
        return None
    klen = np.maximum(np.asarray(klen, float), 1.0)
    T = np.asarray(T, float)
    heads = (Nq, max(round(Nkv), 1), hd)

    def generation(B, keys):
        return (ks.mla_ratio("generation", kvd, Nq, B, keys) if Nkv == 0 else
                ks.attn_ratio("generation", kvd, heads, B, keys))

    if np.all(T == 1.0):  # decode: one query per sequence; B from the op's FLOPs = 2 B Nq hd keys
        r = generation(np.asarray(op.flops, float) / (2.0 * Nq * hd * klen), klen)
    else:  # prefill: causal over the T new tokens after klen - T cached ones
        pairs = T * klen - T * (T - 1.0) / 2.0
        B = np.asarray(op.flops, float) / (2.0 * Nq * hd * np.maximum(pairs, 1.0))
        # the prompt of equal pairs: L (L + 1) / 2 = pairs (L = T with no prefix). Looked up at L = T, a 2-token
        # chunk after 8,192 cached tokens took the ratio of a 2-token prompt (launch-bound, r in the hundreds)
        # times its 8,192-key work: 278 ms for Llama-3.1-70B on 4 H200s, whose decode step takes 9 ms
        L = (np.sqrt(1.0 + 8.0 * np.maximum(pairs, 1.0)) - 1.0) / 2.0
        r = (ks.mla_ratio("context", kvd, Nq, B, L) if Nkv == 0 else ks.attn_ratio("context", kvd, heads, B, L))
        if r is not None and bw is not None and np.any(klen > T):
            g = generation(B, klen)  # the cache it streams (its kv_read), at the decode kernel's measured rate
            if g is not None:
                fl = np.asarray(op.flops, float) / peak
                ideal = np.maximum(np.maximum(fl, np.asarray(op.bytes, float) / bw), 1e-300)
                floor = np.maximum(g, 1.0) * np.asarray(op.kv_read, float) / bw
                r = np.where(klen > T, np.maximum(r * fl, floor) / ideal, r)
    if r is None:
        return None
    want = np.broadcast_shapes(np.shape(op.flops), np.shape(op.keys))
    if np.shape(r) != want:  # T kept from the op list's build, the sizes refilled for a step (serving): their mean
        r = np.mean(r) + np.zeros(want)
    return np.maximum(r, 1.0), peak


def _measured_gdn(ks, op: Op, peak: float, bw: float):
    """(max(r, 1), peak) of a Gated DeltaNet op from the measured tables, or None: its sequences B and tokens M are
    the op's per-sequence and per-token bytes counted back (so a step's summed rows price as one kernel over B
    sequences of M / B tokens), r = the measured time over the op's own ideal time max(FLOPs / peak, bytes / bw)."""
    part, hk, hv, dk, dv, per_seq, per_tok = op.gdn
    B = np.maximum(np.asarray(op.kv_read, float) / per_seq, 1.0)
    M = np.asarray(op.act_read if part == "conv" else op.act_write, float) / per_tok
    t = ks.gdn_time("generation" if op.phase == "decode" else "context", part, (hk, hv, dk, dv), B,
                    np.maximum(M / B, 1.0))
    if t is None:
        return None
    ideal = np.maximum(np.maximum(np.asarray(op.flops, float) / peak, np.asarray(op.bytes, float) / bw), 1e-300)
    return np.maximum(t / ideal, 1.0), peak


def impl_name(impl) -> str:
    """The name an implementation profile is shown by (a catalog name or a path), whether given as a name or loaded."""
    return str(getattr(impl, "key", None) or impl or DEFAULT_IMPL)


def time_model(mode: str, hw: Hardware, impl=None) -> TimeModel | None:
    """The TimeModel of a mode (None for `simple`, the lecture's closed form)."""
    if mode == "achievable":
        from .specs import load_impl

        return TimeModel.achievable(hw, load_impl(impl or DEFAULT_IMPL))
    if mode in ("roofline", "simple"):
        return TimeModel.roofline()
    raise SpecError("--mode", None, f"must be one of {', '.join(MODES)}, got {mode!r}")
