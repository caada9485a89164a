"""KV-cache memory for the serving simulator: contiguous max-length reservations vs paged blocks.

A manager holds the resident request groups and answers the scheduler's two questions: can this
waiting group be admitted, and can every running group get room for its next token (if not, the
scheduler preempts the newest group). So the manager drives admission, and a manager that wastes
less memory shows up as more concurrent sequences and, when memory is the limit, more throughput.

Sizes come from the engine's op list (`kv_sizes`): a cached token costs `engine.kv_growth_per_token`
bytes (2*K*H*L*bytes, or the MLA latent, CLA sharing included) and a sequence's fixed state
(linear-attention layers) costs `fixed_state_bytes_per_seq`. The capacity is the device memory left
after the weights. Sliding-window layers are charged for the whole context, as a cache that does not
free tokens that left the window would hold them: an upper bound for those models.

Bookkeeping is in tokens. A sequence *holds* `known` tokens: the prompt and the tokens generated so
far, each of which has (or is about to get, in the next step) a K, V slot. The last generated token
of a finished sequence is never fed back, so a sequence holds at most prompt + output - 1 tokens.

Two managers:
- Contiguous (FasterTransformer/Orca style): at admission each sequence reserves one region of
  R = min(max_context, prompt + max_output) tokens, where max_output is the most a request may
  generate (the output distribution's cap). First-fit over one address range, so regions of
  different sizes leave holes between them. The reservation splits into what is held now (`used`),
  what this sequence will fill later (`future`) and what it never uses (`internal`: R minus its
  final length). `external` is free memory in holes too small for the next request's region: free,
  but in pieces it cannot use.
- Paged (vLLM PagedAttention): blocks of `block` tokens, allocated as tokens arrive; any free block
  serves any sequence, so there is no external fragmentation, and the only waste (`internal`) is
  the unfilled tail of each sequence's last block: less than one block per sequence.
  With `share=True`:
  - a system prompt common to every request (its first `sys_tokens` tokens) is stored once: its
    full blocks, floor(sys_tokens/block) of them, are referenced by every resident group (the last,
    partial block also holds request-specific tokens, so it is not shareable, as in vLLM's prefix
    caching, which hashes full blocks only). Once computed they are not recomputed (prefix caching:
    the scheduler starts a new request's prefill after them);
  - the n samples of one prompt share the prompt's full blocks. Its partial last block is shared
    until the samples diverge, at their first sampled token, and then copied (copy-on-write): each
    sample owns a copy plus its generated tokens.
  `saved` is what sharing saves: the blocks every sequence would hold on its own minus the
  physical blocks.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from .. import engine
from ..errors import SpecError
from ..ops import Precision
from ..specs import Hardware, Model


@dataclass(frozen=True)
class KVSizes:
    """Bytes of the cache, from the op list, and the memory left for it after the weights."""

    per_token: float  # bytes one more cached token adds (all layers, K and V)
    per_seq: float  # fixed state per sequence (linear attention / SSM layers), bytes
    weights: float  # weight bytes
    capacity: float  # device memory - weights: what the KV cache may use
    max_context: int  # the model's longest sequence

    def bytes(self, tokens, seqs=1):
        return tokens * self.per_token + seqs * self.per_seq


def kv_sizes(model: Model, hw: Hardware, prec: Precision | None = None, layout=None) -> KVSizes:
    """Per device of the layout (tp splits KV heads, ep gives each device group its own sequences):
    bytes one cached token adds on the device that holds it, and the memory the replica's ep device
    groups leave for the cache after their weights (ep x one device's)."""
    from ..ops import Layout

    prec = prec or Precision()
    lay = layout or Layout()
    ps = engine.per_sequence(model, np.array([0.0]), prec, layout=lay)
    weights = float(ps["weight_bytes"])
    cap = hw.memory_capacity - weights
    if cap <= 0:
        raise SpecError(hw.key or hw.name, "memory_capacity",
                        f"{model.name}'s weights ({weights:.4g} B per device) leave no memory for a KV cache "
                        f"({hw.memory_capacity:.4g} B)")
    return KVSizes(engine.kv_growth_per_token(model, prec, lay), float(ps["fixed_state_bytes_per_seq"][0]), weights, cap * lay.ep,
                   int(model.max_context))


class Seq:
    """One sequence: a request's prompt leader until it forks into samples, or one sample."""

    __slots__ = ("group", "out", "gen", "known", "ctx", "region")

    def __init__(self, group, out, gen, known, ctx):
        self.group, self.out, self.gen, self.known, self.ctx = group, out, gen, known, ctx
        self.region = None  # contiguous: start of its reservation

    @property
    def left(self) -> int:
        """Tokens to process before it produces its next token (1 when decoding)."""
        return self.known - self.ctx


class Group:
    """One request: `prompt` tokens (system prefix included), then len(outs) samples.

    Before its first token it is one prompt sequence (the samples all come from one prefill); the
    first token forks it into one sequence per sample (n = 1: that sequence simply continues)."""

    __slots__ = ("rid", "prompt", "outs", "seqs", "forked", "mem", "spare", "first", "last", "done",
                 "preemptions", "completions")

    def __init__(self, rid: int, prompt: int, outs):
        self.rid, self.prompt, self.outs = rid, int(prompt), [int(o) for o in outs]
        self.seqs = [Seq(self, self.outs[0] if len(self.outs) == 1 else None, 0, self.prompt, 0)]
        self.forked = len(self.outs) == 1
        self.mem = None  # the manager's record of what this group holds
        self.spare: list = []  # contiguous: regions reserved for samples not yet forked
        self.first = self.last = self.done = -1.0
        self.preemptions = self.completions = 0

    @property
    def slots(self) -> int:
        """Batch slots held: one per sample (reserved for all of them from admission)."""
        return len(self.seqs) if self.forked else len(self.outs)

    def fork(self) -> list:
        """The prompt's first token: one sequence per sample, each holding the prompt + its token."""
        p, lead = self.prompt, self.seqs[0]
        self.seqs = [Seq(self, o, 1, p + 1, p) for o in self.outs]
        if lead.region is not None:  # contiguous: the samples move into the regions reserved for them
            for s, st in zip(self.seqs, [lead.region] + self.spare):
                s.region = st
            self.spare = []
        self.forked = True
        return self.seqs

    def reset(self) -> None:
        """Preempted (recompute): the cache is dropped; generated tokens stay generated."""
        for s in self.seqs:
            s.ctx = 0
        self.preemptions += 1


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


class Paged:
    def __init__(self, sizes: KVSizes, block: int = 16, share: bool = True, sys_tokens: int = 0):
        if block < 1:
            raise SpecError("--block-size", None, f"must be a positive number of tokens, got {block}")
        self.sizes, self.block, self.share = sizes, int(block), bool(share)
        self.block_bytes = sizes.per_token * self.block
        self.sys_blocks = sys_tokens // self.block if share else 0  # full blocks of the common prefix
        self.sys_tokens = self.sys_blocks * self.block
        self.sys_refs = 0  # resident groups referencing the shared prefix
        self.sys_ready = False  # its K, V have been computed (prefix cache hit for new requests)
        self.blocks = self.held = self.logical = self.nseq = 0  # totals, shared blocks counted once

    def _need(self, g: Group) -> tuple:
        """(physical blocks, held tokens, blocks without sharing, sequences) for a group's state."""
        b, seqs = self.block, g.seqs
        if len(seqs) == 1:  # the common case, without generator overhead
            k = seqs[0].known
            logical = -(-k // b)
            if not self.share:
                return logical, k, logical, 1
            base = g.prompt // b
            own, t = base - self.sys_blocks, k - base * b
            return own - (-t // b), own * b + t, logical, 1
        logical = sum(_ceil(s.known, b) for s in g.seqs)
        held = sum(s.known for s in g.seqs)
        if not self.share:
            return logical, held, logical, len(g.seqs)
        base = g.prompt // b  # full prompt blocks: shared by the samples (the first sys_blocks by everyone)
        tails = [s.known - base * b for s in g.seqs]  # own tokens: partial prompt block (CoW copy) + generated
        own = base - self.sys_blocks
        return own + sum(_ceil(t, b) for t in tails), own * b + sum(tails), logical, len(g.seqs)

    def free_bytes(self) -> float:
        sys = self.sys_blocks if self.sys_refs else 0
        return self.sizes.capacity - (self.blocks + sys) * self.block_bytes - self.nseq * self.sizes.per_seq

    def _cost(self, rec) -> float:
        return rec[0] * self.block_bytes + rec[3] * self.sizes.per_seq

    def _apply(self, g: Group, rec) -> None:
        old = g.mem or (0, 0, 0, 0)
        self.blocks += rec[0] - old[0]
        self.held += rec[1] - old[1]
        self.logical += rec[2] - old[2]
        self.nseq += rec[3] - old[3]
        g.mem = rec

    def fits_alone(self, g: Group) -> bool:
        """Could this group run to completion on an empty device?"""
        b, n = self.block, len(g.outs)
        full = [g.prompt + o - 1 for o in g.outs]
        if self.share:
            base = g.prompt // b
            need = base + sum(_ceil(f - base * b, b) for f in full)
        else:
            need = sum(_ceil(f, b) for f in full)
        return need * self.block_bytes + n * self.sizes.per_seq <= self.sizes.capacity

    def admit(self, g: Group) -> bool:
        rec = self._need(g)
        extra = self.sys_blocks * self.block_bytes if (self.share and not self.sys_refs) else 0.0
        if self._cost(rec) + extra > self.free_bytes():
            return False
        self._apply(g, rec)
        self.sys_refs += self.share
        return True

    def update(self, g: Group) -> bool:
        """Cover every sequence's held tokens (growth, a fork's copies, or a finished sample's blocks
        returned). False, and nothing changes, when there is no room."""
        old, seqs = g.mem, g.seqs
        if len(seqs) == 1 and old is not None:  # the common case, inlined (the simulator calls this per group per step)
            k, b = seqs[0].known, self.block
            logical = -(-k // b)
            if self.share:
                base = g.prompt // b
                own, t = base - self.sys_blocks, k - base * b
                rec = (own - (-t // b), own * b + t, logical, 1)
            else:
                rec = (logical, k, logical, 1)
            if rec[0] == old[0] and old[3] == 1:  # no new block: only the held tokens change
                if 0.0 > self.free_bytes():  # the same test as below, whose cost difference is then 0
                    return False
                self.held += rec[1] - old[1]
                self.logical += rec[2] - old[2]
                g.mem = rec
                return True
        else:
            rec = self._need(g)
        if self._cost(rec) - self._cost(g.mem) > self.free_bytes():
            return False
        self._apply(g, rec)
        return True

    def update_from(self, groups: list, i: int = 0) -> int:
        """update() on groups[i:] in order until one has no room: its index, or len(groups). The same
        steps as calling update() on each (the simulator's hot loop, with the one-sequence case inlined)."""
        b, share, sysb, n, free = self.block, self.share, self.sys_blocks, len(groups), None
        while i < n:
            g = groups[i]
            old, seqs = g.mem, g.seqs
            if len(seqs) == 1 and old is not None and old[3] == 1:
                k = seqs[0].known
                logical = -(-k // b)
                if share:
                    base = g.prompt // b
                    own, t = base - sysb, k - base * b
                    blocks, held = own - (-t // b), own * b + t
                else:
                    blocks, held = logical, k
                if blocks == old[0]:  # no new block: update()'s test with a cost difference of 0
                    if free is None:
                        free = self.free_bytes()  # unchanged until a block is allocated
                    if 0.0 > free:
                        return i
                    self.held += held - old[1]
                    self.logical += logical - old[2]
                    g.mem = (blocks, held, logical, 1)
                    i += 1
                    continue
            if not self.update(g):
                return i
            free = None
            i += 1
        return n

    def drop(self, g: Group, s: Seq) -> None:
        """A finished sample's own blocks go back. (Right after a fork the other samples' copies may
        not fit yet; the scheduler's next update settles that, preempting if it must.)"""
        self.update(g)

    def release(self, g: Group) -> None:
        self._apply(g, (0, 0, 0, 0))
        g.mem = None
        self.sys_refs -= self.share
        if self.share and not self.sys_refs:
            self.sys_ready = False  # the prefix's blocks are freed with its last user

    def snapshot(self, head: Group | None = None) -> tuple:
        """(used, reserved, internal, future, external, saved) in bytes. No external fragmentation:
        any free block serves any sequence."""
        sys = self.sys_blocks if self.sys_refs else 0
        pt, ps = self.sizes.per_token, self.sizes.per_seq
        used = (self.held + sys * self.block) * pt + self.nseq * ps
        reserved = (self.blocks + sys) * self.block_bytes + self.nseq * ps
        saved = (self.logical - self.blocks - sys) * self.block_bytes
        return used, reserved, reserved - used, 0.0, 0.0, saved


class Contiguous:
    sys_tokens, sys_ready, share = 0, False, False  # no sharing: a region cannot point into another

    def __init__(self, sizes: KVSizes, max_output: int):
        self.sizes, self.max_output = sizes, int(max_output)
        self.starts: list = []  # sorted region starts (bytes from the arena's start)
        self.size_at: dict = {}  # start -> region bytes
        self.reserved = self.held_bytes = self.internal = 0.0
        self.nseq = 0
        self.min_region = 0.0  # bytes of the smallest region any request needs (set by the simulator)

    def region_tokens(self, g: Group) -> int:
        return min(self.sizes.max_context, g.prompt + self.max_output)

    def _alloc(self, size: float):
        """First fit: the lowest gap between regions (or after the last) that holds `size` bytes."""
        prev, need = 0.0, size * (1 - 1e-12)  # byte counts are exact in float64 but for fractional formats
        for st in self.starts:
            if st - prev >= need:
                break
            prev = st + self.size_at[st]
        else:
            if self.sizes.capacity - prev < need:
                return None
        bisect.insort(self.starts, prev)
        self.size_at[prev] = size
        self.reserved += size
        return prev

    def _free(self, st: float) -> None:
        del self.starts[bisect.bisect_left(self.starts, st)]
        self.reserved -= self.size_at.pop(st)

    def free_bytes(self) -> float:
        return self.sizes.capacity - self.reserved

    def holes(self) -> list:
        out, prev = [], 0.0
        for st in self.starts:
            out.append(st - prev)
            prev = st + self.size_at[st]
        return out + [self.sizes.capacity - prev]

    def fits_alone(self, g: Group) -> bool:
        return len(g.outs) * self.sizes.bytes(self.region_tokens(g)) <= self.sizes.capacity

    def _never(self, g: Group, out: int) -> float:
        """Bytes of a sample's region it never fills: R minus its final length."""
        return (self.region_tokens(g) - (g.prompt + out - 1)) * self.sizes.per_token

    def admit(self, g: Group) -> bool:
        size, got = self.sizes.bytes(self.region_tokens(g)), []
        outs = [s.out for s in g.seqs] if g.forked else g.outs  # before the fork: a region per sample
        for _ in outs:
            st = self._alloc(size)
            if st is None:
                for x in got:
                    self._free(x)
                return False
            got.append(st)
        for s, st in zip(g.seqs, got):
            s.region = st
        g.spare = got[len(g.seqs):]
        self.internal += sum(self._never(g, o) for o in outs)
        g.mem = (0.0, 0)
        return self.update(g)

    def update(self, g: Group) -> bool:
        rec = (sum(self.sizes.bytes(s.known) for s in g.seqs), len(g.seqs))
        self.held_bytes += rec[0] - g.mem[0]
        self.nseq += rec[1] - g.mem[1]
        g.mem = rec
        return True  # a reservation already covers every token its sequence will hold

    def update_from(self, groups: list, i: int = 0) -> int:
        for g in groups[i:]:
            self.update(g)  # never short of room: a reservation covers its sequence's tokens
        return len(groups)

    def drop(self, g: Group, s: Seq) -> None:
        self._free(s.region)
        self.internal -= self._never(g, s.out)
        self.update(g)

    def release(self, g: Group) -> None:
        for st in [s.region for s in g.seqs] + g.spare:
            self._free(st)
        for s in g.seqs:
            s.region = None
        outs = [s.out for s in g.seqs] if g.forked else g.outs
        self.internal -= sum(self._never(g, o) for o in outs)
        self.held_bytes -= g.mem[0]
        self.nseq -= g.mem[1]
        g.mem, g.spare = None, []

    def snapshot(self, head: Group | None = None) -> tuple:
        """(used, reserved, internal, future, external, saved) in bytes. External: free memory in holes
        too small for the next request's region (the head of the queue's, or else the smallest any
        request of the traffic needs), which it cannot use until a neighbour leaves."""
        need = self.sizes.bytes(self.region_tokens(head)) if head is not None else self.min_region
        external = sum(h for h in self.holes() if h < need * (1 - 1e-12))
        future = self.reserved - self.held_bytes - self.internal
        return self.held_bytes, self.reserved, self.internal, future, external, 0.0
