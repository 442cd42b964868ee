"""FlashMLA-compatible entry points: ``from smla.flash_mla import get_mla_metadata,
flash_mla_with_kvcache, flash_mla_sparse_fwd`` in place of ``from flash_mla import ...``.

Argument names, shapes, dtypes and return conventions follow FlashMLA's
``flash_mla_interface.py``:

- ``flash_mla_with_kvcache`` returns ``(out [b, s_q, h_q, head_dim_v], lse [b, h_q, s_q])``;
- ``flash_mla_sparse_fwd`` returns ``(out [s_q, h_q, d_v], max_logits [s_q, h_q], lse [s_q, h_q])``;
- lse is the natural-log log-sum-exp of the scaled logits, without the sink, and +inf for a
  row with no valid key (smla's own operations return -inf there); max_logits is -inf there.

smla schedules the split-KV work on the device inside each call, so the scheduling metadata
is a placeholder: ``get_mla_metadata()`` returns ``(FlashMLASchedMeta(), None)`` as current
FlashMLA does, or, called the older way with ``cache_seqlens``, placeholder
``(tile_scheduler_metadata [num_sm_parts, 8] int32, num_splits [b + 1] int32)`` tensors; either
is accepted back and ignored, and may be reused across calls of any shape. Where smla accepts
more than FlashMLA (any h_q, any page size, any invalid index value, sinks on dense decode,
bf16 caches for sparse decode) is listed in docs/PYTHON.md.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from . import ops
from ._convert import (SmlaError, check_device_type, check_devices, describe, error, float_arg, infer_cache_format,
                       int_arg)

__all__ = ["FlashMLASchedMeta", "get_mla_metadata", "flash_mla_with_kvcache", "flash_mla_sparse_fwd"]

# FlashMLA's TileSchedulerMetaDataSize.
_TILE_SCHEDULER_METADATA_SIZE = 8


@dataclasses.dataclass
class FlashMLASchedMeta:
    """FlashMLA's scheduling-metadata holder. smla fills in ``config`` on the first call (as
    FlashMLA does) for inspection only; nothing is read back from it."""

    @dataclasses.dataclass
    class Config:
        b: int
        s_q: int
        h_q: int
        page_block_size: int
        h_k: int
        causal: bool
        is_fp8_kvcache: bool
        topk: Optional[int]
        extra_page_block_size: Optional[int]
        extra_topk: Optional[int]

    have_initialized: bool = False
    config: Optional[Config] = None
    tile_scheduler_metadata: Optional[Tensor] = None
    num_splits: Optional[Tensor] = None


def get_mla_metadata(
    cache_seqlens: Optional[Tensor] = None,
    num_q_tokens_per_head_k: Optional[int] = None,
    num_heads_k: Optional[int] = None,
    num_heads_q: Optional[int] = None,
    is_fp8_kvcache: bool = False,
    topk: Optional[int] = None,
    *args,
    **kwargs,
):
    """Without arguments: ``(FlashMLASchedMeta(), None)`` (current FlashMLA). With
    ``cache_seqlens`` (older FlashMLA): placeholder ``(tile_scheduler_metadata, num_splits)``
    int32 tensors on its device, shaped as FlashMLA's (``[num_sm_parts, 8]`` and ``[b + 1]``)
    so engines that copy them into persistent buffers keep working. The values mean nothing:
    smla computes its schedule on the device during each call. No host synchronization."""
    if cache_seqlens is None:
        return FlashMLASchedMeta(), None
    check_device_type("cache_seqlens", cache_seqlens)
    device = cache_seqlens.device
    if device.type == "cuda":
        num_sm_parts = torch.cuda.get_device_properties(device).multi_processor_count
    else:
        num_sm_parts = 1
    tile_scheduler_metadata = torch.zeros((num_sm_parts, _TILE_SCHEDULER_METADATA_SIZE), dtype=torch.int32,
                                          device=device)
    num_splits = torch.arange(cache_seqlens.shape[0] + 1, dtype=torch.int32, device=device)
    return tile_scheduler_metadata, num_splits


def _record_config(meta, q, k_cache, causal, is_fp8_kvcache, indices, extra_k_cache, extra_indices):
    if not isinstance(meta, FlashMLASchedMeta) or meta.have_initialized:
        return
    meta.have_initialized = True
    meta.config = FlashMLASchedMeta.Config(
        b=q.shape[0], s_q=q.shape[1], h_q=q.shape[2], page_block_size=k_cache.shape[1],
        h_k=k_cache.shape[2] if k_cache.dim() == 4 else 1, causal=causal, is_fp8_kvcache=is_fp8_kvcache,
        topk=indices.shape[-1] if indices is not None else None,
        extra_page_block_size=extra_k_cache.shape[1] if extra_k_cache is not None else None,
        extra_topk=extra_indices.shape[-1] if extra_indices is not None else None,
    )


def _cache_format(cache: Tensor, name: str, formats, attention: str) -> str:
    """The format inferred from the cache (FlashMLA takes none), among those ``attention``
    (sparse or dense) takes; the message says which attention the call asked for."""
    try:
        return infer_cache_format(cache, name, formats)
    except SmlaError as e:
        raise error(e.argument, f"{e.expected} for {attention} attention", e.given) from None


def _sparse_cache_format(cache: Tensor, is_fp8_kvcache: bool, name: str) -> str:
    if is_fp8_kvcache and isinstance(cache, Tensor) and cache.dtype in (torch.bfloat16, torch.float16):
        raise error(name, "an FP8 cache (uint8 or float8_e4m3fn rows of 656 or 584 bytes) with is_fp8_kvcache=True",
                    describe(cache))
    return _cache_format(cache, name, ops.SPARSE_FORMATS, "sparse")


def _scalar(x, name: str) -> float:
    # SGLang passes FP8 descales as tensors; smla takes one float per tensor. Reading a CUDA
    # tensor here synchronizes, so pass Python floats on the hot path.
    if x is None:
        return 1.0
    if isinstance(x, Tensor):
        if x.numel() < 1:
            raise error(name, "a float or a non-empty tensor", f"a tensor of shape {tuple(x.shape)}")
        return float(x.reshape(-1)[0].item())
    return float_arg(name, x)


def _inf_for_empty_rows(lse: Tensor) -> Tensor:
    return lse.masked_fill_(lse == float("-inf"), float("inf"))


def flash_mla_with_kvcache(
    q: Tensor,
    k_cache: Tensor,
    block_table: Optional[Tensor],
    cache_seqlens: Optional[Tensor],
    head_dim_v: int,
    tile_scheduler_metadata: Union[FlashMLASchedMeta, Tensor, None] = None,
    num_splits: Optional[Tensor] = None,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    is_fp8_kvcache: bool = False,
    indices: Optional[Tensor] = None,
    attn_sink: Optional[Tensor] = None,
    extra_k_cache: Optional[Tensor] = None,
    extra_indices_in_kvcache: Optional[Tensor] = None,
    topk_length: Optional[Tensor] = None,
    extra_topk_length: Optional[Tensor] = None,
    descale_q: Union[Tensor, float, None] = None,
    descale_k: Union[Tensor, float, None] = None,
) -> Tuple[Tensor, Tensor]:
    """FlashMLA's decode entry point.

    q: [b, s_q, h_q, head_dim] (576 for V3.x, 512 for V4). Sparse (``indices`` given):
    k_cache [num_blocks, page_block_size, 1, 656] (V3.2, ``fp8_ds_mla``) or
    [num_blocks, page_block_size, 1, 584] (V4, ``fp8_model1``) as uint8 or float8_e4m3fn with
    ``is_fp8_kvcache=True``, or a bfloat16 [num_blocks, page_block_size, 1, head_dim] cache;
    indices [b, s_q, topk] int32 slots (``block * page_block_size + offset``); optional
    topk_length [b], attn_sink [h_q] float32, extra_k_cache / extra_indices_in_kvcache /
    extra_topk_length (a second key set in the same softmax). Dense (``indices`` None):
    k_cache [num_blocks, page_block_size, h_k, head_dim] bfloat16 / float16 (or float8_e4m3fn
    with ``descale_k``, SGLang's convention), block_table [b, max_blocks] int32,
    cache_seqlens [b] int32, ``causal``. head_dim_v must be 512. softmax_scale defaults to
    head_dim ** -0.5.

    Returns ``(out [b, s_q, h_q, 512] bfloat16 (float16 for float16 q), lse [b, h_q, s_q]
    float32)``, lse +inf for rows with no valid key.
    """
    # The tensors the call reads on the device share q's device. The others are read on the
    # host (descales) or not at all (scheduling placeholders; block_table and cache_seqlens in
    # a sparse call): any cpu or cuda device will do.
    sparse = indices is not None
    check_devices(("q", q), ("k_cache", k_cache), ("block_table", None if sparse else block_table),
                  ("cache_seqlens", None if sparse else cache_seqlens), ("indices", indices), ("attn_sink", attn_sink),
                  ("extra_k_cache", extra_k_cache), ("extra_indices_in_kvcache", extra_indices_in_kvcache),
                  ("topk_length", topk_length), ("extra_topk_length", extra_topk_length), required=2)
    for name, value in (("block_table", block_table), ("cache_seqlens", cache_seqlens), ("descale_q", descale_q),
                        ("descale_k", descale_k), ("num_splits", num_splits),
                        ("tile_scheduler_metadata", tile_scheduler_metadata)):
        check_device_type(name, value)
    if head_dim_v != ops.D_V:
        raise error("head_dim_v", str(ops.D_V), str(head_dim_v))
    _record_config(tile_scheduler_metadata, q, k_cache, causal, is_fp8_kvcache, indices, extra_k_cache,
                   extra_indices_in_kvcache)

    if indices is not None:
        if causal:
            raise error("causal", "False when indices is given (sparse attention)", "True")
        fmt = _sparse_cache_format(k_cache, is_fp8_kvcache, "k_cache")
        extra_fmt = None
        if extra_k_cache is not None:
            extra_fmt = _sparse_cache_format(extra_k_cache, is_fp8_kvcache, "extra_k_cache")
        # FlashMLA's lse is [b, h_q, s_q]: smla writes it through a transposed view (a q of
        # another rank gets a placeholder the core then rejects, naming q).
        b, s_q, h_q = q.shape[:3] if q.dim() == 4 else (0, 0, 0)
        lse = q.new_empty((b, h_q, s_q), dtype=torch.float32)
        out, _ = ops.sparse_decode(
            q, k_cache, indices, cache_format=fmt, topk_length=topk_length, extra_cache=extra_k_cache,
            extra_indices=extra_indices_in_kvcache, extra_topk_length=extra_topk_length,
            extra_cache_format=extra_fmt, attn_sink=attn_sink, softmax_scale=softmax_scale,
            lse=lse.transpose(1, 2),
        )
        return out, _inf_for_empty_rows(lse)

    for name, value in (("topk_length", topk_length), ("extra_k_cache", extra_k_cache),
                        ("extra_indices_in_kvcache", extra_indices_in_kvcache),
                        ("extra_topk_length", extra_topk_length)):
        if value is not None:
            raise error(name, "None when indices is None (dense attention)", "a tensor")
    if block_table is None:
        raise error("block_table", "a [b, max_blocks] int32 tensor for dense attention", "None")
    if cache_seqlens is None:
        raise error("cache_seqlens", "a [b] int32 tensor for dense attention", "None")
    fmt = _cache_format(k_cache, "k_cache", ops.DENSE_FORMATS, "dense")
    out, lse = ops.dense_decode(
        q, k_cache, block_table, cache_seqlens, cache_format=fmt, k_scale=_scalar(descale_k, "descale_k"),
        causal=causal, q_scale=_scalar(descale_q, "descale_q"), attn_sink=attn_sink, softmax_scale=softmax_scale,
    )
    return out, _inf_for_empty_rows(lse.transpose(1, 2).contiguous())


def flash_mla_sparse_fwd(
    q: Tensor,
    kv: Tensor,
    indices: Tensor,
    sm_scale: float,
    d_v: int = 512,
    attn_sink: Optional[Tensor] = None,
    topk_length: Optional[Tensor] = None,
    indexer_topk: int = 0,
):
    """FlashMLA's sparse prefill: q [s_q, h_q, d_qk] bfloat16, kv [s_kv, h_kv = 1, d_qk]
    bfloat16, indices [s_q, h_kv = 1, topk] int32 (invalid: any value outside [0, s_kv)),
    optional attn_sink [h_q] float32 and topk_length [s_q] int32; d_v must be 512.

    kv may also be a paged cache shaped as ``flash_mla_with_kvcache`` takes k_cache,
    [num_blocks, page_block_size, 1, row]: ``fp8_ds_mla`` (656-byte rows) or ``fp8_model1``
    (584) as uint8 or float8_e4m3fn, or bfloat16 rows of d_qk, the format inferred from dtype
    and row width. indices are then cache slots (``block * page_block_size + offset``), read
    and dequantized in place.

    Returns ``(out [s_q, h_q, 512] bfloat16, max_logits [s_q, h_q] float32, lse [s_q, h_q]
    float32)``, lse +inf and max_logits -inf for rows with no valid key. With
    ``indexer_topk > 0`` a fourth tensor, ``lse_indexer`` [s_q, h_q]: the lse over the first
    ``indexer_topk`` entries of each index row (computed by a second call)."""
    check_devices(("q", q), ("kv", kv), ("indices", indices), ("attn_sink", attn_sink), ("topk_length", topk_length),
                  required=3)
    indexer_topk = int_arg("indexer_topk", indexer_topk)
    if d_v != ops.D_V:
        raise error("d_v", str(ops.D_V), str(d_v))
    # FlashMLA's kv is 3-D: a 4-D one can only be a paged cache, as the decode entry gets it.
    keys = dict(kv=kv)
    if isinstance(kv, Tensor) and kv.dim() == 4:
        keys = dict(cache=kv, cache_format=_cache_format(kv, "kv", ops.SPARSE_FORMATS, "sparse"))
    out, lse, max_logits = ops.sparse_prefill(q, indices=indices, topk_length=topk_length, attn_sink=attn_sink,
                                              softmax_scale=sm_scale, **keys)
    lse = _inf_for_empty_rows(lse)
    if not indexer_topk:
        return out, max_logits, lse
    if indexer_topk < 0 or indexer_topk > indices.shape[-1]:
        raise error("indexer_topk", f"between 0 and topk ({indices.shape[-1]})", str(indexer_topk))
    _, lse_indexer, _ = ops.sparse_prefill(q, indices=indices[..., :indexer_topk], topk_length=topk_length,
                                           softmax_scale=sm_scale, **keys)
    return out, max_logits, lse, _inf_for_empty_rows(lse_indexer)
