"""Devices: every Python entry point rejects, before anything runs, a tensor that is not on a
cpu or cuda device (a meta tensor would otherwise reach the fake implementation and come back
uninitialized) and tensors of one call on different devices, naming the argument.

Mixed CUDA devices are built from FakeTensors, which report a cuda device without a GPU: the
check reads only ``tensor.device``, so it runs the same on them as on real tensors, and it must
fire before anything touches them."""

import ctypes

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

import smla
from smla import flash_mla
from reference import make_cache

BF16, F32, I32, I64 = torch.bfloat16, torch.float32, torch.int32, torch.int64


def sentinel(shape, dtype):
    return torch.full(shape, 7, dtype=dtype)


# Each case: (name, call(**tensors), {argument: tensor}); the first argument is the one the
# others are compared with (the core's reference argument). Outputs are sentinels, so a
# rejected call that wrote anything shows.
def cases():
    q4 = torch.randn(2, 1, 16, 576, dtype=BF16)
    idx = torch.randint(0, 64, (2, 1, 8), dtype=I32)
    lengths = torch.tensor([3, 8], dtype=I32)
    sink = torch.zeros(16, dtype=F32)
    out4, lse3 = sentinel((2, 1, 16, 512), BF16), sentinel((2, 1, 16), F32)
    yield ("sparse_decode",
           lambda q, cache, indices, topk_length, extra_cache, extra_indices, extra_topk_length, attn_sink, out, lse:
           smla.sparse_decode(q, cache, indices, topk_length=topk_length, extra_cache=extra_cache,
                              extra_indices=extra_indices, extra_topk_length=extra_topk_length, attn_sink=attn_sink,
                              out=out, lse=lse),
           dict(q=q4, cache=make_cache("fp8_ds_mla", 4, 16), indices=idx, topk_length=lengths,
                extra_cache=make_cache("fp8_ds_mla", 2, 8), extra_indices=idx.clone() % 16,
                extra_topk_length=lengths.clone(), attn_sink=sink, out=out4, lse=lse3))

    q3 = torch.randn(3, 16, 576, dtype=BF16)
    yield ("sparse_prefill",
           lambda q, kv, indices, topk_length, attn_sink, out, lse, max_logits:
           smla.sparse_prefill(q, kv, indices, topk_length=topk_length, attn_sink=attn_sink, out=out, lse=lse,
                               max_logits=max_logits),
           dict(q=q3, kv=torch.randn(10, 576, dtype=BF16), indices=torch.zeros(3, 4, dtype=I32),
                topk_length=torch.ones(3, dtype=I32), attn_sink=sink.clone(), out=sentinel((3, 16, 512), BF16),
                lse=sentinel((3, 16), F32), max_logits=sentinel((3, 16), F32)))

    yield ("sparse_prefill (cache)",
           lambda q, cache, indices, topk_length, attn_sink, out, lse, max_logits:
           smla.sparse_prefill(q, indices=indices, cache=cache, topk_length=topk_length, attn_sink=attn_sink, out=out,
                               lse=lse, max_logits=max_logits),
           dict(q=q3.clone(), cache=make_cache("fp8_ds_mla", 2, 8), indices=torch.zeros(3, 4, dtype=I32),
                topk_length=torch.ones(3, dtype=I32), attn_sink=sink.clone(), out=sentinel((3, 16, 512), BF16),
                lse=sentinel((3, 16), F32), max_logits=sentinel((3, 16), F32)))

    yield ("dense_decode",
           lambda q, cache, block_table, seqlens, attn_sink, out, lse:
           smla.dense_decode(q, cache, block_table, seqlens, attn_sink=attn_sink, out=out, lse=lse),
           dict(q=q4.clone(), cache=torch.randn(4, 16, 1, 576, dtype=BF16), block_table=torch.zeros(2, 4, dtype=I32),
                seqlens=torch.tensor([5, 9], dtype=I32), attn_sink=sink.clone(), out=out4.clone(), lse=lse3.clone()))

    yield ("merge_states",
           lambda out_parts, lse_parts, attn_sink, out, lse:
           smla.merge_states(out_parts, lse_parts, attn_sink=attn_sink, out=out, lse=lse),
           dict(out_parts=torch.randn(2, 3, 4, 8), lse_parts=torch.randn(2, 3, 4), attn_sink=torch.zeros(4),
                out=sentinel((3, 4, 8), F32), lse=sentinel((3, 4), F32)))

    yield ("write_cache",
           lambda cache, kv_c, k_pe, slot_mapping: smla.write_cache(kv_c, k_pe, slot_mapping, cache),
           dict(cache=torch.zeros(2, 4, 576, dtype=BF16), kv_c=torch.randn(3, 512, dtype=BF16),
                k_pe=torch.randn(3, 64, dtype=BF16), slot_mapping=torch.tensor([0, 5, 7], dtype=I64)))

    yield ("gather_cache",
           lambda cache, slots, out: smla.gather_cache(cache, slots, out=out),
           dict(cache=torch.randn(2, 4, 576, dtype=BF16), slots=torch.tensor([1, 2], dtype=I64),
                out=sentinel((2, 576), BF16)))

    yield ("req_id_per_token",
           lambda query_start_loc, out: smla.req_id_per_token(query_start_loc, out=out),
           dict(query_start_loc=torch.tensor([0, 2, 3], dtype=I32), out=sentinel((3,), I32)))

    yield ("page_table_from_req_to_token",
           lambda req_to_token, req_pool_indices, seq_lens, out:
           smla.page_table_from_req_to_token(req_to_token, req_pool_indices, seq_lens, 4, out=out),
           dict(req_to_token=torch.arange(16, dtype=I32).view(2, 8), req_pool_indices=torch.tensor([1, 0], dtype=I32),
                seq_lens=torch.tensor([5, 8], dtype=I32), out=sentinel((2, 2), I32)))

    yield ("positions_to_slots",
           lambda block_table, req_id, positions, out: smla.positions_to_slots(block_table, 4, req_id, positions,
                                                                               out=out),
           dict(block_table=torch.zeros(2, 3, dtype=I32), req_id=torch.tensor([0, 1], dtype=I32),
                positions=torch.zeros(2, 2, dtype=I32), out=sentinel((2, 2), I32)))

    yield ("sliding_window_indices",
           lambda positions, out: smla.sliding_window_indices(positions, 2, out=out),
           dict(positions=torch.tensor([0, 3, 5], dtype=I32), out=sentinel((3, 2), I32)))

    yield ("compressed_slot_mapping",
           lambda positions, req_id, block_table, out: smla.compressed_slot_mapping(positions, req_id, block_table, 4,
                                                                                    8, out=out),
           dict(positions=torch.tensor([3, 7], dtype=I64), req_id=torch.tensor([0, 1], dtype=I32),
                block_table=torch.zeros(2, 3, dtype=I32), out=sentinel((2,), I64)))

    yield ("dcp_local_seqlens",
           lambda seqlens, out: smla.dcp_local_seqlens(seqlens, world=2, rank=0, out=out),
           dict(seqlens=torch.tensor([5, 9], dtype=I32), out=sentinel((2,), I32)))

    yield ("dcp_local_topk",
           lambda positions, block_table, slots, counts, topk_length:
           smla.dcp_local_topk(positions, block_table, 4, world=2, rank=0, out=(slots, counts, topk_length)),
           dict(positions=torch.tensor([[[0, 5, 9]], [[2, -1, 4]]], dtype=I32),
                block_table=torch.zeros(2, 3, dtype=I32), slots=sentinel((2, 1, 3), I32), counts=sentinel((2, 1), I32),
                topk_length=sentinel((2,), I32)))

    yield ("decode_split_schedule",
           lambda lengths, out: smla.decode_split_schedule(lengths, max_keys=64, out=out),
           dict(lengths=torch.tensor([5, 9], dtype=I32), out=sentinel((3,), I32)))

    yield ("dcp_rescale",
           lambda out_local, lse_all, attn_sink: smla.dcp_rescale(out_local, lse_all, 0, attn_sink=attn_sink),
           dict(out_local=torch.randn(3, 4, 8), lse_all=torch.randn(2, 3, 4), attn_sink=torch.zeros(4)))

    # Checked before the process group is asked anything (none exists here).
    yield ("dcp_combine",
           lambda out_local, lse_local, attn_sink: smla.dcp_combine(out_local, lse_local, attn_sink=attn_sink),
           dict(out_local=torch.randn(3, 4, 8), lse_local=torch.randn(3, 4), attn_sink=torch.zeros(4)))

    yield ("get_mla_metadata",
           lambda cache_seqlens: flash_mla.get_mla_metadata(cache_seqlens, 1, 1),
           dict(cache_seqlens=torch.tensor([5, 9], dtype=I32)))

    yield ("flash_mla_with_kvcache (sparse)",
           lambda q, k_cache, indices, attn_sink, extra_k_cache, extra_indices_in_kvcache, topk_length,
           extra_topk_length: flash_mla.flash_mla_with_kvcache(
               q, k_cache, None, None, 512, None, is_fp8_kvcache=True, indices=indices, attn_sink=attn_sink,
               extra_k_cache=extra_k_cache, extra_indices_in_kvcache=extra_indices_in_kvcache,
               topk_length=topk_length, extra_topk_length=extra_topk_length),
           dict(q=q4.clone(), k_cache=make_cache("fp8_ds_mla", 4, 16).unsqueeze(2), indices=idx.clone(),
                attn_sink=sink.clone(), extra_k_cache=make_cache("fp8_ds_mla", 2, 8).unsqueeze(2),
                extra_indices_in_kvcache=idx.clone() % 16, topk_length=lengths.clone(),
                extra_topk_length=lengths.clone()))

    yield ("flash_mla_with_kvcache (dense)",
           lambda q, k_cache, block_table, cache_seqlens, attn_sink: flash_mla.flash_mla_with_kvcache(
               q, k_cache, block_table, cache_seqlens, 512, None, attn_sink=attn_sink),
           dict(q=q4.clone(), k_cache=torch.randn(4, 16, 1, 576, dtype=BF16), block_table=torch.zeros(2, 4, dtype=I32),
                cache_seqlens=torch.tensor([5, 9], dtype=I32), attn_sink=sink.clone()))

    yield ("flash_mla_sparse_fwd",
           lambda q, kv, indices, attn_sink, topk_length: flash_mla.flash_mla_sparse_fwd(
               q, kv, indices, 0.1, attn_sink=attn_sink, topk_length=topk_length),
           dict(q=q3.clone(), kv=torch.randn(10, 1, 576, dtype=BF16), indices=torch.zeros(3, 1, 4, dtype=I32),
                attn_sink=sink.clone(), topk_length=torch.ones(3, dtype=I32)))

    yield ("flash_mla_sparse_fwd (paged)",
           lambda q, kv, indices, attn_sink, topk_length: flash_mla.flash_mla_sparse_fwd(
               q, kv, indices, 0.1, attn_sink=attn_sink, topk_length=topk_length),
           dict(q=q3.clone(), kv=make_cache("fp8_ds_mla", 2, 8).unsqueeze(2), indices=torch.zeros(3, 1, 4, dtype=I32),
                attn_sink=sink.clone(), topk_length=torch.ones(3, dtype=I32)))


CASES = {name: (call, tensors) for name, call, tensors in cases()}
ARGUMENTS = [pytest.param(name, arg, id=f"{name}-{arg}") for name, (_, tensors) in CASES.items() for arg in tensors]


def fresh(name):
    """The call and a fresh copy of its tensors (a case may be used many times)."""
    call, tensors = CASES[name]
    return call, {k: v.clone() for k, v in tensors.items()}


def expect_rejected(name, call, tensors, *fragments):
    before = {k: v.clone() for k, v in tensors.items() if v.device.type == "cpu" and not isinstance(v, FakeTensor)}
    with pytest.raises(smla.SmlaError) as info:
        call(**tensors)
    msg = str(info.value)
    for f in fragments:
        assert f in msg, f"{name}: {f!r} not in {msg!r}"
    for k, b in before.items():
        assert torch.equal(tensors[k], b), f"{name}: a rejected call wrote {k}"
    return info.value


def test_the_cases_run_on_cpu():
    # The unmodified cases are valid calls (all but dcp_combine, which needs a process group),
    # so every rejection below is the device's doing.
    for name in CASES:
        if name == "dcp_combine":
            continue
        call, tensors = fresh(name)
        call(**tensors)


@pytest.mark.parametrize("name,arg", ARGUMENTS)
def test_meta_tensor_is_rejected(name, arg):
    call, tensors = fresh(name)
    tensors[arg] = tensors[arg].to("meta")
    e = expect_rejected(name, call, tensors, f"{arg} must be on cpu or a cuda device, got on meta")
    assert (e.argument, e.expected, e.given) == (arg, "on cpu or a cuda device", "on meta")


def test_write_cache_with_meta_kv_c_writes_nothing():
    cache = torch.zeros(2, 4, 576, dtype=BF16)
    kv = torch.randn(3, 576, dtype=BF16)
    with pytest.raises(smla.SmlaError, match="kv_c must be on cpu or a cuda device, got on meta"):
        smla.write_cache(kv[:, :512].to("meta"), kv[:, 512:], torch.tensor([0, 1, 2]), cache)
    assert not cache.any()


_FAKE_MODE = FakeTensorMode()


def on_fake(t, device):
    """A FakeTensor shaped like t, reporting `device`."""
    return FakeTensor(_FAKE_MODE, torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta"),
                      torch.device(device))


@pytest.mark.parametrize("name,arg", ARGUMENTS)
def test_cuda_tensor_among_cpu_tensors_is_rejected(name, arg):
    call, tensors = fresh(name)
    ref = next(iter(tensors))
    if arg == ref:
        pytest.skip("the reference argument itself")
    tensors[arg] = on_fake(tensors[arg], "cuda:0")
    expect_rejected(name, call, tensors, f"{arg} must be on cpu like {ref}, got on cuda:0")


# Where CUDA is usable, a FakeTensor initializes a context on the device it reports, so cuda:1
# needs a second GPU; on CPU-only machines and with two GPUs the case runs.
_NO_SECOND_GPU = torch.cuda.is_available() and torch.cuda.device_count() < 2


@pytest.mark.skipif(_NO_SECOND_GPU, reason="a FakeTensor on cuda:1 needs a second GPU where CUDA is usable")
@pytest.mark.parametrize("name,arg", ARGUMENTS)
def test_tensor_on_another_cuda_device_is_rejected(name, arg):
    call, tensors = fresh(name)
    ref = next(iter(tensors))
    if arg == ref:
        pytest.skip("the reference argument itself")
    tensors = {k: on_fake(v, "cuda:1" if k == arg else "cuda:0") for k, v in tensors.items()}
    expect_rejected(name, call, tensors, f"{arg} must be on cuda:0 like {ref}, got on cuda:1")


def test_cpu_tensor_among_cuda_tensors_is_rejected():
    # q on cuda, indices on the CPU: named, whichever way round.
    call, tensors = fresh("sparse_decode")
    tensors = {k: (v if k == "indices" else on_fake(v, "cuda:0")) for k, v in tensors.items()}
    expect_rejected("sparse_decode", call, tensors, "indices must be on cuda:0 like q, got on cpu")


def test_descales_may_live_anywhere_but_meta():
    # SGLang's descales are read on the host (.item()): any real device will do, not meta.
    q = torch.randn(1, 1, 4, 576, dtype=BF16).to(torch.float8_e4m3fn)
    cache = torch.randn(2, 16, 1, 576, dtype=BF16).to(torch.float8_e4m3fn)
    bt, sl = torch.zeros(1, 2, dtype=I32), torch.tensor([3], dtype=I32)
    flash_mla.flash_mla_with_kvcache(q, cache, bt, sl, 512, None, descale_q=torch.ones(1), descale_k=torch.ones(1))
    for arg in ("descale_q", "descale_k"):
        with pytest.raises(smla.SmlaError, match=f"{arg} must be on cpu or a cuda device, got on meta"):
            flash_mla.flash_mla_with_kvcache(q, cache, bt, sl, 512, None, **{arg: torch.ones(1, device="meta")})


def test_fake_tensors_still_trace():
    # torch.compile traces the wrappers with FakeTensors on the real device: the check lets
    # them through (test_torch_integration covers the full compile).
    q = torch.randn(2, 1, 16, 576, dtype=BF16)
    cache = torch.randn(4, 16, 576, dtype=BF16)
    idx = torch.randint(0, 64, (2, 1, 8), dtype=I32)
    with FakeTensorMode() as mode:
        out, lse = smla.sparse_decode(mode.from_tensor(q), mode.from_tensor(cache), mode.from_tensor(idx))
    assert out.shape == (2, 1, 16, 512) and lse.shape == (2, 1, 16)


# ------------------------------------------------------------------ the binding
# Any DLPack producer may reach the binding (the wrappers pass non-torch arrays through): a
# DLPack device no backend runs on is refused there, by name. A capsule is built by hand for
# device types torch cannot export here.
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


def _capsule_on(t, device_type):
    """A DLPack capsule (no deleter) viewing float32 tensor t as if on `device_type`; the
    second value keeps what it points to alive."""
    shape = (ctypes.c_int64 * t.dim())(*t.shape)
    strides = (ctypes.c_int64 * t.dim())(*t.stride())
    m = _DLManagedTensor()
    m.dl_tensor = _DLTensor(t.data_ptr(), _DLDevice(device_type, 0), t.dim(), _DLDataType(2, 32, 1), shape, strides, 0)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(m), b"dltensor", None), (t, shape, strides, m)


@pytest.mark.parametrize("device_type,given", [(10, "DLPack device type 10 (ROCm)"), (7, "DLPack device type 7 (Vulkan)"),
                                               (99, "DLPack device type 99")])
def test_binding_refuses_other_dlpack_devices(device_type, given):
    parts, lses = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 4)
    out, lse = sentinel((3, 4, 8), F32), sentinel((3, 4), F32)
    cap, _keep = _capsule_on(lses, device_type)
    with pytest.raises(smla.SmlaError) as info:
        smla._smla.merge_states(out_parts=parts, lse_parts=cap, attn_sink=None, out=out, lse=lse, stream=0)
    assert str(info.value) == f"lse_parts must be on cpu or a cuda device, got on {given}"
    assert torch.equal(out, sentinel((3, 4, 8), F32)) and torch.equal(lse, sentinel((3, 4), F32))
    cap, _keep = _capsule_on(lses, 1)  # the same capsule on kDLCPU is taken
    smla._smla.merge_states(out_parts=parts, lse_parts=cap, attn_sink=None, out=out, lse=lse, stream=0)
    assert not torch.equal(lse, sentinel((3, 4), F32))
