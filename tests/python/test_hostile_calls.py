"""Hostile calls (SPEC §5): valid calls of every public operation, mutated at random — another
dtype or rank, empty, sliced, transposed, broadcast (stride 0) or grown tensors, extreme index
values, NaN and infinity, out-of-range or non-numeric scalars — must either run or raise
smla.SmlaError, and a rejected call writes nothing. No other exception, no crash."""

import random

import pytest
import torch

import smla
import smla.flash_mla as fm
from reference import make_cache

BF16, F32, I32, I64 = torch.bfloat16, torch.float32, torch.int32, torch.int64
DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.int8, torch.int32, torch.int64,
          torch.uint8, torch.bool, torch.float8_e4m3fn]
# In-range values stay small: a large valid one would size an output from it (window=10**9 with
# out=None allocates 8 GB), a run's memory and time, not a hostile call the library can refuse.
SCALARS = [0, -1, 1, 3, 7, 15, 17, 64, 2**31, -2**31 - 1, 2**63, 2.5, float("nan"), float("inf"), None, True, "x"]
OUTPUTS = ("out", "lse", "cache")  # what a rejected call must leave as it was
CALLS = 2000


def base_calls(device):
    """(name, function, keyword arguments) of one valid call per operation and cache format."""
    b, h, k = 2, 8, 8
    t = dict(device=device)

    def full(shape, dtype):
        return torch.full(shape, 7, dtype=dtype, device=device)

    bt = torch.tensor([[0, 2, 4], [5, 1, -1]], dtype=I32, **t)
    return [
        ("sparse_decode", smla.sparse_decode, dict(
            q=torch.randn(b, 1, h, 576, dtype=BF16, **t), cache=make_cache("fp8_ds_mla", 4, 16, **t),
            indices=torch.randint(0, 64, (b, 1, k), dtype=I32, **t), topk_length=torch.tensor([8, 3], dtype=I32, **t),
            attn_sink=torch.randn(h, **t), out=full((b, 1, h, 512), BF16), lse=full((b, 1, h), F32))),
        ("sparse_decode model1 + extra", smla.sparse_decode, dict(
            q=torch.randn(b, 2, h, 512, dtype=BF16, **t), cache=make_cache("fp8_model1", 4, 64, **t),
            indices=torch.randint(0, 256, (b, 2, k), dtype=I32, **t),
            extra_cache=make_cache("fp8_model1", 2, 64, **t),
            extra_indices=torch.randint(0, 128, (b, 2, 4), dtype=I32, **t),
            extra_topk_length=torch.tensor([4, 1], dtype=I32, **t), attn_sink=torch.randn(h, **t))),
        ("sparse_decode bf16", smla.sparse_decode, dict(
            q=torch.randn(b, 1, h, 576, dtype=BF16, **t), cache=make_cache("bf16", 3, 16, 576, **t),
            indices=torch.randint(-1, 48, (b, 1, k), dtype=I32, **t), softmax_scale=0.1)),
        ("sparse_prefill", smla.sparse_prefill, dict(
            q=torch.randn(5, h, 576, dtype=BF16, **t), kv=torch.randn(30, 576, dtype=BF16, **t),
            indices=torch.randint(-1, 30, (5, 12), dtype=I32, **t),
            topk_length=torch.tensor([12, 3, 0, 5, 7], dtype=I32, **t), attn_sink=torch.randn(h, **t))),
        ("sparse_prefill paged", smla.sparse_prefill, dict(
            q=torch.randn(5, h, 576, dtype=BF16, **t), indices=torch.randint(-1, 64, (5, 12), dtype=I32, **t),
            cache=make_cache("fp8_ds_mla", 4, 16, **t))),
        ("dense_decode bf16", smla.dense_decode, dict(
            q=torch.randn(b, 1, h, 576, dtype=BF16, **t), cache=make_cache("bf16", 6, 16, 576, **t),
            block_table=bt, seqlens=torch.tensor([40, 17], dtype=I32, **t), causal=True,
            out=full((b, 1, h, 512), BF16), lse=full((b, 1, h), F32))),
        ("dense_decode fp8", smla.dense_decode, dict(
            q=torch.randn(b, 2, h, 576, dtype=BF16, **t), cache=make_cache("fp8_e4m3", 6, 16, 576, **t),
            block_table=bt, seqlens=torch.tensor([40, 17], dtype=I32, **t), k_scale=0.5)),
        ("merge_states", smla.merge_states, dict(
            out_parts=torch.randn(3, 4, h, 64, **t), lse_parts=torch.randn(3, 4, h, **t), attn_sink=torch.randn(h, **t),
            out=full((4, h, 64), F32), lse=full((4, h), F32))),
        ("gather_cache", smla.gather_cache, dict(
            cache=make_cache("fp8_model1", 2, 64, **t), slots=torch.randint(-3, 140, (9,), dtype=I32, **t),
            out=full((9, 512), BF16))),
        ("write_cache", smla.write_cache, dict(
            kv_c=torch.randn(5, 512, dtype=BF16, **t), k_pe=torch.randn(5, 64, dtype=BF16, **t),
            slot_mapping=torch.randint(-1, 64, (5,), dtype=I64, **t), cache=make_cache("fp8_ds_mla", 4, 16, **t))),
        ("positions_to_slots", smla.positions_to_slots, dict(
            block_table=bt, page_size=16, req_id=torch.tensor([0, 1, 1], dtype=I32, **t),
            positions=torch.randint(-2, 60, (3, 7), dtype=I32, **t))),
        ("dcp_local_topk", smla.dcp_local_topk, dict(
            positions=torch.randint(-1, 60, (b, 1, 24), dtype=I32, **t), block_table=bt, page_size=16,
            world=2, rank=1, interleave=4)),
        ("sliding_window_indices", smla.sliding_window_indices, dict(
            positions=torch.tensor([5, 40], dtype=I32, **t), window=4, out=full((2, 4), I32))),
        ("decode_split_schedule", smla.decode_split_schedule, dict(
            lengths=torch.tensor([5, 400, 0], dtype=I32, **t), max_keys=512)),
        ("dcp_rescale", smla.dcp_rescale, dict(
            out_local=torch.randn(3, h, 512, **t), lse_all=torch.randn(2, 3, h, **t), rank=1,
            attn_sink=torch.randn(h, **t))),
        ("flash_mla_with_kvcache sparse", fm.flash_mla_with_kvcache, dict(
            q=torch.randn(b, 1, h, 576, dtype=BF16, **t), k_cache=make_cache("fp8_ds_mla", 4, 16, four_d=True, **t),
            block_table=None, cache_seqlens=None, head_dim_v=512, is_fp8_kvcache=True,
            indices=torch.randint(-1, 64, (b, 1, k), dtype=I32, **t), attn_sink=torch.randn(h, **t),
            topk_length=torch.tensor([8, 2], dtype=I32, **t))),
        ("flash_mla_with_kvcache dense", fm.flash_mla_with_kvcache, dict(
            q=torch.randn(b, 1, h, 576, dtype=BF16, **t), k_cache=make_cache("fp8_e4m3", 6, 16, 576, **t),
            block_table=bt, cache_seqlens=torch.tensor([40, 17], dtype=I32, **t), head_dim_v=512, causal=True,
            descale_q=0.5, descale_k=torch.tensor([0.25], **t))),
        ("flash_mla_sparse_fwd", fm.flash_mla_sparse_fwd, dict(
            q=torch.randn(5, h, 576, dtype=BF16, **t), kv=torch.randn(30, 1, 576, dtype=BF16, **t),
            indices=torch.randint(-1, 30, (5, 1, 12), dtype=I32, **t), sm_scale=0.05, d_v=512,
            attn_sink=torch.randn(h, **t), topk_length=torch.tensor([12, 3, 0, 5, 7], dtype=I32, **t),
            indexer_topk=12)),
    ]


def mutate_tensor(x, rng):
    """One random change of a tensor's dtype, shape, strides or values."""
    m = rng.randrange(14)
    d = rng.randrange(x.dim()) if x.dim() > 0 else None
    if m == 13:
        return rng.choice([None, 3, [1, 2]])  # not a tensor at all
    if m == 0:
        return x.view(torch.uint8) if x.dtype == torch.float8_e4m3fn else x.to(rng.choice(DTYPES))
    if m == 1:
        return x.unsqueeze(rng.randrange(x.dim() + 1))
    if d is None:
        return x
    if m == 2:
        return x.flatten()
    if m == 3:
        return x.narrow(d, 0, 0)  # empty
    if m == 4:
        return x.narrow(d, 0, x.shape[d] // 2)
    if m == 5 and x.dim() > 1:
        return x.transpose(0, -1)
    if m == 6:
        return x[..., ::2]
    if m == 7:
        return x.as_strided(x.shape, [0] * x.dim())  # every element the first one
    if m == 8:
        shape = list(x.shape)
        shape[d] += 1
        return torch.zeros(shape, dtype=x.dtype, device=x.device)
    if m == 9 and x.numel() > 0:
        return x.reshape(-1)[0]  # 0-d
    y = x.contiguous().clone()
    flat = y.view(-1)
    if flat.numel() == 0:
        return y
    i = rng.randrange(flat.numel())
    if y.dtype in (I32, I64):
        flat[i] = rng.choice([-2**31, 2**31 - 1, -1, 63, 64, 65, 10**6, -10**6])
    elif y.is_floating_point() and y.dtype != torch.float8_e4m3fn:
        flat[i] = rng.choice([float("nan"), float("inf"), float("-inf"), 1e30])
    elif y.dtype == torch.uint8:
        flat[i] = rng.choice([0x7F, 0xFF, 0x80])  # e4m3 NaN and -0 bytes
    return y


def bitwise(x):
    """A copy of x's bytes (NaN compares equal to itself there)."""
    return x.contiguous().reshape(-1).view(torch.uint8).clone()


def test_unmutated_calls_run(device):
    """The calls the mutations start from are valid: a rejection below comes from a mutation."""
    for name, fn, kwargs in base_calls(device):
        fn(**kwargs)


def test_mutated_calls_run_or_raise_smla_error(device):
    rng = random.Random(torch.initial_seed())
    calls = base_calls(device)
    rejected = 0
    for it in range(CALLS):
        name, fn, kwargs = rng.choice(calls)
        kw = dict(kwargs)
        for _ in range(rng.randrange(1, 3)):
            key = rng.choice(list(kw))
            kw[key] = mutate_tensor(kw[key], rng) if isinstance(kw[key], torch.Tensor) else rng.choice(SCALARS)
        # the outputs' bytes, read before the call: a rejected call keeps them
        before = {k: bitwise(v) for k, v in kw.items() if k in OUTPUTS and isinstance(v, torch.Tensor)}
        what = f"call {it}: {name} " + ", ".join(
            f"{k}={tuple(v.shape)} {v.dtype} {v.stride()}" if isinstance(v, torch.Tensor) else f"{k}={v!r}"
            for k, v in kw.items())
        try:
            fn(**kw)
        except smla.SmlaError:
            rejected += 1
            for k, b in before.items():
                assert torch.equal(bitwise(kw[k]), b), f"{what}: rejected, yet {k} was written"
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"{what}: {type(e).__name__}: {e}")
    if device == "cuda":
        torch.cuda.synchronize()  # an asynchronous fault would surface here
    assert 0 < rejected < CALLS  # the mutations reach both outcomes
