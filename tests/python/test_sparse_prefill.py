import pytest
import torch

import smla
from conftest import requires_cuda
from reference import assert_lse_close, assert_out_close, poisoned, sparse_prefill_ref


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
