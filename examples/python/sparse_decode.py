"""sparse_decode from Python: the README's example, checked against a float64 computation of
SPEC §3 in torch on the cache's dequantized rows (read back with smla.gather_cache). Exits
non-zero (AssertionError) when a result is non-finite or outside the SPEC §6 tolerances.

    python3 examples/python/sparse_decode.py [--device cuda]
"""
import argparse

import torch

import smla

ap = argparse.ArgumentParser()
ap.add_argument("--device", default="cpu", help="cpu (the CPU backend) or cuda (the sm_90a kernels)")
dev = torch.device(ap.parse_args().device)
torch.manual_seed(0)

cache = smla.empty_cache(num_blocks=8, page_size=64, cache_format="fp8_ds_mla", device=dev)  # DeepSeek V3.2 layout
kv = torch.randn(8 * 64, 576, dtype=torch.bfloat16, device=dev)
smla.write_cache(kv[:, :512], kv[:, 512:], torch.arange(8 * 64, device=dev), cache)  # quantize into every slot
q = torch.randn(2, 1, 16, 576, dtype=torch.bfloat16, device=dev)                     # [b, s_q, h_q, d_qk]
indices = torch.randint(-1, 8 * 64, (2, 1, 128), dtype=torch.int32, device=dev)     # slots; -1 is skipped
indices[:, :, 120:] = -1                                                             # padding, as an indexer leaves it
sink = torch.zeros(16, device=dev)
out, lse = smla.sparse_decode(q, cache, indices, attn_sink=sink)
print(out.shape, lse.shape)  # torch.Size([2, 1, 16, 512]) torch.Size([2, 1, 16])

assert out.shape == (2, 1, 16, 512) and out.dtype == torch.bfloat16, (out.shape, out.dtype)
assert lse.shape == (2, 1, 16) and lse.dtype == torch.float32, (lse.shape, lse.dtype)
assert torch.isfinite(out).all() and torch.isfinite(lse).all(), "non-finite result"

# float64 reference, request by request (SPEC §3): the valid entries of the index list, a
# duplicate counted twice; logits over all 576 dims scaled by 576^-0.5; values are the first
# 512 elements of each key row; the sink divides out by 1 + exp(sink - lse), lse excludes it.
for i in range(q.shape[0]):
    slots = indices[i, 0]
    slots = slots[slots >= 0].to(torch.int64)
    keys = smla.gather_cache(cache, slots).double()                # [n, 576], dequantized
    s = (q[i, 0].double() @ keys.T) * 576 ** -0.5                  # [16, n]
    ref_lse = torch.logsumexp(s, dim=-1)
    ref_out = torch.softmax(s, dim=-1) @ keys[:, :512]
    ref_out = ref_out / (1 + torch.exp(sink.double() - ref_lse))[:, None]

    got_out, got_lse = out[i, 0].double(), lse[i, 0].double()
    # SPEC §6 tolerances.
    lse_err = (got_lse - ref_lse).abs().max().item()
    assert ((got_lse - ref_lse).abs() <= 1e-4 * ref_lse.abs() + 1e-5).all(), f"request {i}: lse off by {lse_err:.2e}"
    out_err = (got_out - ref_out).abs().max().item()
    assert out_err <= 2e-2 * ref_out.abs().max().item() + 1e-3, f"request {i}: out off by {out_err:.2e}"
    rel_l2 = ((got_out - ref_out).norm() / ref_out.norm()).item()
    assert rel_l2 <= 1e-2, f"request {i}: relative L2 error {rel_l2:.2e}"
    print(f"request {i}: {slots.numel()} valid keys, max |out err| {out_err:.1e}, max |lse err| {lse_err:.1e}")

print("ok: sparse_decode matches the float64 computation")
