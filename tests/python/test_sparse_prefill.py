import pytest
import torch

import smla
from conftest import requires_cuda
from reference import assert_lse_close, assert_out_close, dequantize, make_cache, poisoned, sparse_prefill_ref


def random_rows(s_q, topk, s_kv, device, three_d=False):
    idx = torch.randint(0, s_kv, (s_q, topk), dtype=torch.int32)
    idx[:, 0] = -1
    idx[:, 1] = s_kv + 3
    idx[:, 2] = idx[:, 3]
    idx = idx.to(device)
    return idx.unsqueeze(1) if three_d else idx


@pytest.mark.parametrize("d_qk", [576, 512])
@pytest.mark.parametrize("layout", ["2d", "flashmla_3d"])
def test_matches_reference(device, d_qk, layout):
    s_q, h, s_kv, topk = 6, 16, 90, 32
    three_d = layout == "flashmla_3d"
    kv_big = torch.randn(s_kv, 2, d_qk, dtype=torch.bfloat16, device=device)
    kv = kv_big[:, :1] if three_d else kv_big[:, 0]  # rows strided by 2*d_qk
    q = torch.randn(s_q, h, d_qk, dtype=torch.bfloat16, device=device)
    idx = random_rows(s_q, topk, s_kv, device, three_d)
    tl = torch.tensor([topk, 5, 0, 1, 40, -2], dtype=torch.int32, device=device)
    sink = torch.randn(h, device=device)
    out = poisoned((s_q, h, 512), torch.bfloat16, device)
    lse = poisoned((s_q, h), torch.float32, device)
    ml = poisoned((s_q, h), torch.float32, device)
    r = smla.sparse_prefill(q, kv, idx, topk_length=tl, attn_sink=sink, out=out, lse=lse, max_logits=ml)
    assert r[0] is out and r[1] is lse and r[2] is ml
    ref_out, ref_lse, ref_ml = sparse_prefill_ref(q, kv, idx, tl, sink)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)
    assert_lse_close(ml, ref_ml, "max_logits")
    for row in (2, 5):  # no valid key
        assert torch.isneginf(lse[row]).all() and torch.isneginf(ml[row]).all() and (out[row] == 0).all()


def test_allocates_outputs_and_scale(device):
    q = torch.randn(3, 8, 576, dtype=torch.bfloat16, device=device)
    kv = torch.randn(20, 576, dtype=torch.bfloat16, device=device)
    idx = random_rows(3, 8, 20, device)
    out, lse, ml = smla.sparse_prefill(q, kv, idx, softmax_scale=0.05)
    assert out.shape == (3, 8, 512) and out.dtype == torch.bfloat16
    assert lse.shape == ml.shape == (3, 8) and lse.dtype == ml.dtype == torch.float32
    ref_out, ref_lse, ref_ml = sparse_prefill_ref(q, kv, idx, softmax_scale=0.05)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)
    assert_lse_close(ml, ref_ml, "max_logits")


# ------------------------------------------------------------------ keys from a paged cache
def hostile_slots(s_q, topk, num_slots, device, three_d=False):
    """Slots with -1, a large negative, past-the-cache values and a duplicate mixed in."""
    idx = random_rows(s_q, topk, num_slots, device, three_d)
    flat = idx.view(s_q, topk)
    flat[:, 4] = -(1 << 30)
    flat[:, 5] = num_slots
    flat[:, 6] = 1 << 30
    return idx


def gathered_rows(cache, fmt):
    """Every slot of the cache read back by smla.gather_cache: the bf16 kv a paged call stands for."""
    slots = torch.arange(cache.shape[0] * cache.shape[1], dtype=torch.int32, device=cache.device)
    return smla.gather_cache(cache, slots, cache_format=fmt)


def assert_same_as(res, ref_res):
    """A paged call against the unpaged one over the gathered rows (rounded to bf16, hence a
    tolerance rather than equality)."""
    out, lse, ml = res
    ref_out, ref_lse, ref_ml = (t.cpu().to(torch.float64) for t in ref_res)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)
    assert_lse_close(ml, ref_ml, "max_logits")


@pytest.mark.parametrize("fmt,d_qk,page", [("fp8_ds_mla", 576, 64), ("fp8_model1", 512, 64), ("fp8_model1", 512, 16),
                                           ("bf16", 576, 16), ("bf16", 512, 16)])
@pytest.mark.parametrize("layout", ["2d", "flashmla_3d"])
def test_paged_cache_matches_gathered_kv(device, fmt, d_qk, page, layout):
    s_q, h, nb, topk = 6, 16, 3, 32
    cache = make_cache(fmt, nb, page, d_qk, device=device)  # pages further apart than a page
    num_slots = nb * page
    q = torch.randn(s_q, h, d_qk, dtype=torch.bfloat16, device=device)
    idx = hostile_slots(s_q, topk, num_slots, device, layout == "flashmla_3d")
    tl = torch.tensor([topk, 5, 0, 1, 40, -2], dtype=torch.int32, device=device)
    sink = torch.randn(h, device=device)
    out = poisoned((s_q, h, 512), torch.bfloat16, device)
    lse = poisoned((s_q, h), torch.float32, device)
    ml = poisoned((s_q, h), torch.float32, device)
    r = smla.sparse_prefill(q, None, idx, cache=cache, cache_format=fmt, topk_length=tl, attn_sink=sink, out=out,
                            lse=lse, max_logits=ml)
    assert r[0] is out and r[1] is lse and r[2] is ml
    kv = gathered_rows(cache, fmt)
    assert_same_as(r, smla.sparse_prefill(q, kv, idx, topk_length=tl, attn_sink=sink))
    # and against the float64 reference over the rows decoded from the bytes
    ref_out, ref_lse, ref_ml = sparse_prefill_ref(q, dequantize(cache, fmt), idx, tl, sink)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)
    assert_lse_close(ml, ref_ml, "max_logits")
    for row in (2, 5):  # no valid key
        assert torch.isneginf(lse[row]).all() and torch.isneginf(ml[row]).all() and (out[row] == 0).all()


def test_paged_cache_format_inferred_four_d_and_float8(device):
    """The format comes from dtype and row width, as in sparse_decode; [nb, page, 1, 656] and
    float8_e4m3fn bytes (FlashMLA's tests) give the same result."""
    s_q, h, topk = 4, 8, 24
    cache = make_cache("fp8_ds_mla", 4, 16, device=device, four_d=True)
    q = torch.randn(s_q, h, 576, dtype=torch.bfloat16, device=device)
    idx = hostile_slots(s_q, topk, 64, device)
    out, lse, ml = smla.sparse_prefill(q, indices=idx, cache=cache, softmax_scale=0.05)
    assert out.shape == (s_q, h, 512) and out.dtype == torch.bfloat16
    assert lse.shape == ml.shape == (s_q, h) and lse.dtype == ml.dtype == torch.float32
    assert_same_as((out, lse, ml), smla.sparse_prefill(q, gathered_rows(cache, "fp8_ds_mla"), idx, softmax_scale=0.05))
    r8 = smla.sparse_prefill(q, indices=idx, cache=cache.view(torch.float8_e4m3fn))
    r = smla.sparse_prefill(q, indices=idx, cache=cache)
    assert all(torch.equal(a, b) for a, b in zip(r8, r))


def close_to(x, ref, rel_tol=1e-4):
    """Elementwise: x within SPEC §6's lse bound of the float64 ref (equal infinities too)."""
    x = x.detach().cpu().to(torch.float64)
    return (x == ref) | ((x - ref).abs() <= rel_tol * ref.abs() + 1e-5)


def test_paged_cache_unrounded_ds_mla_scales(device):
    """vLLM's V3.2 writer stores amax/448 unrounded, so the dequantized keys are not bf16
    values: the CPU backend uses them as they are, a CUDA kernel may round them to bf16 (SPEC
    §2) as the gathered kv is rounded."""
    cache = make_cache("fp8_ds_mla", 2, 32, device=device, scale_mode="amax")
    q = torch.randn(3, 16, 576, dtype=torch.bfloat16, device=device)
    idx = hostile_slots(3, 40, 64, device)
    out, lse, ml = smla.sparse_prefill(q, indices=idx, cache=cache, cache_format="fp8_ds_mla")
    exact = sparse_prefill_ref(q, dequantize(cache, "fp8_ds_mla"), idx)
    rounded = sparse_prefill_ref(q, gathered_rows(cache, "fp8_ds_mla"), idx)
    assert_out_close(out, exact[0])
    assert_out_close(out, rounded[0])
    if device == "cpu":
        assert_lse_close(lse, exact[1])
        assert_lse_close(ml, exact[2], "max_logits")
    else:
        assert (close_to(lse, exact[1]) | close_to(lse, rounded[1])).all(), "lse"
        assert (close_to(ml, exact[2]) | close_to(ml, rounded[2])).all(), "max_logits"


@requires_cuda
def test_real_shapes_cuda():
    """V3.2 prefill chunk: h_q 128, topk 2048, bf16 kv."""
    s_q, h, s_kv, topk = 64, 128, 8192, 2048
    q = torch.randn(s_q, h, 576, dtype=torch.bfloat16, device="cuda")
    kv = torch.randn(s_kv, 1, 576, dtype=torch.bfloat16, device="cuda")
    idx = random_rows(s_q, topk, s_kv, "cuda", three_d=True)
    sink = torch.randn(h, device="cuda")
    out, lse, ml = smla.sparse_prefill(q, kv, idx, attn_sink=sink)
    ref_out, ref_lse, ref_ml = sparse_prefill_ref(q, kv, idx, attn_sink=sink)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)
    assert_lse_close(ml, ref_ml, "max_logits")
