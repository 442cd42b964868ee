import pytest
import torch

import smla
from conftest import requires_cuda
from reference import (
    assert_lse_close,
    assert_out_close,
    make_cache,
    poisoned,
    sparse_decode_ref,
)


def random_indices(b, s_q, topk, num_slots, device, invalid=True):
    """Slots with -1, other negatives, past-the-cache values and duplicates mixed in."""
    idx = torch.randint(0, num_slots, (b, s_q, topk), dtype=torch.int32)
    if invalid and topk >= 4:
        idx[..., 0] = -1
        idx[..., 1] = num_slots + torch.randint(0, 1000, (b, s_q), dtype=torch.int32)
        idx[..., 2] = idx[..., 3]  # a duplicate counts twice
        if topk >= 6:
            idx[..., 5] = -(1 << 30)
    return idx.to(device)


def strided_q(b, s_q, h, d, device):
    """q as a slice of a larger tensor: outer strides that are not the packed ones."""
    big = torch.randn(b, s_q + 1, h + 3, d, dtype=torch.bfloat16, device=device)
    return big[:, 1:, 2:2 + h]


@pytest.mark.parametrize("fmt,d_qk", [("fp8_ds_mla", 576), ("fp8_model1", 512), ("bf16", 576), ("bf16", 512)])
@pytest.mark.parametrize("variant", ["plain", "topk_length+sink"])
def test_matches_reference(device, fmt, d_qk, variant):
    b, s_q, h, topk, nb, page = 3, 2, 16, 40, 6, 16
    cache = make_cache(fmt, nb, page, d_qk, device=device)
    q = strided_q(b, s_q, h, d_qk, device)
    idx = random_indices(b, s_q, topk, nb * page, device)
    kw = {}
    if variant != "plain":
        kw["topk_length"] = torch.tensor([topk, 7, -3], dtype=torch.int32, device=device)
        kw["attn_sink"] = torch.randn(h, device=device)
    out = poisoned((b, s_q, h, 512), torch.bfloat16, device)
    lse = poisoned((b, s_q, h), torch.float32, device)
    r_out, r_lse = smla.sparse_decode(q, cache, idx, cache_format=fmt, out=out, lse=lse, **kw)
    assert r_out is out and r_lse is lse
    ref_out, ref_lse = sparse_decode_ref(q, cache, fmt, idx, kw.get("topk_length"), attn_sink=kw.get("attn_sink"))
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)
    if variant != "plain":  # topk_length -3: request 2 has no key at all
        assert torch.isneginf(lse[2]).all() and (out[2] == 0).all()


def test_format_inferred_and_four_d_cache(device):
    b, s_q, h, topk = 2, 1, 8, 24
    cache = make_cache("fp8_ds_mla", 5, 8, device=device, four_d=True)  # [nb, page, 1, 656]
    q = torch.randn(b, s_q, h, 576, dtype=torch.bfloat16, device=device)
    idx = random_indices(b, s_q, topk, 40, device)
    out, lse = smla.sparse_decode(q, cache, idx)  # format from dtype and row width
    ref_out, ref_lse = sparse_decode_ref(q, cache, "fp8_ds_mla", idx)
    assert out.shape == (b, s_q, h, 512) and out.dtype == torch.bfloat16
    assert lse.shape == (b, s_q, h) and lse.dtype == torch.float32
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)
    # FlashMLA's tests store the bytes as float8_e4m3fn: same result.
    out8, lse8 = smla.sparse_decode(q, cache.view(torch.float8_e4m3fn), idx)
    assert torch.equal(out8, out) and torch.equal(lse8, lse)


def test_unrounded_ds_mla_scales(device):
    """vLLM's V3.2 writer stores amax/448 unrounded: readers take any positive scale."""
    cache = make_cache("fp8_ds_mla", 4, 16, device=device, scale_mode="amax")
    q = torch.randn(2, 1, 16, 576, dtype=torch.bfloat16, device=device)
    idx = random_indices(2, 1, 32, 64, device)
    out, lse = smla.sparse_decode(q, cache, idx, cache_format="fp8_ds_mla")
    ref_out, ref_lse = sparse_decode_ref(q, cache, "fp8_ds_mla", idx)
    assert_out_close(out, ref_out)
    # the CUDA kernel rounds dequantized keys to bf16: exact here only on the CPU backend
    assert_lse_close(lse, ref_lse, rel_tol=1e-4 if device == "cpu" else 2e-3)


def test_extra_cache_v4(device):
    """V4: a sliding window in one cache and compressed keys in another (own page size),
    one softmax over both, per-request lengths for each, and a sink."""
    b, s_q, h = 3, 2, 16
    main = make_cache("fp8_model1", 4, 32, device=device, four_d=True)
    extra = make_cache("fp8_model1", 6, 8, device=device)
    q = torch.randn(b, s_q, h, 512, dtype=torch.bfloat16, device=device)
    idx = random_indices(b, s_q, 20, 128, device)
    eidx = random_indices(b, s_q, 36, 48, device)
    tl = torch.tensor([20, 0, 5], dtype=torch.int32, device=device)
    etl = torch.tensor([36, 0, 100], dtype=torch.int32, device=device)
    sink = torch.randn(h, device=device)
    sink[0], sink[1] = float("inf"), float("-inf")
    out, lse = smla.sparse_decode(q, main, idx, topk_length=tl, extra_cache=extra, extra_indices=eidx,
                                  extra_topk_length=etl, attn_sink=sink)
    ref_out, ref_lse = sparse_decode_ref(q, main, "fp8_model1", idx, tl, extra=(extra, "fp8_model1", eidx, etl),
                                         attn_sink=sink)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)
    assert torch.isneginf(lse[1]).all() and (out[1] == 0).all()  # both lengths 0
    assert (out[0, :, 0] == 0).all()  # sink +inf -> 0


def test_softmax_scale_and_all_invalid(device):
    cache = make_cache("bf16", 3, 8, 576, device=device)
    q = torch.randn(2, 1, 4, 576, dtype=torch.bfloat16, device=device)
    idx = torch.tensor([[[0, 5, 23, 5]], [[-1, 24, 1 << 30, -7]]], dtype=torch.int32, device=device)
    sink = torch.zeros(4, device=device)
    out, lse = smla.sparse_decode(q, cache, idx, softmax_scale=0.125, attn_sink=sink)
    ref_out, ref_lse = sparse_decode_ref(q, cache, "bf16", idx, attn_sink=sink, softmax_scale=0.125)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)
    assert torch.isneginf(lse[1]).all() and (out[1] == 0).all() and not torch.isnan(out).any()


def test_empty_batch(device):
    cache = make_cache("bf16", 2, 4, 512, device=device)
    q = torch.empty(0, 1, 8, 512, dtype=torch.bfloat16, device=device)
    idx = torch.empty(0, 1, 16, dtype=torch.int32, device=device)
    out, lse = smla.sparse_decode(q, cache, idx)
    assert out.shape == (0, 1, 8, 512) and lse.shape == (0, 1, 8)


@requires_cuda
@pytest.mark.parametrize("h_q,s_q", [(128, 2), (16, 1)])
def test_real_shapes_v32_cuda(h_q, s_q):
    """DeepSeek V3.2: fp8_ds_mla, page 64, topk 2048."""
    b, topk, nb, page = 4, 2048, 160, 64
    cache = make_cache("fp8_ds_mla", nb, page, device="cuda", four_d=True)
    q = torch.randn(b, s_q, h_q, 576, dtype=torch.bfloat16, device="cuda")
    idx = random_indices(b, s_q, topk, nb * page, "cuda")
    tl = torch.tensor([topk, 1000, 1, 0], dtype=torch.int32, device="cuda")
    out, lse = smla.sparse_decode(q, cache, idx, topk_length=tl)
    ref_out, ref_lse = sparse_decode_ref(q, cache, "fp8_ds_mla", idx, tl)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)


@requires_cuda
def test_real_shapes_v4_cuda():
    """DeepSeek V4: 128-key window from a page-256 cache + 512 compressed keys (page 64), sink."""
    b, s_q, h_q = 4, 2, 64
    main = make_cache("fp8_model1", 8, 256, device="cuda", four_d=True)
    extra = make_cache("fp8_model1", 40, 64, device="cuda", four_d=True)
    q = torch.randn(b, s_q, h_q, 512, dtype=torch.bfloat16, device="cuda")
    idx = random_indices(b, s_q, 128, 8 * 256, "cuda")
    eidx = random_indices(b, s_q, 512, 40 * 64, "cuda")
    etl = torch.tensor([512, 300, 0, 17], dtype=torch.int32, device="cuda")
    sink = torch.randn(h_q, device="cuda")
    out, lse = smla.sparse_decode(q, main, idx, extra_cache=extra, extra_indices=eidx, extra_topk_length=etl,
                                  attn_sink=sink)
    ref_out, ref_lse = sparse_decode_ref(q, main, "fp8_model1", idx, extra=(extra, "fp8_model1", eidx, etl),
                                         attn_sink=sink)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)


@requires_cuda
def test_runs_on_current_stream_cuda():
    cache = make_cache("bf16", 4, 64, 576, device="cuda")
    q = torch.randn(2, 1, 16, 576, dtype=torch.bfloat16, device="cuda")
    idx = random_indices(2, 1, 64, 256, "cuda")
    ref_out, ref_lse = smla.sparse_decode(q, cache, idx)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out, lse = smla.sparse_decode(q, cache, idx)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert torch.equal(out, ref_out) and torch.equal(lse, ref_lse)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_every_device_of_the_process():
    """Calls on cuda:1 while cuda:0 is current, then on cuda:0: the call runs on its tensors'
    device, and each kernel's shared-memory limit is set on every device it runs on."""
    for dev in ("cuda:1", "cuda:0", "cuda:1"):
        for h_q, fmt, d_qk in ((128, "fp8_ds_mla", 576), (16, "fp8_ds_mla", 576), (64, "bf16", 512)):
            cache = make_cache(fmt, 40, 64, d_qk, device=dev)
            q = torch.randn(3, 1, h_q, d_qk, dtype=torch.bfloat16, device=dev)
            idx = random_indices(3, 1, 256, 40 * 64, dev)
            with torch.cuda.device(0):
                out, lse = smla.sparse_decode(q, cache, idx)
            assert out.device == q.device
            ref_out, ref_lse = sparse_decode_ref(q, cache, fmt, idx)
            assert_out_close(out, ref_out)
            assert_lse_close(lse, ref_lse)
