"""What an op carries is what its kind moves, for every catalog model (MHA, GQA, MLA, CLA, windows, linear,
MoE) and layout: only an op that owns weights reads, stores or counts them; a collective moves bytes over a
link and nothing through HBM or the ALUs; every other op sends nothing. (ops.Op's constructor defaults are
what most ops leave unset: a default of 1 byte instead of 0 moves no tolerance, these laws see it.)"""
import numpy as np
import pytest

import perfmodel as pm
from perfmodel.errors import SpecError
from perfmodel.ops import COMM, Layout, build_ops

HBM = ("w_read", "kv_read", "act_read", "act_write", "kv_write", "w_stored", "kv_stored")
MODELS = {n: pm.load_model(n) for n in pm.catalog_names("models")}
LAYOUTS = {"1 device": Layout(), "tp 2": Layout(tp=2), "ep 2": Layout(ep=2), "pp 2": Layout(pp=2)}


def _ops(name):
    m = MODELS[name]
    out = []
    for lay_name, lay in LAYOUTS.items():
        for phase, T in (("decode", 1), ("prefill", 64)):
            try:
                out += [(lay_name, phase, o) for o in build_ops(m, 4, T, 256, phase, layout=lay)]
            except SpecError:  # the layout does not divide this model (heads, experts, layers)
                continue
    return out


def _zero(x) -> bool:
    return bool(np.all(np.asarray(x) == 0))


@pytest.mark.parametrize("name", pm.catalog_names("models"))
def test_only_an_op_that_owns_weights_reads_stores_or_counts_them(name):
    for lay, phase, o in _ops(name):
        if o.wfmt == "":
            assert _zero(o.w_read) and _zero(o.w_stored) and o.params == 0, (lay, phase, o.name)
        elif o.name == "lm_head" and MODELS[name].tied_embeddings:  # the embedding's matrix, read again
            assert not _zero(o.w_read) and _zero(o.w_stored) and o.params == 0, (lay, phase, o.name)
        else:
            assert not _zero(o.w_read) and not _zero(o.w_stored) and o.params > 0, (lay, phase, o.name)


@pytest.mark.parametrize("name", pm.catalog_names("models"))
def test_a_collective_moves_bytes_over_a_link_and_nothing_through_hbm_and_other_ops_send_nothing(name):
    ops = _ops(name)
    assert any(o.kind == COMM for _, _, o in ops)  # tp 2 or pp 2 always gives a model collectives
    for lay, phase, o in ops:
        where = (lay, phase, o.name)
        if o.kind == COMM:
            assert _zero(o.flops) and all(_zero(getattr(o, f)) for f in HBM), where
            assert o.link in ("tp", "ep", "pp") and o.coll and o.peers >= 2, where
            assert not _zero(o.comm_bytes) and o.comm_steps >= 1 and not _zero(o.msg), where
        else:
            assert _zero(o.comm_bytes) and o.comm_steps == 0 and _zero(o.msg), where
            assert (o.link, o.coll, o.peers) == ("", "", 1), where
            assert o.gemm is None or o.kind == "matmul", where


def test_an_op_prints_as_its_label_and_its_count():
    ops = build_ops(MODELS["gemma-3-27b"], 1, 1, 16, "decode")  # local and global layers: grouped ops
    assert repr(next(o for o in ops if o.name == "lm_head")) == "Op(lm_head x1)"
    assert repr(next(o for o in ops if o.name == "qkv_proj")) == "Op(qkv_proj[local x52] x52)"


def test_layer_groups_are_named_only_by_what_tells_them_apart():
    """A group's label names the attention kind only when the model mixes kinds, dense or MoE only when it mixes
    those, and the KV owner only under CLA; a model with one kind of layer has one unnamed group."""
    from perfmodel.ops import layer_groups

    labels = lambda name: [g[0] for g in layer_groups(MODELS[name])]  # noqa: E731
    assert labels("deepseek-v3") == ["dense x3", "moe x58"]  # one attention kind: not named
    assert sorted(labels("gemma-3-27b")) == ["global x10", "local x52"]
    assert labels("llama-3.1-8b") == [""]
    assert sorted(labels("llama-2-13b-cla2")) == ["kv x20", "kv-shared x20"]
