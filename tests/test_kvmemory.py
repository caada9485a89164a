"""The KV memory's sizes and sequences (serving/kvmemory.py): what a token and a request cost, what the weights leave,
how expert parallelism multiplies the room, and a sequence's work left. Formula tests, one law a test."""
import pytest

from perfmodel.errors import SpecError
from perfmodel.ops import Layout, Precision
from perfmodel.serving.kvmemory import Group, KVSizes, kv_sizes
from perfmodel.specs import load_hardware, load_model

H100 = load_hardware("h100-sxm")


def test_a_request_holds_its_tokens_cache_plus_one_fixed_state_per_sequence():
    """bytes(tokens, seqs) = tokens x per_token + seqs x per_seq; one sequence unless told."""
    s = KVSizes(per_token=3.0, per_seq=100.0, weights=0.0, capacity=1e9, max_context=10**6)
    assert s.bytes(10) == 130.0 and s.bytes(10, 1) == 130.0
    assert s.bytes(10, 4) == 430.0 and s.bytes(0, 2) == 200.0


def test_the_cache_room_is_the_device_memory_less_the_weights_and_a_token_costs_2_l_k_h_bytes():
    """Llama-2-13B (L = 40, K = N = 40, H = 128) in bf16 on an H100 (80 GiB = 85,899,345,920 B): a token is
    2 x 40 x 40 x 128 x 2 B = 819,200 B; the room is the memory less the 13.0e9 x 2 B of weights."""
    m = load_model("llama-2-13b")
    s = kv_sizes(m, H100)
    assert s.per_token == 2 * 40 * 40 * 128 * 2 and s.per_seq == 0
    assert s.capacity == H100.memory_capacity - s.weights and 25e9 < s.weights < 27e9
    assert s.max_context == 4096


def test_the_precision_given_prices_the_cache_an_fp8_cache_costs_half_the_bf16_one():
    m = load_model("llama-2-13b")
    assert kv_sizes(m, H100, Precision(kv="fp8")).per_token == kv_sizes(m, H100).per_token / 2
    assert kv_sizes(m, H100, None) == kv_sizes(m, H100, Precision())
    # fp8 weights are half the bf16 ones but for the embeddings, which stay 16-bit (quantize_embeddings=False)
    assert 0.5 < kv_sizes(m, H100, Precision(weights="fp8")).weights / kv_sizes(m, H100).weights < 0.52


def test_weights_that_fill_the_memory_to_the_byte_leave_no_cache_and_are_refused_one_byte_more_is_room():
    m = load_model("llama-2-13b")
    w = kv_sizes(m, H100).weights
    with pytest.raises(SpecError, match="memory_capacity"):
        kv_sizes(m, H100.replace(memory_capacity=w))
    assert kv_sizes(m, H100.replace(memory_capacity=w + 1)).capacity == 1.0


def test_expert_parallel_groups_each_keep_their_own_sequences_so_the_room_is_ep_times_one_device_s():
    """Qwen3-30B-A3B at ep = 2: each device holds half the experts, and the replica's cache room is 2 x (memory -
    one device's weights)."""
    m = load_model("qwen3-30b-a3b")
    one, two = kv_sizes(m, H100), kv_sizes(m, H100, layout=Layout(1, 1, 2, 1))
    assert two.weights < one.weights
    assert two.capacity == 2 * (H100.memory_capacity - two.weights)
    assert two.per_token == one.per_token


def test_a_new_request_has_its_whole_prompt_left_to_process_and_one_token_a_step_once_decoding():
    g = Group(0, 100, [5])
    s = g.seqs[0]
    assert s.left == 100 and g.slots == 1 and g.forked
    s.ctx = 100
    s.known = 101
    assert s.left == 1
    g3 = Group(1, 50, [4, 6, 8])  # three samples: one prompt sequence holding three slots until it forks
    assert len(g3.seqs) == 1 and g3.slots == 3 and not g3.forked and g3.seqs[0].left == 50


def test_a_paged_manager_defaults_to_16_token_blocks_with_sharing_and_no_common_prefix_and_refuses_a_block_of_0():
    from perfmodel.serving.kvmemory import Paged

    p = Paged(KVSizes(1.0, 0.0, 0.0, 1e6, 10**6))
    assert (p.block, p.share, p.sys_tokens, p.sys_blocks, p.block_bytes) == (16, True, 0, 0, 16.0)
    assert Paged(KVSizes(1.0, 0.0, 0.0, 1e6, 10**6), 1).block == 1
    for bad in (0, -16):
        with pytest.raises(SpecError, match="--block-size"):
            Paged(KVSizes(1.0, 0.0, 0.0, 1e6, 10**6), bad)


SIZES = KVSizes(per_token=1.0, per_seq=5.0, weights=0.0, capacity=10_000.0, max_context=10**6)  # 1 B a token


def test_paged_accounting_with_a_shared_prefix_one_sample_then_two_samples_to_the_byte():
    """16-token blocks of 16 B, 5 B of fixed state a sequence, a 40-token common prefix (2 full blocks shared by
    every request). A 100-token prompt holds blocks 2..6 of its own (4 full + 1 for its last 4 tokens): 5 blocks,
    68 tokens, 7 blocks without sharing, 1 sequence; the device then has 10,000 - (5 + 2) x 16 - 5 = 9,883 B free.
    A second request of 2 samples on the same prompt, forked at its first token, shares its 4 full own prompt blocks
    and gives each sample one block for its last 5 tokens: 6 blocks, 74 tokens, 14 without sharing, 2 sequences."""
    from perfmodel.serving.kvmemory import Paged

    p = Paged(SIZES, 16, True, sys_tokens=40)
    assert (p.sys_blocks, p.sys_tokens) == (2, 32)
    g = Group(0, 100, [5])
    assert p.admit(g)
    assert g.mem == (5, 68, 7, 1) and (p.blocks, p.held, p.logical, p.nseq, p.sys_refs) == (5, 68, 7, 1, 1)
    assert p.free_bytes() == 10_000 - 7 * 16 - 5 == 9_883
    assert p.snapshot() == ((68 + 32) * 1.0 + 5, 7 * 16 + 5.0, 7 * 16 + 5.0 - 105, 0.0, 0.0, 0.0)
    g2 = Group(1, 100, [3, 4])
    assert p.admit(g2) and g2.mem == (5, 68, 7, 1)  # one prompt sequence until its first token
    g2.fork()
    assert p.update(g2) and g2.mem == (6, 74, 14, 2)
    assert (p.blocks, p.held, p.logical, p.nseq) == (11, 142, 21, 3)
    assert p.free_bytes() == 10_000 - (11 + 2) * 16 - 3 * 5
    p.release(g2)
    assert (p.blocks, p.held, p.logical, p.nseq, p.sys_refs) == (5, 68, 7, 1, 1) and g2.mem is None


def test_without_sharing_a_sequence_holds_every_block_of_its_context_and_one_state():
    from perfmodel.serving.kvmemory import Paged

    p = Paged(SIZES, 16, False, sys_tokens=40)
    assert p.sys_blocks == 0
    g = Group(0, 100, [5])
    assert p.admit(g) and g.mem == (7, 100, 7, 1) and p.nseq == 1
    assert p.free_bytes() == 10_000 - 7 * 16 - 5


def test_a_paged_device_admits_a_request_whose_blocks_state_and_shared_prefix_fill_it_to_the_byte():
    """100-token prompt with a 40-token common prefix: 5 own blocks (80 B) + 1 state (5 B) + the prefix's 2 blocks
    (32 B), allocated with its first user: 117 B admit it, 116 B do not."""
    from perfmodel.serving.kvmemory import Paged

    for cap, ok in ((117.0, True), (116.0, False)):
        p = Paged(KVSizes(1.0, 5.0, 0.0, cap, 10**6), 16, True, sys_tokens=40)
        assert p.admit(Group(0, 100, [5])) is ok


def test_a_request_fits_alone_when_its_last_token_s_blocks_and_states_fit_an_empty_device():
    """Prompt 100, outputs 13 and 13: each sample ends holding 100 + 13 - 1 = 112 tokens; with sharing, the 6 full
    prompt blocks once and 1 block each for the samples' last 16 tokens: 8 blocks + 2 states = 138 B; without sharing,
    7 + 7 blocks + 2 states = 234 B."""
    from perfmodel.serving.kvmemory import Paged

    for share, need in ((True, 8 * 16 + 10), (False, 14 * 16 + 10)):
        for cap, ok in ((need, True), (need - 1, False)):
            assert Paged(KVSizes(1.0, 5.0, 0.0, float(cap), 10**6), 16, share).fits_alone(Group(0, 100, [13, 13])) is ok


def test_the_shared_prefix_is_paid_by_its_first_user_only():
    """With the 40-token prefix held by a first request (5 own blocks + 2 prefix blocks + 1 state = 117 B), a second
    100-token request needs only its own 5 blocks and state, 85 B: 202 B admit both, 201 B only the first."""
    from perfmodel.serving.kvmemory import Paged

    for cap, ok in ((202.0, True), (201.0, False)):
        p = Paged(KVSizes(1.0, 5.0, 0.0, cap, 10**6), 16, True, sys_tokens=40)
        assert p.admit(Group(0, 100, [5])) and p.admit(Group(1, 100, [5])) is ok


def test_a_sequence_growing_into_a_new_block_takes_one_block_more_and_within_a_block_none():
    """A 111-token prompt (7 blocks of 16) grows after its prefill: to 112 (the 7th block full), 113 (an 8th block),
    120, 128 (inside the 8th) and 129 (a 9th): the device's blocks go 7, 8, 8, 8, 9 and its held tokens with the
    context, whether the manager updates one group or a list of them."""
    from perfmodel.serving.kvmemory import Paged

    for how in ("update", "update_from"):
        p = Paged(SIZES, 16, False)
        g = Group(0, 111, [5])
        assert p.admit(g) and (p.blocks, p.held) == (7, 111)
        for known, blocks in ((112, 7), (113, 8), (120, 8), (128, 8), (129, 9)):
            g.seqs[0].known = known
            assert (p.update(g) if how == "update" else p.update_from([g]) == 1)
            assert (p.blocks, p.held, p.logical, p.nseq) == (blocks, known, blocks, 1) and g.mem == (blocks, known, blocks, 1)
            assert p.free_bytes() == 10_000 - blocks * 16 - 5
    for how in ("update", "update_from"):  # 2-token blocks: a 2-token prompt (1 block) growing to 3 takes a 2nd
        p = Paged(SIZES, 2, False)
        g = Group(0, 2, [5])
        assert p.admit(g) and p.blocks == 1
        g.seqs[0].known = 3
        assert (p.update(g) if how == "update" else p.update_from([g]) == 1)
        assert (p.blocks, p.held, g.mem) == (2, 3, (2, 3, 2, 1))


def test_with_a_shared_prefix_a_growing_sequence_counts_only_its_own_blocks_either_way():
    """A 40-token prefix (2 shared blocks) and a 100-token prompt: own blocks 4 full + 1 for tokens 97-100; growing
    to 112 fills that block, 113 takes another; without sharing it would be 7 then 8 blocks (`logical`)."""
    from perfmodel.serving.kvmemory import Paged

    for how in ("update", "update_from"):
        p = Paged(SIZES, 16, True, sys_tokens=40)
        g = Group(0, 100, [20])
        assert p.admit(g) and g.mem == (5, 68, 7, 1)
        for known, rec in ((105, (5, 73, 7, 1)), (112, (5, 80, 7, 1)), (113, (6, 81, 8, 1))):
            g.seqs[0].known = known
            assert (p.update(g) if how == "update" else p.update_from([g]) == 1)
            assert g.mem == rec and (p.blocks, p.held, p.logical) == rec[:3]


def test_the_shared_prefix_stays_computed_while_one_request_holds_it_and_is_freed_with_the_last():
    from perfmodel.serving.kvmemory import Paged

    p = Paged(SIZES, 16, True, sys_tokens=40)
    a, b = Group(0, 100, [5]), Group(1, 100, [5])
    assert p.admit(a) and p.admit(b) and p.sys_refs == 2
    p.sys_ready = True  # the simulator sets it once the first holder has computed the prefix
    p.release(a)
    assert p.sys_ready and p.sys_refs == 1 and p.free_bytes() == 10_000 - (5 + 2) * 16 - 5
    p.release(b)
    assert not p.sys_ready and p.sys_refs == 0 and p.free_bytes() == 10_000


def test_a_contiguous_request_fits_alone_when_one_region_per_sample_fills_the_memory_to_the_byte():
    """A region is prompt + the traffic's longest output (capped at max_context): prompt 100, max output 28 ->
    128 tokens + 5 B of state = 133 B a sample; 2 samples fit in 266 B and not in 265."""
    from perfmodel.serving.kvmemory import Contiguous

    for cap, ok in ((266.0, True), (265.0, False)):
        c = Contiguous(KVSizes(1.0, 5.0, 0.0, cap, 10**6), 28)
        assert c.region_tokens(Group(0, 100, [3, 4])) == 128
        assert c.fits_alone(Group(0, 100, [3, 4])) is ok
    assert Contiguous(KVSizes(1.0, 5.0, 0.0, 1e6, 120), 28).region_tokens(Group(0, 100, [3])) == 120  # max_context


def test_contiguous_accounting_reserves_whole_regions_first_fit_and_counts_holes_too_small_for_the_next_region():
    """1 B a token, 5 B of state, 1,000 B, longest output 28. A (prompt 100, 1 sample of 3) reserves 128 + 5 = 133 B
    at 0 and holds its prompt, 105 B; 26 tokens of its region it never fills (internal), the other 2 it will (future).
    B (prompt 50, samples of 2 and 4) reserves two regions of 83 B before its fork. When A leaves, its 133-B hole
    serves a next request of 133 B (no external fragmentation) but not one of 233 B (133 B external)."""
    from perfmodel.serving.kvmemory import Contiguous

    c = Contiguous(KVSizes(1.0, 5.0, 0.0, 1000.0, 10**6), 28)
    a, b = Group(0, 100, [3]), Group(1, 50, [2, 4])
    assert c.admit(a) and a.seqs[0].region == 0.0 and a.mem == (105.0, 1)
    assert c.snapshot() == (105.0, 133.0, 26.0, 2.0, 0.0, 0.0)
    assert c.admit(b) and b.seqs[0].region == 133.0 and b.spare == [216.0]
    assert c.snapshot() == (160.0, 299.0, 78.0, 61.0, 0.0, 0.0) and c.nseq == 2
    a.seqs[0].known = 101
    assert c.update_from([a]) == 1 and c.snapshot()[0] == 161.0
    c.release(a)
    assert c.holes() == [133.0, 0.0, 701.0] and c.free_bytes() == 834.0
    assert (c.held_bytes, c.internal, c.nseq, a.mem) == (55.0, 52.0, 1, None)
    assert c.snapshot(Group(2, 100, [1]))[4] == 0.0  # a 133-B region fits the hole exactly
    assert c.snapshot(Group(2, 200, [1]))[4] == 133.0  # a 233-B one does not
    assert c.admit(Group(3, 100, [3])) and c.holes()[0] == 0.0  # first fit: into A's hole
