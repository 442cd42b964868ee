import pytest
import torch

import smla
from reference import FORMAT_D_QK, dequantize, encode_rows, make_cache

FORMATS = [("bf16", 576), ("bf16", 512), ("fp16", 576), ("fp8_e4m3", 512), ("fp8_ds_mla", 576),
           ("fp8_model1", 512)]


def storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """Every byte of the tensor's storage, padding included."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage()).cpu().clone()


def expected_storage(before: torch.Tensor, cache: torch.Tensor, fmt: str, slots, rows: torch.Tensor):
    """The storage bytes after writing token rows (encode_rows' byte order) to slots."""
    store = before.clone()
    es = cache.element_size()
    page_stride, off0 = cache.stride(0) * es, cache.storage_offset() * es
    page = cache.shape[1]
    row_bytes = rows.shape[1]
    for slot, row in zip(slots, rows):
        blk, off = divmod(int(slot), page)
        base = off0 + blk * page_stride
        if fmt == "fp8_model1":
            store[base + off * 576: base + off * 576 + 576] = row[:576]
            store[base + page * 576 + off * 8: base + page * 576 + off * 8 + 8] = row[576:]
        else:
            start = base + off * row_bytes  # h_kv = 1: token rows are packed within a page
            store[start: start + row_bytes] = row
    return store


@pytest.mark.parametrize("fmt,d_qk", FORMATS)
def test_write_cache_bytes(device, fmt, d_qk):
    """Bit-exact against SPEC §2's writer rule computed here; nothing else in the storage
    (other slots, page padding) changes."""
    nb, page, T = 4, 8, 12
    k_scale = 0.3
    cache = make_cache(fmt, nb, page, d_qk, device=device, k_scale=k_scale)
    before = storage_bytes(cache)
    x = torch.randn(T, d_qk) * torch.logspace(-3, 1, T).unsqueeze(1)  # several tile magnitudes
    x[3, :64] = 0  # an all-zero tile: the 1e-4 floor
    x = x.to(torch.bfloat16)
    big = torch.zeros(T, d_qk + 64, dtype=torch.bfloat16)
    big[:, 64:] = x
    kv_c = big[:, 64:d_qk].to(device)        # a strided slice: rows d_qk + 64 apart
    k_pe = big[:, d_qk:].contiguous().to(device)
    slots = torch.randperm(nb * page)[:T].to(torch.int64)
    slots[2] = -1
    slots[5] = nb * page + 7
    slots[7] = -(1 << 40)
    smla.write_cache(kv_c, k_pe, slots.to(device), cache, cache_format=fmt, k_scale=k_scale)
    ok = (slots >= 0) & (slots < nb * page)
    rows = encode_rows(x[ok], fmt, k_scale)
    exp = expected_storage(before, cache, fmt, slots[ok].tolist(), rows)
    after = storage_bytes(cache)
    diff = (after != exp).nonzero()
    assert diff.numel() == 0, f"{diff.shape[0]} bytes differ, first at storage byte {diff[0].item()}"


@pytest.mark.parametrize("fmt,d_qk", FORMATS)
@pytest.mark.parametrize("slot_dtype", [torch.int32, torch.int64])
def test_gather_cache(device, fmt, d_qk, slot_dtype):
    """Rows dequantized in float32 (float(q) * scale) and rounded to bf16; zeros for invalid
    slots."""
    nb, page = 3, 16
    k_scale = 0.25
    cache = make_cache(fmt, nb, page, d_qk, device=device, k_scale=k_scale,
                       scale_mode="amax" if fmt == "fp8_ds_mla" else "pow2")
    slots = torch.tensor([0, 47, -1, 5, 48, 5, 1 << 20, 30], dtype=slot_dtype)
    out = smla.gather_cache(cache, slots.to(device), cache_format=fmt, k_scale=k_scale)
    assert out.shape == (8, d_qk) and out.dtype == torch.bfloat16
    deq = dequantize(cache, fmt, k_scale, dtype=torch.float32)[:, 0]
    ok = (slots >= 0) & (slots < nb * page)
    exp = torch.zeros(8, d_qk, dtype=torch.bfloat16)
    exp[ok] = deq[slots[ok].long()].to(torch.bfloat16)
    assert torch.equal(out.cpu(), exp)


@pytest.mark.parametrize("fmt", ["fp8_ds_mla", "fp8_model1"])
def test_write_then_read_roundtrip(device, fmt):
    """smla's writer and reader agree with the test's decoder, and the stored keys are the
    inputs up to e4m3 rounding (3 mantissa bits: relative error <= 2^-4 of each tile's
    scale * 448)."""
    d_qk = FORMAT_D_QK[fmt]
    cache = smla.empty_cache(4, 64, fmt, device=device)
    x = torch.randn(100, d_qk).to(torch.bfloat16)
    slots = torch.arange(100, dtype=torch.int64) * 2
    smla.write_cache(x[:, : d_qk - 64].to(device), x[:, d_qk - 64:].to(device), slots.to(device), cache)
    deq = dequantize(cache, fmt)[slots, 0]
    assert torch.equal(deq[:, d_qk - 64:], x[:, d_qk - 64:].double())  # RoPE unquantized
    err = (deq[:, : d_qk - 64] - x[:, : d_qk - 64].double()).abs()
    tile = 128 if fmt == "fp8_ds_mla" else 64
    amax = x[:, : d_qk - 64].double().abs().reshape(100, -1, tile).amax(-1).repeat_interleave(tile, 1)
    assert (err <= amax * 2 ** -3 + 1e-6).all()
    back = smla.gather_cache(cache, slots.to(device))
    assert torch.equal(back.cpu(), deq.float().to(torch.bfloat16))


def test_empty_cache_layouts():
    c = smla.empty_cache(5, 64, "fp8_model1")
    assert c.shape == (5, 64, 1, 584) and c.dtype == torch.uint8
    assert c.stride(0) == smla.model1_aligned_page_bytes(64) == 37440
    c = smla.empty_cache(5, 64, "fp8_ds_mla")
    assert c.shape == (5, 64, 1, 656) and c.dtype == torch.uint8
    c = smla.empty_cache(2, 16, "fp8_e4m3", d_qk=512, h_kv=2)
    assert c.shape == (2, 16, 2, 512) and c.dtype == torch.float8_e4m3fn
    assert smla.bytes_per_token("fp8_ds_mla", 576) == 656 and smla.bytes_per_token("fp8_model1", 512) == 584
