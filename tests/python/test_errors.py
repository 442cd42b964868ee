"""Bad input: smla.SmlaError (a ValueError) naming the argument, what was expected and what
was given, raised before anything is written (SPEC §5)."""

import pytest
import torch

import smla
from reference import make_cache

BF16, F32, I32, I64 = torch.bfloat16, torch.float32, torch.int32, torch.int64


def sentinel(shape, dtype, device):
    return torch.full(shape, 7, dtype=dtype, device=device)


def expect_error(fn, *fragments, outputs=()):
    """fn raises SmlaError whose message holds every fragment; outputs keep their values."""
    before = [o.clone() for o in outputs]
    with pytest.raises(smla.SmlaError) as info:
        fn()
    msg = str(info.value)
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"
    assert isinstance(info.value, ValueError)
    for o, b in zip(outputs, before):
        assert torch.equal(o, b), "a rejected call wrote to an output"
    return info.value


@pytest.fixture
def decode_case(device):
    b, s_q, h, topk = 2, 1, 16, 8
    return dict(
        q=torch.randn(b, s_q, h, 576, dtype=BF16, device=device),
        cache=make_cache("fp8_ds_mla", 4, 16, device=device),
        indices=torch.randint(0, 64, (b, s_q, topk), dtype=I32, device=device),
        out=sentinel((b, s_q, h, 512), BF16, device),
        lse=sentinel((b, s_q, h), F32, device),
    )


def test_sparse_decode_errors(device, decode_case):
    c = decode_case
    q, cache, idx, out, lse = c["q"], c["cache"], c["indices"], c["out"], c["lse"]
    outs = (out, lse)

    def call(**kw):
        args = dict(q=q, cache=cache, indices=idx, out=out, lse=lse)
        args.update(kw)
        return lambda: smla.sparse_decode(args.pop("q"), args.pop("cache"), args.pop("indices"), **args)

    e = expect_error(call(attn_sink=torch.zeros(16, dtype=BF16, device=device)),
                     "attn_sink must be float32 of shape (16,), got bfloat16 (16,)", outputs=outs)
    assert (e.argument, e.expected, e.given) == ("attn_sink", "float32 of shape (16,)", "bfloat16 (16,)")
    expect_error(call(q=q.float()), "q must be bfloat16", "got float32 (2, 1, 16, 576)", outputs=outs)
    expect_error(call(indices=idx.long()), "indices must be int32", "got int64", outputs=outs)
    expect_error(call(cache_format="fp4"), "cache_format must be one of", "got 'fp4'", outputs=outs)
    expect_error(call(cache_format="bf16"), "cache must be bfloat16", "got uint8", outputs=outs)
    expect_error(call(topk_length=torch.zeros(3, dtype=I32, device=device)), "topk_length", "(2,)", "(3,)",
                 outputs=outs)
    expect_error(call(extra_indices=idx), "extra_indices must be nothing when extra_cache is absent", outputs=outs)
    expect_error(call(softmax_scale=-1.0), "softmax_scale must be a positive finite float", outputs=outs)
    expect_error(call(q=q[..., :512]), "q must be", "576", outputs=outs)
    expect_error(call(lse=out), "lse", outputs=(out,))
    bad_out = sentinel((2, 1, 16, 256), BF16, device)
    expect_error(call(out=bad_out), "out must be bfloat16 of shape (2, 1, 16, 512)", "(2, 1, 16, 256)",
                 outputs=(bad_out, lse))
    expect_error(call(extra_cache=cache, extra_indices=idx, extra_cache_format="fp8"), "extra_cache_format",
                 outputs=outs)


def test_sparse_prefill_errors(device):
    q = torch.randn(3, 8, 576, dtype=BF16, device=device)
    kv = torch.randn(10, 576, dtype=BF16, device=device)
    idx = torch.zeros(3, 4, dtype=I32, device=device)
    out, lse, ml = sentinel((3, 8, 512), BF16, device), sentinel((3, 8), F32, device), sentinel((3, 8), F32, device)
    outs = (out, lse, ml)
    expect_error(lambda: smla.sparse_prefill(q, kv[:, :512], idx, out=out, lse=lse, max_logits=ml), "kv",
                 outputs=outs)
    expect_error(lambda: smla.sparse_prefill(q, kv, idx, topk_length=torch.zeros(3, dtype=I64, device=device),
                                             out=out, lse=lse, max_logits=ml), "topk_length", "int64", outputs=outs)
    expect_error(lambda: smla.sparse_prefill(q, kv, idx, out=out, lse=lse, max_logits=lse), "max_logits",
                 outputs=(out, lse))


def test_sparse_prefill_paged_errors(device):
    q = torch.randn(3, 8, 576, dtype=BF16, device=device)
    kv = torch.randn(10, 576, dtype=BF16, device=device)
    cache = make_cache("fp8_ds_mla", 2, 16, device=device)
    idx = torch.zeros(3, 4, dtype=I32, device=device)
    out, lse, ml = sentinel((3, 8, 512), BF16, device), sentinel((3, 8), F32, device), sentinel((3, 8), F32, device)
    outs = (out, lse, ml)

    def call(q=q, kv=None, **kw):
        return lambda: smla.sparse_prefill(q, kv, **{"indices": idx, "out": out, "lse": lse, "max_logits": ml, **kw})

    e = expect_error(call(kv=kv, cache=cache), "kv must be None when cache is given", outputs=outs)
    assert e.argument == "kv"
    e = expect_error(call(), "kv must be", "when cache is not given", "got None", outputs=outs)
    assert e.argument == "kv"
    expect_error(call(kv=kv, cache_format="bf16"), "cache_format must be None when cache is not given", outputs=outs)
    expect_error(call(cache=cache, indices=None), "indices must be", "got None", outputs=outs)
    # d_qk of the cache against q's: the core names q and the cache's format
    expect_error(call(q=q[..., :512], cache=cache), "q must be bfloat16 of shape (*, *, 576)", "fp8_ds_mla cache",
                 "got bfloat16 (3, 8, 512)", outputs=outs)
    expect_error(call(cache=make_cache("bf16", 2, 16, 512, device=device)), "q must be", "512", "bf16 cache",
                 outputs=outs)
    expect_error(call(q=q[..., :512], cache=make_cache("fp8_model1", 2, 16, device=device), cache_format="fp8_ds_mla"),
                 "cache must be", "656 bytes for format fp8_ds_mla", "584 bytes", outputs=outs)
    expect_error(call(cache=make_cache("bf16", 2, 16, 576, h_kv=2, device=device)), "cache must be", "h_kv = 1",
                 outputs=outs)
    # formats sparse prefill does not take: inferred (named as cache) or named (cache.format)
    e4m3 = make_cache("fp8_e4m3", 2, 16, 576, device=device)
    expect_error(call(cache=e4m3), "cache must be a cache of format fp8_ds_mla", "format fp8_e4m3, inferred",
                 outputs=outs)
    expect_error(call(cache=e4m3, cache_format="fp8_e4m3"), "cache.format must be", outputs=outs)
    expect_error(call(cache=cache, cache_format="fp4"), "cache_format must be one of", "got 'fp4'", outputs=outs)
    expect_error(call(cache=cache[..., :600]), "cache must be", "600 bytes", outputs=outs)
    expect_error(call(cache=cache, indices=idx.long()), "indices must be int32", outputs=outs)


def test_dense_decode_errors(device):
    q = torch.randn(1, 1, 6, 576, dtype=BF16, device=device)
    cache = torch.randn(4, 64, 4, 576, dtype=BF16, device=device)
    bt, sl = torch.zeros(1, 4, dtype=I32, device=device), torch.zeros(1, dtype=I32, device=device)
    out, lse = sentinel((1, 1, 6, 512), BF16, device), sentinel((1, 1, 6), F32, device)
    expect_error(lambda: smla.dense_decode(q, cache, bt, sl, out=out, lse=lse),
                 "h_q must be a multiple of h_kv = 4", "got 6", outputs=(out, lse))
    q4 = q[:, :, :4]
    out4, lse4 = out[:, :, :4], lse[:, :, :4]
    expect_error(lambda: smla.dense_decode(q4, cache, bt, sl.long(), out=out4, lse=lse4),
                 "seqlens must be int32", outputs=(out, lse))
    fp8 = cache.to(torch.float8_e4m3fn)
    expect_error(lambda: smla.dense_decode(q4, fp8, bt, sl, k_scale=0.0, out=out4, lse=lse4),
                 "k_scale must be a positive finite float", outputs=(out, lse))
    expect_error(lambda: smla.dense_decode(q4.half(), cache, bt, sl, out=out4, lse=lse4), "q must be",
                 outputs=(out, lse))


def test_merge_and_cache_errors(device):
    out, lse = sentinel((3, 4, 8), F32, device), sentinel((3, 4), F32, device)
    expect_error(lambda: smla.merge_states(torch.randn(2, 3, 4, 8, device=device), torch.randn(2, 3, 5, device=device),
                                           out=out, lse=lse),
                 "lse_parts must be float32 of shape (2, 3, 4), got float32 (2, 3, 5)", outputs=(out, lse))
    cache = make_cache("fp8_model1", 2, 8, device=device)
    kv_c, k_pe = torch.randn(3, 448, dtype=BF16, device=device), torch.randn(3, 64, dtype=BF16, device=device)
    expect_error(lambda: smla.write_cache(kv_c, k_pe, torch.zeros(3, dtype=I32, device=device), cache),
                 "slot_mapping must be int64", outputs=(cache,))
    expect_error(lambda: smla.write_cache(kv_c[:, :400], k_pe, torch.zeros(3, dtype=I64, device=device), cache),
                 "kv_c", outputs=(cache,))
    g = sentinel((3, 512), F32, device)
    expect_error(lambda: smla.gather_cache(cache, torch.zeros(3, dtype=I32, device=device), out=g),
                 "out must be bfloat16 of shape (3, 512), got float32 (3, 512)", outputs=(g,))


def test_index_utility_errors(device):
    z = torch.zeros(3, dtype=I32, device=device)
    o = sentinel((3, 1), I32, device)
    expect_error(lambda: smla.sliding_window_indices(z, 0, out=o), "window must be at least 1", outputs=(o,))
    expect_error(lambda: smla.dcp_local_seqlens(z, world=2, rank=2), "rank must be between 0 and")
    expect_error(lambda: smla.req_id_per_token(z), "num_tokens must be given when out is not")
    expect_error(lambda: smla.positions_to_slots(torch.zeros(1, 2, dtype=I32, device=device), 0, z, z), "page_size")
    expect_error(lambda: smla.decode_split_schedule(z.long(), max_keys=10), "lengths", "int64")


def test_scalar_arguments_are_checked_before_the_binding(device):
    """Python scalars the core takes as int32 / int64 / float: a value outside the type, a
    non-number, a bool or a fractional float is an SmlaError naming the argument (the binding
    would raise its own TypeError, torch a RuntimeError for a negative size)."""
    z = torch.zeros(3, dtype=I32, device=device)
    bt = torch.zeros(1, 2, dtype=I32, device=device)
    expect_error(lambda: smla.positions_to_slots(bt, 2**31, z, z), "page_size must be an int32 value", "2147483648")
    expect_error(lambda: smla.positions_to_slots(bt, None, z, z), "page_size must be an integer, got NoneType None")
    expect_error(lambda: smla.positions_to_slots(bt, 16.5, z, z), "page_size must be an integer, got float 16.5")
    expect_error(lambda: smla.positions_to_slots(bt, float("nan"), z, z), "page_size must be an integer")
    expect_error(lambda: smla.positions_to_slots(bt, True, z, z), "page_size must be an integer, got bool True")
    o = sentinel((3, 1), I32, device)
    expect_error(lambda: smla.sliding_window_indices(z, -1), "window must be at least 1, got -1")
    expect_error(lambda: smla.sliding_window_indices(z, -2**31), "window must be at least 1")
    expect_error(lambda: smla.sliding_window_indices(z, 2**31, out=o), "window must be an int32 value", outputs=(o,))
    expect_error(lambda: smla.req_id_per_token(z, -1), "num_tokens must be at least 0, got -1")
    expect_error(lambda: smla.dcp_local_topk(z.view(1, 1, 3), bt, 16, world=2, rank=2**31),
                 "rank must be an int32 value")
    expect_error(lambda: smla.dcp_local_seqlens(z, world="2", rank=0), "world must be an integer, got str '2'")
    expect_error(lambda: smla.decode_split_schedule(z, max_keys=2**31), "max_keys must be an int32 value")
    expect_error(lambda: smla.dcp_owner_rank(2**63, 2), "p must be an int64 value")
    expect_error(lambda: smla.max_total_splits(4, 2**40), "num_units must be an int32 value")
    expect_error(lambda: smla.empty_cache(-1, 16), "num_blocks must be at least 0, got -1")
    expect_error(lambda: smla.empty_cache(2, 0, "fp8_model1"), "page_size must be at least 1, got 0")
    q = torch.randn(1, 1, 8, 576, dtype=BF16, device=device)
    cache = make_cache("fp8_ds_mla", 2, 16, device=device)
    idx = torch.zeros(1, 1, 4, dtype=I32, device=device)
    out, lse = sentinel((1, 1, 8, 512), BF16, device), sentinel((1, 1, 8), F32, device)
    expect_error(lambda: smla.sparse_decode(q, cache, idx, softmax_scale="x", out=out, lse=lse),
                 "softmax_scale must be a float, got str 'x'", outputs=(out, lse))
    expect_error(lambda: smla.sparse_decode(q, cache, idx, k_scale=None, out=out, lse=lse),
                 "k_scale must be a float, got NoneType None", outputs=(out, lse))
    # a tensor argument given as something else, or a required one as None
    expect_error(lambda: smla.sparse_decode(None, cache, idx), "q must be a torch.Tensor, got NoneType None")
    expect_error(lambda: smla.sparse_decode(q, cache, idx, attn_sink=[1.0] * 8, out=out, lse=lse),
                 "attn_sink must be a torch.Tensor, got list", outputs=(out, lse))
    expect_error(lambda: smla.gather_cache(cache, 3), "slots must be a torch.Tensor, got int 3")
    expect_error(lambda: smla.sparse_prefill(q[0], indices=None, cache=cache), "indices must be a torch.Tensor")
    # integral floats and 0-d integer tensors (anything with __index__) keep working
    assert smla.positions_to_slots(bt, 16.0, z[:1], z[:1]).tolist() == [0]
    assert smla.dcp_owner_rank(torch.tensor(5), 2) == 1


def test_capability_errors():
    expect_error(lambda: smla.why_not("foo"), "op must be one of", "got 'foo'")
    expect_error(lambda: smla.why_not("sparse_decode", backend="tpu"), "backend must be cpu or cuda_sm90")
    expect_error(lambda: smla.why_not("sparse_decode", format="fp4"), "format must be one of")
    expect_error(lambda: smla.empty_cache(1, 1, "xx"), "cache_format must be one of")


def test_flash_mla_errors(device, decode_case):
    from smla.flash_mla import flash_mla_sparse_fwd, flash_mla_with_kvcache
    c = decode_case
    k_cache = c["cache"].unsqueeze(2)
    expect_error(lambda: flash_mla_with_kvcache(c["q"], k_cache, None, None, 576, None, indices=c["indices"],
                                                is_fp8_kvcache=True), "head_dim_v must be 512, got 576")
    expect_error(lambda: flash_mla_with_kvcache(c["q"], k_cache, None, None, 512, None, causal=True,
                                                indices=c["indices"], is_fp8_kvcache=True), "causal must be False")
    expect_error(lambda: flash_mla_with_kvcache(c["q"], torch.randn(4, 16, 1, 576, dtype=BF16, device=device),
                                                None, None, 512, None), "block_table")
    expect_error(lambda: flash_mla_with_kvcache(c["q"], torch.randn(4, 16, 1, 576, dtype=BF16, device=device),
                                                None, None, 512, None, indices=c["indices"], is_fp8_kvcache=True),
                 "k_cache must be an FP8 cache")
    q = torch.randn(2, 4, 576, dtype=BF16, device=device)
    kv = torch.randn(8, 1, 576, dtype=BF16, device=device)
    expect_error(lambda: flash_mla_sparse_fwd(q, kv, torch.zeros(2, 1, 4, dtype=I32, device=device), 0.1, d_v=576),
                 "d_v must be 512")
    # a 4-D kv is a paged cache, its format inferred as the decode entry infers k_cache's
    expect_error(lambda: flash_mla_sparse_fwd(q, torch.randn(4, 16, 1, 576, device=device),
                                              torch.zeros(2, 1, 4, dtype=I32, device=device), 0.1),
                 "kv must be a cache of format", "for sparse attention", "float32 (4, 16, 1, 576)")
    expect_error(lambda: flash_mla_sparse_fwd(q[..., :512], k_cache, torch.zeros(2, 1, 4, dtype=I32, device=device),
                                              0.1), "q must be bfloat16 of shape (*, *, 576)")


def test_cuda_tensors_need_a_cuda_build():
    if smla.built_with_cuda() or not torch.cuda.is_available():
        pytest.skip("needs a CUDA device and a build without CUDA")
    q = torch.randn(1, 1, 4, 576, dtype=BF16, device="cuda")
    with pytest.raises(RuntimeError, match="built without CUDA"):
        smla.sparse_decode(q, torch.randn(2, 4, 576, dtype=BF16, device="cuda"),
                           torch.zeros(1, 1, 4, dtype=I32, device="cuda"))


# ----------------------------------------------------------------- inferred cache formats
# With cache_format=None the format is read from the cache's dtype and row width: a message
# about it says what was read from what, never a format the caller did not name.
def test_uninferable_cache_names_its_row_width(device):
    q = torch.randn(2, 1, 16, 576, dtype=BF16, device=device)
    idx = torch.zeros(2, 1, 8, dtype=I32, device=device)
    out, lse = sentinel((2, 1, 16, 512), BF16, device), sentinel((2, 1, 16), F32, device)
    for dtype in (torch.uint8, torch.float8_e4m3fn):
        bad = torch.zeros(4, 16, 600, dtype=torch.uint8, device=device).view(dtype)
        name = str(dtype).replace("torch.", "")
        e = expect_error(lambda: smla.sparse_decode(q, bad, idx, out=out, lse=lse),
                         "cache must be a cache of format fp8_ds_mla (uint8 or float8_e4m3fn rows of 656 bytes), "
                         "fp8_model1 (uint8 or float8_e4m3fn rows of 584 bytes) or bf16 (bfloat16), "
                         f"got {name} rows of 600 bytes (no cache format has that row width)", outputs=(out, lse))
        assert e.argument == "cache" and "fp8_e4m3" not in e.given
    g = sentinel((3, 576), BF16, device)
    bad = torch.zeros(4, 16, 600, dtype=torch.uint8, device=device)
    expect_error(lambda: smla.gather_cache(bad, torch.zeros(3, dtype=I32, device=device), out=g),
                 "got uint8 rows of 600 bytes (no cache format has that row width)", outputs=(g,))
    expect_error(lambda: smla.write_cache(torch.zeros(3, 512, dtype=BF16, device=device),
                                          torch.zeros(3, 64, dtype=BF16, device=device),
                                          torch.zeros(3, dtype=I64, device=device), bad),
                 "cache must be a cache of format bf16 (bfloat16), fp16 (float16), fp8_e4m3 (float8_e4m3fn or uint8 "
                 "rows of 576 or 512 bytes), fp8_ds_mla", "got uint8 rows of 600 bytes", outputs=(bad,))
    expect_error(lambda: smla.sparse_decode(q, torch.zeros(4, 16, 576, dtype=F32, device=device), idx,
                                            out=out, lse=lse),
                 "got float32 (4, 16, 576) (no cache format has that dtype)", outputs=(out, lse))
    with pytest.raises(smla.SmlaError, match="no cache format has that row width"):
        smla.infer_cache_format(bad)


def test_inferred_format_the_operation_does_not_take_says_where_it_came_from(device):
    q = torch.randn(2, 1, 16, 576, dtype=BF16, device=device)
    idx = torch.zeros(2, 1, 8, dtype=I32, device=device)
    out, lse = sentinel((2, 1, 16, 512), BF16, device), sentinel((2, 1, 16), F32, device)
    e = expect_error(lambda: smla.sparse_decode(q, torch.zeros(4, 16, 576, dtype=torch.uint8, device=device), idx,
                                                out=out, lse=lse),
                     "got uint8 rows of 576 bytes (format fp8_e4m3, inferred from its dtype and row width)",
                     outputs=(out, lse))
    assert e.argument == "cache"
    expect_error(lambda: smla.sparse_decode(q, torch.zeros(4, 16, 576, dtype=torch.float16, device=device), idx,
                                            out=out, lse=lse),
                 "got float16 (4, 16, 576) (format fp16, inferred from its dtype)", outputs=(out, lse))
    bt, sl = torch.zeros(2, 4, dtype=I32, device=device), torch.zeros(2, dtype=I32, device=device)
    expect_error(lambda: smla.dense_decode(q, make_cache("fp8_ds_mla", 4, 16, device=device), bt, sl, out=out,
                                           lse=lse),
                 "cache must be a cache of format bf16 (bfloat16), fp16 (float16) or fp8_e4m3 (float8_e4m3fn or "
                 "uint8 rows of 576 or 512 bytes), got uint8 rows of 656 bytes (format fp8_ds_mla, inferred from its "
                 "dtype and row width)", outputs=(out, lse))
    # A format the caller names is the core's to judge, under the name cache.format.
    expect_error(lambda: smla.sparse_decode(q, torch.zeros(4, 16, 576, dtype=torch.uint8, device=device), idx,
                                            cache_format="fp8_e4m3", out=out, lse=lse),
                 "cache.format must be fp8_ds_mla, fp8_model1 or bf16, got fp8_e4m3", outputs=(out, lse))


def test_reinterpreted_cache_dtype_is_reported_as_given(device):
    # uint8 is read as float8_e4m3fn for fp8_e4m3 (and float8 as uint8 for the packed formats):
    # a row-width error names the dtype the caller passed.
    g = sentinel((3, 576), BF16, device)
    slots = torch.zeros(3, dtype=I32, device=device)
    bad = torch.zeros(4, 16, 600, dtype=torch.uint8, device=device)
    expect_error(lambda: smla.gather_cache(bad, slots, cache_format="fp8_e4m3", out=g),
                 "cache must be float8_e4m3fn or uint8 rows of 576 or 512 bytes for format fp8_e4m3, "
                 "got uint8 rows of 600 bytes", outputs=(g,))
    expect_error(lambda: smla.gather_cache(bad.view(torch.float8_e4m3fn), slots, cache_format="fp8_ds_mla", out=g),
                 "cache must be uint8 or float8_e4m3fn rows of 656 bytes for format fp8_ds_mla, "
                 "got float8_e4m3fn rows of 600 bytes", outputs=(g,))


def test_flash_mla_inferred_cache_errors(device):
    from smla.flash_mla import flash_mla_with_kvcache
    q = torch.randn(2, 1, 16, 576, dtype=BF16, device=device)
    idx = torch.zeros(2, 1, 8, dtype=I32, device=device)
    bad = torch.zeros(4, 16, 1, 600, dtype=torch.uint8, device=device)
    expect_error(lambda: flash_mla_with_kvcache(q, bad, None, None, 512, None, indices=idx, is_fp8_kvcache=True),
                 "k_cache must be", "got uint8 rows of 600 bytes (no cache format has that row width)")
    bt, sl = torch.zeros(2, 4, dtype=I32, device=device), torch.zeros(2, dtype=I32, device=device)
    expect_error(lambda: flash_mla_with_kvcache(q, make_cache("fp8_ds_mla", 4, 16, device=device).unsqueeze(2), bt,
                                                sl, 512, None),
                 "k_cache must be a cache of format bf16", "for dense attention",
                 "got uint8 rows of 656 bytes (format fp8_ds_mla, inferred from its dtype and row width)")


# ------------------------------------------------------------------ lengths that disagree
def test_write_cache_names_the_argument_whose_length_disagrees(device):
    cache = torch.zeros(2, 4, 576, dtype=BF16, device=device)
    kv_c, k_pe = torch.randn(4, 512, dtype=BF16, device=device), torch.randn(4, 64, dtype=BF16, device=device)
    slots = torch.arange(4, dtype=I64, device=device)
    e = expect_error(lambda: smla.write_cache(kv_c, k_pe, slots[:3], cache),
                     "slot_mapping must be int64 of shape (4,) (one slot per row of kv_c and k_pe), got int64 (3,)",
                     outputs=(cache,))
    assert e.argument == "slot_mapping"
    expect_error(lambda: smla.write_cache(kv_c[:3], k_pe, slots, cache),
                 "kv_c must be bfloat16 of shape (4, 512), got bfloat16 (3, 512)", outputs=(cache,))
    expect_error(lambda: smla.write_cache(kv_c, k_pe[:3], slots, cache),
                 "k_pe must be bfloat16 of shape (4, 64), got bfloat16 (3, 64)", outputs=(cache,))


def test_dcp_combine_names_lse_local_before_any_collective(device):
    # No process group exists here: the shapes are checked before one is asked for.
    out_local = torch.randn(3, 4, 8, device=device)
    expect_error(lambda: smla.dcp_combine(out_local, torch.randn(2, 4, device=device)),
                 "lse_local must be a tensor of shape (3, 4) (T and h of out_local), got float32 (2, 4)")
    expect_error(lambda: smla.dcp_combine(out_local[0], torch.randn(3, 4, device=device)),
                 "out_local must be a tensor of shape (T, h, d_v), got float32 (4, 8)")
    expect_error(lambda: smla.dcp_combine(out_local, torch.randn(3, 4, device=device), method="ring"),
                 'method must be "all_to_all" or "reduce_scatter", got \'ring\'')
    expect_error(lambda: smla.dcp_combine(out_local.half(), torch.randn(3, 4, device=device)),
                 "out_local must be float32 or bfloat16 of shape (T, h, d_v), got float16 (3, 4, 8)")
    expect_error(lambda: smla.dcp_combine(out_local, torch.randn(3, 4, device=device), attn_sink=torch.zeros(3, device=device)),
                 "attn_sink must be float32 of shape (4,) (h of out_local), got float32 (3,)")


def test_malformed_shapes_reach_the_core_checks(device):
    # The wrappers size their outputs from the inputs' shapes; a shape too short for that is
    # reported as the core reports it, not as a Python exception from the sizing.
    z0 = torch.tensor(3, dtype=I32, device=device)
    expect_error(lambda: smla.sliding_window_indices(z0, 2), "positions must be int32 of shape (*,), got int32 ()")
    expect_error(lambda: smla.decode_split_schedule(z0, max_keys=8), "lengths must be int32 of shape (*,), got int32 ()")
    expect_error(lambda: smla.dcp_rescale(torch.randn(3, 4, 8, device=device), torch.randn(3, 4, device=device), 0),
                 "lse_all must be float32 of shape (*, *, *), got float32 (3, 4)")


# ----------------------------------------------------------------------- non-finite inputs
def test_nan_rows_are_nan_not_empty():
    # Not rejected (values are the device's to read): on the CPU a row that attends to a NaN
    # reports NaN out, lse and max_logits; an empty row keeps 0, -inf, -inf (API.md).
    from smla.flash_mla import flash_mla_sparse_fwd
    q = torch.randn(3, 2, 576, dtype=BF16)
    q[0, 1, 5] = float("nan")
    kv = torch.randn(4, 576, dtype=BF16)
    idx = torch.tensor([[0, 1], [2, 3], [-1, 9]], dtype=I32)
    out, lse, ml = smla.sparse_prefill(q, kv, idx)
    assert torch.isnan(lse[0, 1]) and torch.isnan(ml[0, 1]) and torch.isnan(out[0, 1].float()).all()
    assert torch.isfinite(lse[:2].flatten()[[0, 2, 3]]).all() and torch.isfinite(ml[:2].flatten()[[0, 2, 3]]).all()
    assert (lse[2] == float("-inf")).all() and (ml[2] == float("-inf")).all() and (out[2] == 0).all()
    out_f, ml_f, lse_f = flash_mla_sparse_fwd(q, kv.unsqueeze(1), idx.unsqueeze(1), 576 ** -0.5)
    assert torch.isnan(lse_f[0, 1]) and torch.isnan(ml_f[0, 1])
    assert (lse_f[2] == float("inf")).all() and (ml_f[2] == float("-inf")).all()
