"""torch integration: the custom ops' registrations (opcheck), torch.compile(fullgraph=True)
through every op, and CUDA graphs captured once and replayed with new indices and lengths."""

import pytest
import torch

import smla
from conftest import requires_cuda
from reference import (
    assert_lse_close,
    assert_out_close,
    dense_decode_ref,
    make_cache,
    sparse_decode_ref,
)

BF16, F32, I32 = torch.bfloat16, torch.float32, torch.int32


def test_custom_ops_are_registered():
    for name in ("sparse_decode", "sparse_prefill", "dense_decode", "merge_states", "write_cache", "gather_cache",
                 "req_id_per_token", "page_table_from_req_to_token", "positions_to_slots", "sliding_window_indices",
                 "compressed_slot_mapping", "dcp_local_seqlens", "dcp_local_topk", "decode_split_schedule"):
        assert hasattr(torch.ops.smla, name), name


def test_opcheck_attention_ops():
    q = torch.randn(2, 1, 8, 576, dtype=BF16)
    cache = make_cache("fp8_ds_mla", 3, 16)
    idx = torch.randint(-1, 48, (2, 1, 16), dtype=I32)
    out, lse = torch.empty(2, 1, 8, 512, dtype=BF16), torch.empty(2, 1, 8)
    torch.library.opcheck(torch.ops.smla.sparse_decode.default,
                          (q, cache, idx, None, None, None, None, torch.randn(8), out, lse, "fp8_ds_mla", 1.0,
                           "fp8_ds_mla", 1.0, None))
    pq, pidx = torch.randn(3, 8, 576, dtype=BF16), torch.randint(-1, 50, (3, 16), dtype=I32)
    pout, plse, pml = torch.empty(3, 8, 512, dtype=BF16), torch.empty(3, 8), torch.empty(3, 8)
    torch.library.opcheck(torch.ops.smla.sparse_prefill.default,
                          (pq, None, pidx, None, torch.randn(8), pout, plse, pml, None, cache, "fp8_ds_mla"))
    parts, lses = torch.randn(2, 3, 4, 64), torch.randn(2, 3, 4)
    torch.library.opcheck(torch.ops.smla.merge_states.default,
                          (parts, lses, None, torch.empty(3, 4, 64), torch.empty(3, 4)))


def _layer(q, cache, idx, topk_length, kv, prefill_idx, block_table, seqlens, dense_cache):
    """A function touching every operation, as a model layer would."""
    o, l = smla.sparse_decode(q, cache, idx, topk_length=topk_length)
    do, dl_ = smla.dense_decode(q, dense_cache, block_table, seqlens)
    mo, ml = smla.merge_states(torch.stack([o, do]).flatten(1, 2), torch.stack([l, dl_]).flatten(1, 2),
                               out_dtype=BF16)
    po, pl, pm = smla.sparse_prefill(q[0], kv, prefill_idx)
    co, cl, _ = smla.sparse_prefill(q[0], indices=idx[0], cache=cache)
    g = smla.gather_cache(cache, idx.reshape(-1))
    sw = smla.sliding_window_indices(seqlens, 4)
    pos = smla.positions_to_slots(block_table, 16, torch.arange(q.shape[0], dtype=I32, device=q.device), sw)
    local = smla.dcp_local_topk(idx, block_table, 16, world=2, rank=1, interleave=4)
    fo, fl = smla.flash_mla.flash_mla_with_kvcache(q, cache, None, None, 512, None, is_fp8_kvcache=True,
                                                   indices=idx, topk_length=topk_length)
    return (mo.float() * 2, ml, po, pl.nan_to_num(neginf=0.0), co, cl.nan_to_num(neginf=0.0), g, pos, *local, fo,
            fl.nan_to_num(posinf=0.0))


def _layer_inputs(device):
    b, h = 2, 8
    q = torch.randn(b, 1, h, 576, dtype=BF16, device=device)
    cache = make_cache("fp8_ds_mla", 4, 16, device=device, four_d=True)
    idx = torch.randint(-1, 64, (b, 1, 24), dtype=I32, device=device)
    topk_length = torch.tensor([24, 3], dtype=I32, device=device)
    kv = torch.randn(30, 576, dtype=BF16, device=device)
    prefill_idx = torch.randint(-1, 30, (1, 12), dtype=I32, device=device)
    dense_cache = make_cache("bf16", 6, 16, 576, device=device)
    block_table = torch.tensor([[0, 2, 4], [5, 1, -1]], dtype=I32, device=device)
    seqlens = torch.tensor([40, 17], dtype=I32, device=device)
    return q, cache, idx, topk_length, kv, prefill_idx, block_table, seqlens, dense_cache


def _assert_same(got, want):
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_compile_fullgraph_aot_eager_every_op(device):
    torch.compiler.reset()
    args = _layer_inputs(device)
    eager = _layer(*args)
    compiled = torch.compile(_layer, fullgraph=True, backend="aot_eager")
    _assert_same(compiled(*args), eager)


def test_compile_fullgraph_inductor_cpu():
    """The issue's case: torch.compile(fullgraph=True) of a small function calling sparse_decode."""
    torch.compiler.reset()

    def attn(q, cache, idx, sink):
        out, lse = smla.sparse_decode(q, cache, idx, attn_sink=sink)
        return out, lse, out.float().sum(-1) * torch.exp(lse)

    def check(got, want):
        # The op's own outputs are bitwise those of eager; the fused sum around them is inductor's,
        # whose order of addition may differ: a float32 sum of n terms in any order stays within
        # n * 2^-24 * sum|x| of any other (here n = 512, bound 2^-15 with room for the product).
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        bound = 2.0**-15 * want[0].float().abs().sum(-1) * torch.exp(want[1])
        assert bool(((got[2] - want[2]).abs() <= bound).all())

    q = torch.randn(2, 1, 16, 512, dtype=BF16)
    cache = make_cache("fp8_model1", 4, 16)
    idx = torch.randint(0, 64, (2, 1, 32), dtype=I32)
    sink = torch.randn(16)
    compiled = torch.compile(attn, fullgraph=True)
    check(compiled(q, cache, idx, sink), attn(q, cache, idx, sink))
    idx2 = torch.randint(-5, 70, (2, 1, 32), dtype=I32)  # new values, same shapes: no retrace needed
    check(compiled(q, cache, idx2, sink), attn(q, cache, idx2, sink))


# ------------------------------------------------------------------------------ CUDA
def _warm_up(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


@requires_cuda
def test_cuda_graph_sparse_decode_replay():
    """Captured once; replayed with new indices, lengths and queries, every result checked."""
    b, s_q, h_q, topk, nb, page = 4, 2, 64, 512, 40, 64
    main = make_cache("fp8_ds_mla", nb, page, device="cuda", four_d=True)
    q = torch.randn(b, s_q, h_q, 576, dtype=BF16, device="cuda")
    idx = torch.randint(0, nb * page, (b, s_q, topk), dtype=I32, device="cuda")
    tl = torch.full((b,), topk, dtype=I32, device="cuda")
    sink = torch.randn(h_q, device="cuda")
    run = lambda: smla.sparse_decode(q, main, idx, topk_length=tl, attn_sink=sink)
    _warm_up(run)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = run()
    for lengths in ([topk, 1, 0, 300], [5, topk, 77, 0], [topk] * b):
        q.copy_(torch.randn_like(q))
        new_idx = torch.randint(-3, nb * page + 50, (b, s_q, topk), dtype=I32, device="cuda")
        idx.copy_(new_idx)
        tl.copy_(torch.tensor(lengths, dtype=I32))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref_out, ref_lse = sparse_decode_ref(q, main, "fp8_ds_mla", idx, tl, attn_sink=sink)
        assert_out_close(out, ref_out)
        assert_lse_close(lse, ref_lse)


@requires_cuda
def test_cuda_graph_dense_decode_and_flash_mla_replay():
    b, s_q, h_q, nb, page = 3, 1, 16, 64, 64
    cache = make_cache("bf16", nb, page, 576, device="cuda")
    q = torch.randn(b, s_q, h_q, 576, dtype=BF16, device="cuda")
    bt = torch.zeros(b, 16, dtype=I32, device="cuda")
    sl = torch.zeros(b, dtype=I32, device="cuda")
    fcache = make_cache("fp8_model1", 8, 64, device="cuda", four_d=True)
    fq = torch.randn(b, 2, h_q, 512, dtype=BF16, device="cuda")
    fidx = torch.zeros(b, 2, 128, dtype=I32, device="cuda")
    meta = smla.flash_mla.get_mla_metadata()[0]

    def run():
        dense = smla.dense_decode(q, cache, bt, sl, causal=True)
        sparse = smla.flash_mla.flash_mla_with_kvcache(fq, fcache, None, None, 512, meta, None,
                                                       is_fp8_kvcache=True, indices=fidx)
        return dense, sparse

    _warm_up(run)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        (d_out, d_lse), (f_out, f_lse) = run()
    for lengths in ([1000, 0, 64], [1, 513, 999]):
        bt.copy_(torch.stack([torch.randperm(nb)[:16] for _ in range(b)]).to(I32))
        sl.copy_(torch.tensor(lengths, dtype=I32))
        fidx.copy_(torch.randint(-1, 8 * 64, (b, 2, 128), dtype=I32))
        fidx[1] = -1  # request 1: no valid key -> +inf lse in FlashMLA's convention
        graph.replay()
        torch.cuda.synchronize()
        ref_out, ref_lse = dense_decode_ref(q, cache, "bf16", bt, sl, causal=True)
        assert_out_close(d_out, ref_out)
        assert_lse_close(d_lse, ref_lse)
        ref_out, ref_lse = sparse_decode_ref(fq, fcache, "fp8_model1", fidx)
        ref_lse = ref_lse.transpose(1, 2).clone()
        ref_lse[torch.isneginf(ref_lse)] = float("inf")
        assert_out_close(f_out, ref_out)
        assert_lse_close(f_lse, ref_lse)


@requires_cuda
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_compile_cuda(mode):
    """torch.compile on CUDA; "reduce-overhead" runs the compiled graph as a CUDA graph."""
    torch.compiler.reset()
    args = _layer_inputs("cuda")
    eager = _layer(*args)
    compiled = torch.compile(_layer, fullgraph=True, mode=mode)
    for _ in range(3):  # cudagraph trees record on a later call
        got = compiled(*args)
    for g, w in zip(got, eager):
        if g.dtype.is_floating_point:
            torch.testing.assert_close(g, w, rtol=1e-2, atol=1e-2, equal_nan=True)
        else:
            assert torch.equal(g, w)
    # new index values through the same compiled code
    q, cache, idx, *rest = args
    idx.copy_(torch.randint(-1, 64, idx.shape, dtype=I32))
    got = compiled(q, cache, idx, *rest)
    want = _layer(q, cache, idx, *rest)
    torch.testing.assert_close(got[-2].float(), want[-2].float(), rtol=1e-2, atol=1e-2)
