import pytest
import torch

import smla
from reference import assert_lse_close, assert_out_close, merge_ref, poisoned


@pytest.mark.parametrize("parts_dtype,out_dtype", [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
                                                   (torch.float32, torch.float32)])
@pytest.mark.parametrize("with_sink", [False, True])
def test_matches_reference(device, parts_dtype, out_dtype, with_sink):
    n, T, h, d_v = 3, 5, 4, 512
    out_parts = torch.randn(n, T, h, d_v, device=device).to(parts_dtype)
    lse_parts = (torch.randn(n, T, h) * 3).to(device)
    lse_parts[0, 0] = float("-inf")          # one part empty
    lse_parts[:, 1] = float("-inf")          # every part empty
    lse_parts[1, 2, 0] = float("nan")        # non-finite parts are skipped
    lse_parts[2, 3, 1] = float("inf")
    sink = torch.randn(h, device=device) if with_sink else None
    out = poisoned((T, h, d_v), out_dtype, device)
    lse = poisoned((T, h), torch.float32, device)
    r_out, r_lse = smla.merge_states(out_parts, lse_parts, attn_sink=sink, out=out, lse=lse)
    assert r_out is out and r_lse is lse
    ref_out, ref_lse = merge_ref(out_parts, lse_parts, sink)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)
    assert torch.isneginf(lse[1]).all() and (out[1] == 0).all()


def test_default_output_dtype(device):
    parts = torch.randn(2, 3, 2, 64, device=device)
    lses = torch.randn(2, 3, 2, device=device)
    out, lse = smla.merge_states(parts, lses)
    assert out.dtype == torch.float32 and out.shape == (3, 2, 64) and lse.shape == (3, 2)
    out_b, _ = smla.merge_states(parts, lses, out_dtype=torch.bfloat16)
    assert out_b.dtype == torch.bfloat16
    ref_out, ref_lse = merge_ref(parts, lses)
    assert_out_close(out, ref_out)
    assert_lse_close(lse, ref_lse)
