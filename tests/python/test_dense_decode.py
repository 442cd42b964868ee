import pytest
import torch

import smla
from conftest import requires_cuda
from reference import assert_lse_close, assert_out_close, dense_decode_ref, make_cache, poisoned


def block_table(b, max_blocks, nb, device):
    bt = torch.stack([torch.randperm(nb)[:max_blocks] for _ in range(b)]).to(torch.int32)
    bt[0, -1] = -1       # a block outside the cache is skipped
    bt[-1, 0] = nb + 5
    return bt.to(device)


@pytest.mark.parametrize("fmt,q_dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16),
                                         ("fp8_e4m3", torch.bfloat16), ("fp8_e4m3", torch.float8_e4m3fn)])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_reference(device, fmt, q_dtype, causal):
    b, s_q, h_q, d, nb, page, max_blocks = 3, 2, 8, 576, 12, 16, 4
    k_scale = 0.0625
    cache = make_cache(fmt, nb, page, d, device=device, k_scale=k_scale)
    if q_dtype == torch.float8_e4m3fn:
        q = (torch.randn(b, s_q, h_q, d) * 8).clamp(-448, 448).to(torch.float8_e4m3fn).to(device)
        q_scale = 0.125
    else:
        q = torch.randn(b, s_q, h_q, d, device=device).to(q_dtype)
        q_scale = 1.0
    bt = block_table(b, max_blocks, nb, device)
    seqlens = torch.tensor([50, 0, 1000], dtype=torch.int32, device=device)  # 1000: clamped to the table
    out_dtype = torch.float16 if q_dtype == torch.float16 else torch.bfloat16
    out = poisoned((b, s_q, h_q, 512), out_dtype, device)
    lse = poisoned((b, s_q, h_q), torch.float32, device)
    smla.dense_decode(q, cache, bt, seqlens, cache_format=fmt, k_scale=k_scale, q_scale=q_scale, causal=causal,
                      out=out, lse=lse)
    ref_out, ref_lse = dense_decode_ref(q, cache, fmt, bt, seqlens, causal, k_scale=k_scale, q_scale=q_scale)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)
    assert torch.isneginf(lse[1]).all() and (out[1] == 0).all()


@pytest.mark.parametrize("d", [576, 512])
def test_heads_sink_and_defaults(device, d):
    b, s_q, h_q, h_kv, nb, page = 2, 1, 8, 2, 6, 64
    cache = make_cache("bf16", nb, page, d, h_kv=h_kv, device=device)
    q = torch.randn(b, s_q, h_q, d, dtype=torch.bfloat16, device=device)
    bt = block_table(b, 3, nb, device)
    seqlens = torch.tensor([130, 64], dtype=torch.int32, device=device)
    sink = torch.randn(h_q, device=device)
    out, lse = smla.dense_decode(q, cache, bt, seqlens, attn_sink=sink, softmax_scale=0.03)
    assert out.dtype == torch.bfloat16 and out.shape == (b, s_q, h_q, 512) and lse.shape == (b, s_q, h_q)
    ref_out, ref_lse = dense_decode_ref(q, cache, "bf16", bt, seqlens, attn_sink=sink, softmax_scale=0.03)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)


@requires_cuda
@pytest.mark.parametrize("h_q,s_q", [(128, 2), (16, 1)])
def test_real_shapes_cuda(h_q, s_q):
    b, nb, page, seq = 4, 300, 64, 4096
    cache = make_cache("bf16", nb, page, 576, device="cuda")
    q = torch.randn(b, s_q, h_q, 576, dtype=torch.bfloat16, device="cuda")
    bt = torch.stack([torch.randperm(nb)[:seq // page] for _ in range(b)]).to(torch.int32).cuda()
    seqlens = torch.tensor([seq, 1, 2049, 0], dtype=torch.int32, device="cuda")
    out, lse = smla.dense_decode(q, cache, bt, seqlens, causal=True)
    ref_out, ref_lse = dense_decode_ref(q, cache, "bf16", bt, seqlens, causal=True)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)
