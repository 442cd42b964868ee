"""The attention operations and the cache writer/reader (SPEC §4.1–4.5).

Each public function allocates the outputs it is not given with torch, then calls a
torch.library custom operator (namespace ``smla``) that mutates them. The operators have
fake implementations, so ``torch.compile(fullgraph=True)`` traces through them, and they
run on ``torch.cuda.current_stream()`` with any workspace taken from torch's caching
allocator: no host synchronization, so a call can be captured in a CUDA graph and replayed
with new indices and lengths.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _smla
from ._convert import cache_arg, check_devices, device_of, dl, error, float_arg, int_arg, stream_of

D_V = _smla.D_V

# The formats each operation takes: an inferred format outside them is reported with what it
# was inferred from (a named one is left to the core).
SPARSE_FORMATS = ("fp8_ds_mla", "fp8_model1", "bf16")
DENSE_FORMATS = ("bf16", "fp16", "fp8_e4m3")

_LIB = "smla"


def _workspace(size: int, device: torch.device) -> Optional[Tensor]:
    return torch.empty(size, dtype=torch.uint8, device=device) if size > 0 else None


# --------------------------------------------------------------------------- sparse_decode
@torch.library.custom_op(f"{_LIB}::sparse_decode", mutates_args=("out", "lse"))
def _sparse_decode_op(
    q: Tensor,
    cache: Tensor,
    indices: Tensor,
    topk_length: Optional[Tensor],
    extra_cache: Optional[Tensor],
    extra_indices: Optional[Tensor],
    extra_topk_length: Optional[Tensor],
    attn_sink: Optional[Tensor],
    out: Tensor,
    lse: Tensor,
    cache_format: str,
    k_scale: float,
    extra_cache_format: str,
    extra_k_scale: float,
    softmax_scale: Optional[float],
) -> None:
    # A DLPack capsule is consumed when imported: each binding call gets fresh ones.
    def args():
        return dict(
            q=dl(q), cache=dl(cache), cache_format=cache_format, k_scale=k_scale, indices=dl(indices),
            topk_length=dl(topk_length), extra_cache=dl(extra_cache), extra_cache_format=extra_cache_format,
            extra_k_scale=extra_k_scale, extra_indices=dl(extra_indices), extra_topk_length=dl(extra_topk_length),
            attn_sink=dl(attn_sink), softmax_scale=softmax_scale, out=dl(out), lse=dl(lse),
        )

    with device_of(q):
        ws = _workspace(_smla.sparse_decode_workspace_size(**args()), q.device)
        _smla.sparse_decode(**args(), workspace=dl(ws), stream=stream_of(q))


@_sparse_decode_op.register_fake
def _(q, cache, indices, topk_length, extra_cache, extra_indices, extra_topk_length, attn_sink, out, lse,
      cache_format, k_scale, extra_cache_format, extra_k_scale, softmax_scale) -> None:
    return None


def sparse_decode(
    q: Tensor,
    cache: Tensor,
    indices: Tensor,
    *,
    cache_format: Optional[str] = None,
    k_scale: float = 1.0,
    topk_length: Optional[Tensor] = None,
    extra_cache: Optional[Tensor] = None,
    extra_indices: Optional[Tensor] = None,
    extra_topk_length: Optional[Tensor] = None,
    extra_cache_format: Optional[str] = None,
    extra_k_scale: float = 1.0,
    attn_sink: Optional[Tensor] = None,
    softmax_scale: Optional[float] = None,
    out: Optional[Tensor] = None,
    lse: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor]:
    """Sparse MLA decode (SPEC §4.1): each query row attends to the cache slots ``indices``
    names, optionally joined with a second key set (``extra_cache``/``extra_indices``) in one
    softmax.

    q [b, s_q, h_q, d_qk] bfloat16; cache [num_blocks, page_size, (1,) row] in ``cache_format``
    (``fp8_ds_mla``, ``fp8_model1`` or ``bf16``; inferred from dtype and row width when None);
    indices [b, s_q, topk] int32 slots (invalid values are skipped); topk_length [b] int32;
    attn_sink [h_q] float32. Returns ``(out [b, s_q, h_q, 512] bfloat16, lse [b, s_q, h_q]
    float32)``; lse is -inf for rows with no valid key.
    """
    check_devices(("q", q), ("cache", cache), ("indices", indices), ("topk_length", topk_length),
                  ("extra_cache", extra_cache), ("extra_indices", extra_indices),
                  ("extra_topk_length", extra_topk_length), ("attn_sink", attn_sink), ("out", out), ("lse", lse),
                  required=3)
    cache, fmt = cache_arg(cache, cache_format, "cache", SPARSE_FORMATS)
    if extra_cache is not None:
        extra_cache, extra_fmt = cache_arg(extra_cache, extra_cache_format, "extra_cache", SPARSE_FORMATS)
    else:
        extra_fmt = fmt
    if out is None:
        out = q.new_empty((*q.shape[:-1], D_V), dtype=torch.bfloat16)
    if lse is None:
        lse = q.new_empty(q.shape[:-1], dtype=torch.float32)
    torch.ops.smla.sparse_decode(
        q, cache, indices, topk_length, extra_cache, extra_indices, extra_topk_length, attn_sink, out, lse,
        fmt, float_arg("k_scale", k_scale), extra_fmt, float_arg("extra_k_scale", extra_k_scale),
        _softmax_scale(softmax_scale),
    )
    return out, lse


# -------------------------------------------------------------------------- sparse_prefill
@torch.library.custom_op(f"{_LIB}::sparse_prefill", mutates_args=("out", "lse", "max_logits"))
def _sparse_prefill_op(
    q: Tensor,
    kv: Optional[Tensor],
    indices: Tensor,
    topk_length: Optional[Tensor],
    attn_sink: Optional[Tensor],
    out: Tensor,
    lse: Tensor,
    max_logits: Tensor,
    softmax_scale: Optional[float],
    cache: Optional[Tensor] = None,
    cache_format: str = "",
) -> None:
    def args():
        return dict(q=dl(q), kv=dl(kv), indices=dl(indices), topk_length=dl(topk_length), attn_sink=dl(attn_sink),
                    softmax_scale=softmax_scale, out=dl(out), lse=dl(lse), max_logits=dl(max_logits),
                    cache=dl(cache), cache_format=cache_format)

    with device_of(q):
        ws = _workspace(_smla.sparse_prefill_workspace_size(**args()), q.device)
        _smla.sparse_prefill(**args(), workspace=dl(ws), stream=stream_of(q))


@_sparse_prefill_op.register_fake
def _(q, kv, indices, topk_length, attn_sink, out, lse, max_logits, softmax_scale, cache=None,
      cache_format="") -> None:
    return None


def sparse_prefill(
    q: Tensor,
    kv: Optional[Tensor] = None,
    indices: Optional[Tensor] = None,
    *,
    cache: Optional[Tensor] = None,
    cache_format: Optional[str] = None,
    topk_length: Optional[Tensor] = None,
    attn_sink: Optional[Tensor] = None,
    softmax_scale: Optional[float] = None,
    out: Optional[Tensor] = None,
    lse: Optional[Tensor] = None,
    max_logits: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor, Tensor]:
    """Sparse MLA prefill (SPEC §4.2): q [s_q, h_q, d_qk] bfloat16 attends to the keys that
    indices [s_q, (1,) topk] int32 names (valid iff in range and inside topk_length [s_q]).
    The keys come from exactly one of:

    - ``kv`` [s_kv, (1,) d_qk] bfloat16: indices are row numbers, valid in [0, s_kv);
    - ``cache`` [num_blocks, page_size, (1,) row], a paged cache as ``sparse_decode`` reads it,
      in ``cache_format`` (``fp8_ds_mla``, ``fp8_model1`` or ``bf16``; inferred from dtype and
      row width when None): indices are slots ``block * page_size + offset``, valid in
      [0, num_blocks * page_size). The result is that over the dequantized rows; no bfloat16
      copy of them is made. Pass ``kv=None`` (or indices by keyword).

    attn_sink [h_q] float32. Returns ``(out [s_q, h_q, 512] bfloat16, lse [s_q, h_q] float32,
    max_logits [s_q, h_q] float32)``; -inf lse and max_logits for rows with no valid key."""
    check_devices(("q", q), ("indices", indices), ("kv", kv), ("cache", cache), ("topk_length", topk_length),
                  ("attn_sink", attn_sink), ("out", out), ("lse", lse), ("max_logits", max_logits), required=2)
    if kv is not None and cache is not None:
        raise error("kv", "None when cache is given (the keys come from the cache)", "a tensor")
    if kv is None and cache is None:
        raise error("kv", "a [s_kv, (1,) d_qk] bfloat16 tensor when cache is not given", "None")
    if indices is None:
        raise error("indices", "a [s_q, (1,) topk] int32 tensor", "None")
    fmt = ""
    if cache is not None:
        cache, fmt = cache_arg(cache, cache_format, "cache", SPARSE_FORMATS)
    elif cache_format is not None:
        raise error("cache_format", "None when cache is not given", repr(cache_format))
    rows = q.shape[:-1]
    if out is None:
        out = q.new_empty((*rows, D_V), dtype=torch.bfloat16)
    if lse is None:
        lse = q.new_empty(rows, dtype=torch.float32)
    if max_logits is None:
        max_logits = q.new_empty(rows, dtype=torch.float32)
    torch.ops.smla.sparse_prefill(q, kv, indices, topk_length, attn_sink, out, lse, max_logits,
                                  _softmax_scale(softmax_scale), cache, fmt)
    return out, lse, max_logits


# ---------------------------------------------------------------------------- dense_decode
@torch.library.custom_op(f"{_LIB}::dense_decode", mutates_args=("out", "lse"))
def _dense_decode_op(
    q: Tensor,
    cache: Tensor,
    block_table: Tensor,
    seqlens: Tensor,
    attn_sink: Optional[Tensor],
    out: Tensor,
    lse: Tensor,
    cache_format: str,
    k_scale: float,
    causal: bool,
    q_scale: float,
    softmax_scale: Optional[float],
) -> None:
    def args():
        return dict(q=dl(q), cache=dl(cache), cache_format=cache_format, k_scale=k_scale,
                    block_table=dl(block_table), seqlens=dl(seqlens), causal=causal, q_scale=q_scale,
                    attn_sink=dl(attn_sink), softmax_scale=softmax_scale, out=dl(out), lse=dl(lse))

    with device_of(q):
        ws = _workspace(_smla.dense_decode_workspace_size(**args()), q.device)
        _smla.dense_decode(**args(), workspace=dl(ws), stream=stream_of(q))


@_dense_decode_op.register_fake
def _(q, cache, block_table, seqlens, attn_sink, out, lse, cache_format, k_scale, causal, q_scale,
      softmax_scale) -> None:
    return None


def dense_decode(
    q: Tensor,
    cache: Tensor,
    block_table: Tensor,
    seqlens: Tensor,
    *,
    cache_format: Optional[str] = None,
    k_scale: float = 1.0,
    causal: bool = False,
    q_scale: float = 1.0,
    attn_sink: Optional[Tensor] = None,
    softmax_scale: Optional[float] = None,
    out: Optional[Tensor] = None,
    lse: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor]:
    """Dense paged MLA decode (SPEC §4.3): q [b, s_q, h_q, d_qk] (bfloat16, float16, or
    float8_e4m3fn with q_scale) over cache [num_blocks, page_size, h_kv, d_qk] (``bf16``,
    ``fp16`` or ``fp8_e4m3`` with k_scale) through block_table [b, max_blocks] int32 and
    seqlens [b] int32. Returns ``(out [b, s_q, h_q, 512], lse [b, s_q, h_q] float32)``; out is
    float16 for float16 q, else bfloat16."""
    check_devices(("q", q), ("cache", cache), ("block_table", block_table), ("seqlens", seqlens),
                  ("attn_sink", attn_sink), ("out", out), ("lse", lse), required=4)
    cache, fmt = cache_arg(cache, cache_format, "cache", DENSE_FORMATS)
    if out is None:
        out_dtype = torch.float16 if q.dtype == torch.float16 else torch.bfloat16
        out = q.new_empty((*q.shape[:-1], D_V), dtype=out_dtype)
    if lse is None:
        lse = q.new_empty(q.shape[:-1], dtype=torch.float32)
    torch.ops.smla.dense_decode(q, cache, block_table, seqlens, attn_sink, out, lse, fmt, float_arg("k_scale", k_scale),
                                bool(causal), float_arg("q_scale", q_scale), _softmax_scale(softmax_scale))
    return out, lse


# ---------------------------------------------------------------------------- merge_states
@torch.library.custom_op(f"{_LIB}::merge_states", mutates_args=("out", "lse"))
def _merge_states_op(out_parts: Tensor, lse_parts: Tensor, attn_sink: Optional[Tensor], out: Tensor,
                     lse: Tensor) -> None:
    with device_of(out_parts):
        _smla.merge_states(out_parts=dl(out_parts), lse_parts=dl(lse_parts), attn_sink=dl(attn_sink), out=dl(out),
                           lse=dl(lse), stream=stream_of(out_parts))


@_merge_states_op.register_fake
def _(out_parts, lse_parts, attn_sink, out, lse) -> None:
    return None


def merge_states(
    out_parts: Tensor,
    lse_parts: Tensor,
    *,
    attn_sink: Optional[Tensor] = None,
    out: Optional[Tensor] = None,
    lse: Optional[Tensor] = None,
    out_dtype: Optional[torch.dtype] = None,
) -> Tuple[Tensor, Tensor]:
    """Log-sum-exp merge of n partial results (SPEC §4.4): out_parts [n, T, h, d_v] float32 or
    bfloat16, lse_parts [n, T, h] float32; the sink, if any, is applied once after the merge.
    Returns ``(out [T, h, d_v], lse [T, h] float32)``; out has ``out_dtype`` (default: the
    dtype of out_parts)."""
    check_devices(("out_parts", out_parts), ("lse_parts", lse_parts), ("attn_sink", attn_sink), ("out", out),
                  ("lse", lse), required=2)
    if out is None:
        out = out_parts.new_empty(out_parts.shape[1:], dtype=out_dtype or out_parts.dtype)
    if lse is None:
        lse = lse_parts.new_empty(lse_parts.shape[1:], dtype=torch.float32)
    torch.ops.smla.merge_states(out_parts, lse_parts, attn_sink, out, lse)
    return out, lse


# ------------------------------------------------------------------ write_cache / gather_cache
@torch.library.custom_op(f"{_LIB}::write_cache", mutates_args=("cache",))
def _write_cache_op(kv_c: Tensor, k_pe: Tensor, slot_mapping: Tensor, cache: Tensor, cache_format: str,
                    k_scale: float) -> None:
    with device_of(kv_c):
        _smla.write_cache(kv_c=dl(kv_c), k_pe=dl(k_pe), slot_mapping=dl(slot_mapping), cache=dl(cache),
                          cache_format=cache_format, k_scale=k_scale, stream=stream_of(kv_c))


@_write_cache_op.register_fake
def _(kv_c, k_pe, slot_mapping, cache, cache_format, k_scale) -> None:
    return None


def write_cache(
    kv_c: Tensor,
    k_pe: Tensor,
    slot_mapping: Tensor,
    cache: Tensor,
    *,
    cache_format: Optional[str] = None,
    k_scale: float = 1.0,
) -> None:
    """Writes rows ``[kv_c[t] | k_pe[t]]`` (kv_c [T, d_qk-64], k_pe [T, 64] bfloat16) into the
    slots ``slot_mapping`` [T] int64 names (negative or past the cache: skipped), quantizing
    as the cache's format says (SPEC §2). The cache is modified in place."""
    check_devices(("cache", cache), ("kv_c", kv_c), ("k_pe", k_pe), ("slot_mapping", slot_mapping), required=4)
    cache_view, fmt = cache_arg(cache, cache_format, "cache")
    torch.ops.smla.write_cache(kv_c, k_pe, slot_mapping, cache_view, fmt, float_arg("k_scale", k_scale))


@torch.library.custom_op(f"{_LIB}::gather_cache", mutates_args=("out",))
def _gather_cache_op(cache: Tensor, slots: Tensor, out: Tensor, cache_format: str, k_scale: float) -> None:
    with device_of(cache):
        _smla.gather_cache(cache=dl(cache), cache_format=cache_format, k_scale=k_scale, slots=dl(slots), out=dl(out),
                           stream=stream_of(cache))


@_gather_cache_op.register_fake
def _(cache, slots, out, cache_format, k_scale) -> None:
    return None


def gather_cache(
    cache: Tensor,
    slots: Tensor,
    *,
    cache_format: Optional[str] = None,
    k_scale: float = 1.0,
    out: Optional[Tensor] = None,
) -> Tensor:
    """Reads the rows of ``slots`` [N] (int32 or int64) back from the cache, dequantized and
    rounded to bfloat16: ``out [N, d_qk]``. An invalid slot gives a row of zeros."""
    check_devices(("cache", cache), ("slots", slots), ("out", out), required=2)
    cache, fmt = cache_arg(cache, cache_format, "cache")
    if out is None:
        out = cache.new_empty((*slots.shape, cache_d_qk(cache, fmt)), dtype=torch.bfloat16)
    torch.ops.smla.gather_cache(cache, slots, out, fmt, float_arg("k_scale", k_scale))
    return out


# ------------------------------------------------------------------------------- helpers
def cache_d_qk(cache: Tensor, cache_format: str) -> int:
    """The key width of a cache: 576 for fp8_ds_mla, 512 for fp8_model1, else the row."""
    if cache_format == "fp8_ds_mla":
        return 576
    if cache_format == "fp8_model1":
        return 512
    return cache.shape[-1] if cache.dim() > 0 else 0


def empty_cache(
    num_blocks: int,
    page_size: int,
    cache_format: str = "bf16",
    *,
    d_qk: int = 576,
    h_kv: int = 1,
    device=None,
) -> Tensor:
    """An uninitialized paged cache of ``num_blocks`` pages in ``cache_format``:
    ``[num_blocks, page_size, h_kv, d_qk]`` for bf16/fp16/fp8_e4m3 (bfloat16, float16,
    float8_e4m3fn), ``[num_blocks, page_size, 1, 656]`` uint8 for fp8_ds_mla and
    ``[num_blocks, page_size, 1, 584]`` uint8 for fp8_model1, whose pages are
    ``model1_aligned_page_bytes(page_size)`` apart as the format prescribes."""
    num_blocks, page_size = int_arg("num_blocks", num_blocks, 64, minimum=0), int_arg("page_size", page_size, minimum=1)
    d_qk, h_kv = int_arg("d_qk", d_qk, minimum=1), int_arg("h_kv", h_kv, minimum=1)
    if cache_format == "fp8_ds_mla":
        return torch.empty((num_blocks, page_size, 1, 656), dtype=torch.uint8, device=device)
    if cache_format == "fp8_model1":
        page_bytes = _smla.model1_aligned_page_bytes(page_size)
        pages = torch.empty((num_blocks, page_bytes), dtype=torch.uint8, device=device)
        return pages[:, : page_size * 584].view(num_blocks, page_size, 1, 584)
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8_e4m3": torch.float8_e4m3fn}
    if cache_format not in dtypes:
        from ._convert import CACHE_FORMATS

        raise error("cache_format", "one of " + ", ".join(CACHE_FORMATS), repr(cache_format))
    return torch.empty((num_blocks, page_size, h_kv, d_qk), dtype=dtypes[cache_format], device=device)


def _softmax_scale(x) -> Optional[float]:
    return None if x is None else float_arg("softmax_scale", x)
