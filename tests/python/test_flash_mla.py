"""smla.flash_mla against FlashMLA's documented conventions: argument names and order,
lse [b, h_q, s_q] for decode and [s_q, h_q] for prefill, natural log, +inf lse (and zero
output) for rows with no valid key, (out, max_logits, lse) order for sparse prefill."""

import pytest
import torch

import smla
from smla.flash_mla import FlashMLASchedMeta, flash_mla_sparse_fwd, flash_mla_with_kvcache, get_mla_metadata
from reference import (
    assert_lse_close,
    assert_out_close,
    dense_decode_ref,
    make_cache,
    sparse_decode_ref,
    sparse_prefill_ref,
)

BF16, I32 = torch.bfloat16, torch.int32


def flashmla_lse(ref_lse: torch.Tensor) -> torch.Tensor:
    """smla's [b, s_q, h_q] reference lse in FlashMLA's convention: [b, h_q, s_q], +inf when empty."""
    lse = ref_lse.transpose(1, 2).clone()
    lse[torch.isneginf(lse)] = float("inf")
    return lse


def test_get_mla_metadata_conventions(device):
    meta, none = get_mla_metadata()
    assert isinstance(meta, FlashMLASchedMeta) and none is None and not meta.have_initialized
    seqlens = torch.tensor([5, 0, 9], dtype=I32, device=device)
    tile_md, num_splits = get_mla_metadata(seqlens, 64, 1)  # the older FlashMLA call
    assert tile_md.dtype == num_splits.dtype == I32
    assert tile_md.dim() == 2 and tile_md.shape[1] == 8 and tile_md.device == seqlens.device
    assert num_splits.shape == (4,) and num_splits.device == seqlens.device
    tile_md, num_splits = get_mla_metadata(seqlens, 128, 1, 128, True, 2048)
    assert num_splits.shape == (4,)


@pytest.mark.parametrize("cache_dtype", [torch.float8_e4m3fn, torch.uint8])
def test_sparse_decode_v32(device, cache_dtype):
    b, s_q, h_q, topk, nb, page = 3, 2, 16, 48, 5, 32
    cache = make_cache("fp8_ds_mla", nb, page, device=device, four_d=True)  # [nb, page, 1, 656]
    k_cache = cache.view(cache_dtype)
    q = torch.randn(b, s_q, h_q, 576, dtype=BF16, device=device)
    indices = torch.randint(0, nb * page, (b, s_q, topk), dtype=I32, device=device)
    indices[:, :, ::5] = -1
    topk_length = torch.tensor([topk, 3, 0], dtype=I32, device=device)
    sink = torch.randn(h_q, device=device)
    meta, num_splits = get_mla_metadata()
    out, lse = flash_mla_with_kvcache(q, k_cache, None, None, 512, meta, num_splits, is_fp8_kvcache=True,
                                      indices=indices, attn_sink=sink, topk_length=topk_length)
    ref_out, ref_lse = sparse_decode_ref(q, cache, "fp8_ds_mla", indices, topk_length, attn_sink=sink)
    assert out.shape == (b, s_q, h_q, 512) and out.dtype == BF16
    assert lse.shape == (b, h_q, s_q) and lse.dtype == torch.float32 and lse.is_contiguous()
    assert_out_close(out, ref_out)
    assert_lse_close(lse, flashmla_lse(ref_lse))
    assert torch.isposinf(lse[2]).all() and (out[2] == 0).all()  # topk_length 0: no valid key
    assert meta.have_initialized and meta.config.topk == topk and meta.config.is_fp8_kvcache
    # the same metadata object is reused across calls, also for other shapes
    out2, _ = flash_mla_with_kvcache(q[:1], k_cache, None, None, 512, meta, None, is_fp8_kvcache=True,
                                     indices=indices[:1, :, :8])
    assert out2.shape == (1, s_q, h_q, 512)


def test_sparse_decode_v4_extra_cache(device):
    b, s_q, h_q = 2, 1, 8
    main = make_cache("fp8_model1", 3, 64, device=device, four_d=True)
    extra = make_cache("fp8_model1", 6, 16, device=device, four_d=True)
    q = torch.randn(b, s_q, h_q, 512, dtype=BF16, device=device)
    idx = torch.randint(-1, 3 * 64, (b, s_q, 32), dtype=I32, device=device)
    eidx = torch.randint(0, 6 * 16 + 10, (b, s_q, 24), dtype=I32, device=device)
    etl = torch.tensor([24, 5], dtype=I32, device=device)
    sink = torch.randn(h_q, device=device)
    out, lse = flash_mla_with_kvcache(
        q=q, k_cache=main, block_table=None, cache_seqlens=None, head_dim_v=512,
        tile_scheduler_metadata=get_mla_metadata()[0], num_splits=None, softmax_scale=0.07, causal=False,
        is_fp8_kvcache=True, indices=idx, attn_sink=sink, extra_k_cache=extra, extra_indices_in_kvcache=eidx,
        topk_length=None, extra_topk_length=etl)
    ref_out, ref_lse = sparse_decode_ref(q, main, "fp8_model1", idx, extra=(extra, "fp8_model1", eidx, etl),
                                         attn_sink=sink, softmax_scale=0.07)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, flashmla_lse(ref_lse))


def test_sparse_decode_bf16_cache_is_accepted(device):
    """FlashMLA requires FP8 for sparse decode; smla also takes a bf16 cache."""
    cache = make_cache("bf16", 4, 16, 576, device=device)
    q = torch.randn(1, 1, 4, 576, dtype=BF16, device=device)
    idx = torch.randint(0, 64, (1, 1, 16), dtype=I32, device=device)
    out, lse = flash_mla_with_kvcache(q, cache, None, None, 512, None, indices=idx)
    ref_out, ref_lse = sparse_decode_ref(q, cache, "bf16", idx)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, flashmla_lse(ref_lse))


@pytest.mark.parametrize("causal", [False, True])
def test_dense_decode(device, causal):
    b, s_q, h_q, nb, page = 3, 2, 16, 10, 64
    cache = make_cache("bf16", nb, page, 576, device=device)  # [nb, page, 1, 576]
    q = torch.randn(b, s_q, h_q, 576, dtype=BF16, device=device)
    block_table = torch.stack([torch.randperm(nb)[:3] for _ in range(b)]).to(I32).to(device)
    cache_seqlens = torch.tensor([150, 0, 65], dtype=I32, device=device)
    tile_md, num_splits = get_mla_metadata(cache_seqlens, s_q * h_q, 1)
    out, lse = flash_mla_with_kvcache(q, cache, block_table, cache_seqlens, 512, tile_md, num_splits,
                                      causal=causal)
    ref_out, ref_lse = dense_decode_ref(q, cache, "bf16", block_table, cache_seqlens, causal)
    assert lse.shape == (b, h_q, s_q) and lse.is_contiguous()
    assert_out_close(out, ref_out)
    assert_lse_close(lse, flashmla_lse(ref_lse))
    assert torch.isposinf(lse[1]).all() and (out[1] == 0).all()


def test_dense_fp8_with_descales(device):
    """SGLang's FP8 call: float8 q and cache with descale_q / descale_k."""
    nb, page = 4, 64
    cache = make_cache("fp8_e4m3", nb, page, 576, device=device, k_scale=0.5)
    q = (torch.randn(2, 1, 8, 576) * 4).to(torch.float8_e4m3fn).to(device)
    bt = torch.tensor([[0, 1], [3, 2]], dtype=I32, device=device)
    sl = torch.tensor([100, 7], dtype=I32, device=device)
    out, lse = flash_mla_with_kvcache(q, cache, bt, sl, 512, None, None, descale_q=0.25,
                                      descale_k=torch.tensor([0.5], device=device))
    ref_out, ref_lse = dense_decode_ref(q, cache, "fp8_e4m3", bt, sl, k_scale=0.5, q_scale=0.25)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, flashmla_lse(ref_lse))


@pytest.mark.parametrize("indexer_topk", [0, 8])
def test_sparse_prefill_fwd(device, indexer_topk):
    s_q, h_q, s_kv, topk = 5, 16, 40, 24
    q = torch.randn(s_q, h_q, 512, dtype=BF16, device=device)
    kv = torch.randn(s_kv, 1, 512, dtype=BF16, device=device)
    indices = torch.randint(0, s_kv + 5, (s_q, 1, topk), dtype=I32, device=device)
    indices[3] = -1  # a token with no valid key
    sink = torch.randn(h_q, device=device)
    tl = torch.tensor([24, 24, 2, 24, 10], dtype=I32, device=device)
    res = flash_mla_sparse_fwd(q, kv, indices, 0.05, 512, sink, tl, indexer_topk)
    assert len(res) == (4 if indexer_topk else 3)
    out, max_logits, lse = res[:3]
    ref_out, ref_lse, ref_ml = sparse_prefill_ref(q, kv, indices, tl, sink, 0.05)
    assert out.shape == (s_q, h_q, 512) and lse.shape == max_logits.shape == (s_q, h_q)
    ref_lse_fm = ref_lse.clone()
    ref_lse_fm[torch.isneginf(ref_lse_fm)] = float("inf")
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse_fm)
    assert_lse_close(max_logits, ref_ml, "max_logits")
    assert torch.isposinf(lse[3]).all() and torch.isneginf(max_logits[3]).all() and (out[3] == 0).all()
    if indexer_topk:
        _, ref_lse_idx, _ = sparse_prefill_ref(q, kv, indices[..., :indexer_topk], tl, None, 0.05)
        ref_lse_idx[torch.isneginf(ref_lse_idx)] = float("inf")
        assert_lse_close(res[3], ref_lse_idx, "lse_indexer")


@pytest.mark.parametrize("fmt,d_qk", [("fp8_ds_mla", 576), ("fp8_model1", 512), ("bf16", 512)])
@pytest.mark.parametrize("indexer_topk", [0, 8])
def test_sparse_prefill_fwd_paged_cache(device, fmt, d_qk, indexer_topk):
    """A 4-D kv is a paged cache as flash_mla_with_kvcache takes k_cache: indices are slots,
    and the result is that over the rows gathered from it."""
    s_q, h_q, nb, page, topk = 5, 16, 3, 16, 24
    cache = make_cache(fmt, nb, page, d_qk, device=device)
    cache = cache if cache.dim() == 4 else cache.unsqueeze(2)  # [nb, page, 1, row]
    if fmt != "bf16":
        cache = cache.view(torch.float8_e4m3fn)  # as FlashMLA's tests store it
    q = torch.randn(s_q, h_q, d_qk, dtype=BF16, device=device)
    indices = torch.randint(-3, nb * page + 5, (s_q, 1, topk), dtype=I32, device=device)
    indices[3] = -1  # a token with no valid key
    sink = torch.randn(h_q, device=device)
    tl = torch.tensor([24, 24, 2, 24, 10], dtype=I32, device=device)
    res = flash_mla_sparse_fwd(q, cache, indices, 0.05, 512, sink, tl, indexer_topk)
    assert len(res) == (4 if indexer_topk else 3)
    slots = torch.arange(nb * page, dtype=I32, device=device)
    kv = smla.gather_cache(cache, slots, cache_format=fmt).unsqueeze(1)
    want = flash_mla_sparse_fwd(q, kv, indices, 0.05, 512, sink, tl, indexer_topk)
    out, max_logits, lse = res[:3]
    assert_out_close(out, want[0].cpu().double())
    assert_lse_close(max_logits, want[1].cpu().double(), "max_logits")
    assert_lse_close(lse, want[2].cpu().double())
    assert torch.isposinf(lse[3]).all() and torch.isneginf(max_logits[3]).all() and (out[3] == 0).all()
    if indexer_topk:
        assert_lse_close(res[3], want[3].cpu().double(), "lse_indexer")
