"""The tests' own float64 reference, written from docs/SPEC.md with torch ops and independent of
smla: cache byte layouts (§2) encoded and decoded here, the attention mathematics (§3), the
merge, the index utilities (§4.6), and the tolerances of §6."""

from __future__ import annotations

import math
from typing import Optional

import torch

F64 = torch.float64
NEG_INF = float("-inf")

# ------------------------------------------------------------------------ formats (§2)
DS_MLA_BYTES, MODEL1_BYTES = 656, 584
FORMAT_D_QK = {"fp8_ds_mla": 576, "fp8_model1": 512}


def model1_page_bytes(page_size: int) -> int:
    """page_size * 584 rounded up to a multiple of 576."""
    return -(-page_size * MODEL1_BYTES // 576) * 576


def pow2_scale_exponent(amax: torch.Tensor) -> torch.Tensor:
    """ceil(log2(max(amax, 1e-4) / 448)) in float32, via frexp as SPEC §2 / FORMATS.md."""
    a = torch.clamp_min(amax.float(), 1e-4) / 448.0
    m, e = torch.frexp(a)
    return torch.where(m == 0.5, e - 1, e).to(torch.int32)


def to_e4m3(x: torch.Tensor) -> torch.Tensor:
    """Round-to-nearest-even float8 e4m3fn, saturating at +-448 (torch's conversion after a
    clamp: both round the same way inside the range)."""
    return x.float().clamp(-448.0, 448.0).to(torch.float8_e4m3fn)


def e4m3_f64(u8: torch.Tensor) -> torch.Tensor:
    return u8.contiguous().view(torch.float8_e4m3fn).to(F64)


def quantize_tiles(latent: torch.Tensor, tile: int, scale_mode: str = "pow2"):
    """latent [N, L] -> (e4m3 bytes [N, L] uint8, float32 scales [N, L/tile], exponents).
    scale_mode 'pow2' is the writers' rule; 'amax' stores amax/448 unrounded (vLLM's V3.2
    writer), which readers must accept."""
    n, length = latent.shape
    tiles = latent.float().reshape(n, length // tile, tile)
    amax = tiles.abs().amax(dim=-1)
    if scale_mode == "pow2":
        e = pow2_scale_exponent(amax)
        scale = torch.ldexp(torch.ones_like(amax), e)
    else:
        e = None
        scale = torch.clamp_min(amax, 1e-4) / 448.0
    q = to_e4m3(tiles / scale.unsqueeze(-1)).reshape(n, length)
    return q.view(torch.uint8), scale, e


def encode_rows(x: torch.Tensor, fmt: str, k_scale: float = 1.0, scale_mode: str = "pow2") -> torch.Tensor:
    """Rows x [N, d_qk] (bfloat16 values) -> their bytes as the format stores one token:
    [N, 2*d] for bf16/fp16 (as uint8), [N, d] for fp8_e4m3, [N, 656] for fp8_ds_mla and
    [N, 584] (576 data bytes then 8 scale bytes) for fp8_model1."""
    n = x.shape[0]
    if fmt == "bf16":
        return x.to(torch.bfloat16).contiguous().view(torch.uint8)
    if fmt == "fp16":
        return x.to(torch.bfloat16).to(torch.float16).contiguous().view(torch.uint8)
    if fmt == "fp8_e4m3":
        ks = torch.tensor(k_scale, dtype=torch.float32)
        return to_e4m3(x.float() / ks).view(torch.uint8)
    if fmt == "fp8_ds_mla":
        q, scale, _ = quantize_tiles(x[:, :512], 128, scale_mode)
        out = torch.empty((n, DS_MLA_BYTES), dtype=torch.uint8)
        out[:, :512] = q
        out[:, 512:528] = scale.float().contiguous().view(torch.uint8)
        out[:, 528:] = x[:, 512:].to(torch.bfloat16).contiguous().view(torch.uint8)
        return out
    if fmt == "fp8_model1":
        q, _, e = quantize_tiles(x[:, :448], 64, "pow2")
        out = torch.zeros((n, MODEL1_BYTES), dtype=torch.uint8)
        out[:, :448] = q
        out[:, 448:576] = x[:, 448:].to(torch.bfloat16).contiguous().view(torch.uint8)
        out[:, 576:583] = torch.clamp(e + 127, 0, 254).to(torch.uint8)
        return out
    raise ValueError(fmt)


def token_bytes(cache: torch.Tensor, fmt: str) -> torch.Tensor:
    """A cache's per-token bytes [num_slots, bytes] in encode_rows' order, read through the
    page layout (fp8_model1 keeps data and scales in two regions of each page)."""
    cache = cache.cpu()
    nb, page = cache.shape[0], cache.shape[1]
    if fmt == "fp8_model1":
        raw = cache.reshape(nb, page * MODEL1_BYTES)  # a page's first page*584 bytes, in order
        data = raw[:, : page * 576].reshape(nb * page, 576)
        scales = raw[:, page * 576:].reshape(nb * page, 8)
        return torch.cat([data, scales], dim=1)
    if fmt in ("bf16", "fp16"):
        return cache.reshape(nb * page, -1).contiguous().view(torch.uint8)
    return cache.reshape(nb * page, -1).contiguous().view(torch.uint8)


def dequantize(cache: torch.Tensor, fmt: str, k_scale: float = 1.0, dtype=F64) -> torch.Tensor:
    """A paged cache -> key rows [num_slots, h_kv, d_qk], decoded from the bytes as SPEC §2
    lays them out: float(q) * scale, computed in ``dtype`` (float64 for the attention
    reference, float32 to reproduce a float32 reader bit for bit)."""
    cache = cache.cpu()
    nb, page = cache.shape[0], cache.shape[1]
    slots = nb * page
    if fmt in ("bf16", "fp16"):
        return cache.reshape(slots, -1, cache.shape[-1]).to(dtype)
    if fmt == "fp8_e4m3":
        ks = torch.tensor(k_scale, dtype=torch.float32).to(dtype)
        return e4m3_f64(cache.view(torch.uint8)).to(dtype).reshape(slots, -1, cache.shape[-1]) * ks
    tb = token_bytes(cache, fmt)
    if fmt == "fp8_ds_mla":
        scales = tb[:, 512:528].contiguous().view(torch.float32).to(dtype)  # [slots, 4]
        latent = e4m3_f64(tb[:, :512]).to(dtype) * scales.repeat_interleave(128, dim=1)
        rope = tb[:, 528:656].contiguous().view(torch.bfloat16).to(dtype)
    elif fmt == "fp8_model1":
        exps = tb[:, 576:583].to(F64) - 127.0  # UE8M0: 2^(byte - 127)
        latent = e4m3_f64(tb[:, :448]).to(dtype) * torch.exp2(exps).to(dtype).repeat_interleave(64, dim=1)
        rope = tb[:, 448:576].contiguous().view(torch.bfloat16).to(dtype)
    else:
        raise ValueError(fmt)
    return torch.cat([latent, rope], dim=1).unsqueeze(1)


def make_cache(fmt: str, num_blocks: int, page_size: int, d_qk: Optional[int] = None, h_kv: int = 1,
               device="cpu", k_scale: float = 1.0, scale_mode: str = "pow2", four_d: bool = False,
               values: Optional[torch.Tensor] = None) -> torch.Tensor:
    """A cache filled with random rows, pages further apart than they need to be (the page
    stride is a parameter, SPEC §2), padding bytes random. Element formats are
    [num_blocks, page, h_kv, d_qk]; packed formats [num_blocks, page, 584/656] uint8 (or
    [..., 1, ...] with four_d)."""
    d_qk = FORMAT_D_QK.get(fmt, d_qk)
    slots = num_blocks * page_size
    if values is None:
        values = torch.randn(slots * h_kv, d_qk) * 0.5
    rows = encode_rows(values, fmt, k_scale, scale_mode)  # [slots*h_kv, bytes]
    if fmt == "fp8_model1":
        page_bytes = model1_page_bytes(page_size) + 576  # more than the format needs
        buf = torch.randint(0, 256, (num_blocks, page_bytes), dtype=torch.uint8)
        r = rows.reshape(num_blocks, page_size, MODEL1_BYTES)
        buf[:, : page_size * 576] = r[:, :, :576].reshape(num_blocks, -1)
        buf[:, page_size * 576: page_size * 584] = r[:, :, 576:].reshape(num_blocks, -1)
        cache = buf.to(device)[:, : page_size * MODEL1_BYTES].view(num_blocks, page_size, MODEL1_BYTES)
    elif fmt == "fp8_ds_mla":
        buf = torch.randint(0, 256, (num_blocks, page_size + 1, DS_MLA_BYTES), dtype=torch.uint8)
        buf[:, :page_size] = rows.reshape(num_blocks, page_size, DS_MLA_BYTES)
        cache = buf.to(device)[:, :page_size]
    else:
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8_e4m3": torch.float8_e4m3fn}[fmt]
        buf = torch.randint(0, 256, (num_blocks, page_size + 1, h_kv, d_qk * dtype.itemsize), dtype=torch.uint8)
        buf[:, :page_size] = rows.reshape(num_blocks, page_size, h_kv, -1)
        buf[:, page_size:] = 0  # (random bf16 padding could hold NaN, harmless, but keep it tidy)
        cache = buf.view(dtype).to(device)[:, :page_size]
        return cache
    return cache.unsqueeze(2) if four_d else cache


# ---------------------------------------------------------------------- attention (§3)
def attend(q: torch.Tensor, keys: torch.Tensor, valid: torch.Tensor, scale: float,
           sink: Optional[torch.Tensor] = None):
    """q [R, h, d], keys [R, J, d] (per row), valid [R, J] bool (a key listed twice counts
    twice) -> out [R, h, 512], lse [R, h], max_logits [R, h], float64."""
    q, keys = q.to(F64), keys.to(F64)
    s = torch.einsum("rhd,rjd->rhj", q, keys) * scale
    s = s.masked_fill(~valid.unsqueeze(1), NEG_INF)
    lse = torch.logsumexp(s, dim=-1) if s.shape[-1] > 0 else torch.full(s.shape[:2], NEG_INF, dtype=F64)
    max_logits = s.amax(dim=-1) if s.shape[-1] > 0 else torch.full(s.shape[:2], NEG_INF, dtype=F64)
    empty = torch.isneginf(lse)
    p = torch.exp(s - torch.where(empty, 0.0, lse).unsqueeze(-1))
    out = torch.einsum("rhj,rjd->rhd", p, keys[..., :512])
    if sink is not None:
        factor = 1.0 / (1.0 + torch.exp(sink.to(F64).unsqueeze(0) - lse))
        out = out * torch.where(empty, 0.0, factor).unsqueeze(-1)
    out = torch.where(empty.unsqueeze(-1), 0.0, out)
    return out, lse, max_logits


def gather_keys(deq: torch.Tensor, idx: torch.Tensor, count: torch.Tensor):
    """deq [slots, 1, d]; idx [R, k] int; count [R]: entries j < count are eligible.
    -> keys [R, k, d], valid [R, k]."""
    slots = deq.shape[0]
    idx = idx.cpu().long()
    j = torch.arange(idx.shape[1]).unsqueeze(0)
    valid = (idx >= 0) & (idx < slots) & (j < count.cpu().long().unsqueeze(1))
    keys = deq[:, 0][torch.where(valid, idx, 0)]
    return keys, valid


def sparse_decode_ref(q, cache, fmt, indices, topk_length=None, extra=None, attn_sink=None, softmax_scale=None,
                      k_scale=1.0):
    """extra: (extra_cache, extra_fmt, extra_indices, extra_topk_length) or None.
    -> out [b, s_q, h, 512], lse [b, s_q, h] float64 (CPU)."""
    b, s_q, h, d = q.shape
    scale = softmax_scale if softmax_scale is not None else d ** -0.5

    def key_set(c, f, idx, tl):
        deq = dequantize(c, f, k_scale)
        k = idx.shape[-1]
        cnt = torch.full((b,), k) if tl is None else tl.cpu().long().clamp(0, k)
        cnt = cnt.repeat_interleave(s_q)
        return gather_keys(deq, idx.reshape(b * s_q, k), cnt)

    keys, valid = key_set(cache, fmt, indices, topk_length)
    if extra is not None:
        k2, v2 = key_set(*extra)
        keys, valid = torch.cat([keys, k2], dim=1), torch.cat([valid, v2], dim=1)
    out, lse, _ = attend(q.cpu().reshape(b * s_q, h, d), keys, valid, scale,
                         None if attn_sink is None else attn_sink.cpu())
    return out.reshape(b, s_q, h, 512), lse.reshape(b, s_q, h)


def sparse_prefill_ref(q, kv, indices, topk_length=None, attn_sink=None, softmax_scale=None):
    s_q, h, d = q.shape
    kv2 = kv.cpu().reshape(kv.shape[0], 1, d).to(F64)
    idx = indices.cpu().reshape(s_q, -1)
    k = idx.shape[1]
    cnt = torch.full((s_q,), k) if topk_length is None else topk_length.cpu().long().clamp(0, k)
    keys, valid = gather_keys(kv2, idx, cnt)
    scale = softmax_scale if softmax_scale is not None else d ** -0.5
    return attend(q.cpu(), keys, valid, scale, None if attn_sink is None else attn_sink.cpu())


def dense_decode_ref(q, cache, fmt, block_table, seqlens, causal=False, attn_sink=None, softmax_scale=None,
                     k_scale=1.0, q_scale=1.0):
    b, s_q, h_q, d = q.shape
    deq = dequantize(cache, fmt, k_scale)  # [slots, h_kv, d]
    nb, page = cache.shape[0], cache.shape[1]
    h_kv = deq.shape[1]
    bt = block_table.cpu().long()
    max_blocks = bt.shape[1]
    q64 = e4m3_f64(q.cpu().view(torch.uint8)) * float(torch.tensor(q_scale, dtype=torch.float32)) \
        if q.dtype == torch.float8_e4m3fn else q.cpu().to(F64)
    scale = softmax_scale if softmax_scale is not None else d ** -0.5
    out = torch.zeros(b, s_q, h_q, 512, dtype=F64)
    lse = torch.full((b, s_q, h_q), NEG_INF, dtype=F64)
    group = h_q // h_kv
    for i in range(b):
        L = int(min(max(int(seqlens[i]), 0), max_blocks * page))
        p = torch.arange(L)
        blk = bt[i, p // page] if L > 0 else torch.zeros(0, dtype=torch.long)
        ok = (blk >= 0) & (blk < nb)
        slot = torch.where(ok, blk, 0) * page + p % page
        for t in range(s_q):
            vis = ok & ((p <= L - s_q + t) if causal else torch.ones_like(ok))
            for g in range(h_kv):
                keys = deq[slot, g].unsqueeze(0)  # [1, L, d]
                o, l, _ = attend(q64[i, t, g * group:(g + 1) * group].unsqueeze(0), keys, vis.unsqueeze(0), scale,
                                 None if attn_sink is None else attn_sink.cpu()[g * group:(g + 1) * group])
                out[i, t, g * group:(g + 1) * group] = o[0]
                lse[i, t, g * group:(g + 1) * group] = l[0]
    return out, lse


def merge_ref(out_parts, lse_parts, attn_sink=None):
    op, lp = out_parts.cpu().to(F64), lse_parts.cpu().to(F64)
    finite = torch.isfinite(lp)
    lp_m = torch.where(finite, lp, NEG_INF)
    lse = torch.logsumexp(lp_m, dim=0)
    empty = torch.isneginf(lse)
    w = torch.where(finite, torch.exp(lp_m - torch.where(empty, 0.0, lse).unsqueeze(0)), 0.0)
    out = (torch.where(finite.unsqueeze(-1), op, 0.0) * w.unsqueeze(-1)).sum(0)
    if attn_sink is not None:
        out = out / (1.0 + torch.exp(attn_sink.cpu().to(F64).unsqueeze(0) - lse)).unsqueeze(-1)
    out = torch.where(empty.unsqueeze(-1), 0.0, out)
    return out, lse


# -------------------------------------------------------------------- judging (SPEC §6)
def assert_out_close(out: torch.Tensor, ref: torch.Tensor, what: str = "out"):
    o = out.detach().cpu().to(F64)
    assert o.shape == ref.shape, f"{what}: shape {tuple(o.shape)} vs {tuple(ref.shape)}"
    assert not torch.isnan(o).any(), f"{what}: NaN in the output"
    err = (o - ref).abs()
    ref_max = ref.abs().max().item() if ref.numel() else 0.0
    bound = 2e-2 * ref_max + 1e-3
    assert err.max().item() <= bound if err.numel() else True, \
        f"{what}: max |err| {err.max().item():.3g} > {bound:.3g}"
    nref = ref.norm().item()
    if nref > 0:
        rel = (o - ref).norm().item() / nref
        assert rel <= 1e-2, f"{what}: relative L2 error {rel:.3g} > 1e-2"


def assert_lse_close(lse: torch.Tensor, ref: torch.Tensor, what: str = "lse", rel_tol: float = 1e-4):
    l = lse.detach().cpu().to(F64)
    assert l.shape == ref.shape, f"{what}: shape {tuple(l.shape)} vs {tuple(ref.shape)}"
    for v in (float("inf"), NEG_INF):
        assert torch.equal(l == v, ref == v), f"{what}: {v} where the reference has {(ref == v).sum()} of them"
    assert not torch.isnan(l).any(), f"{what}: NaN"
    fin = torch.isfinite(ref)
    if fin.any():
        err = (l[fin] - ref[fin]).abs()
        bound = rel_tol * ref[fin].abs() + 1e-5
        bad = err > bound
        assert not bad.any(), f"{what}: |err| up to {err.max().item():.3g} ({int(bad.sum())} values past the bound)"


def poisoned(shape, dtype, device) -> torch.Tensor:
    """An output buffer filled with NaN: whatever the call does not write shows up."""
    return torch.full(shape, math.nan, dtype=dtype, device=device)
