"""Index and metadata utilities (SPEC §4.6, docs/METADATA.md).

Each runs where its tensors live (host loops for CPU tensors, kernels on the current CUDA
stream for CUDA tensors) with the same results, and returns its output, allocated with torch
when ``out`` is not given. Values read from tensors are never trusted: what cannot give a
valid answer gives -1.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _smla
from ._convert import check_devices, device_of, dl, error, int_arg, stream_of

_LIB = "smla"


def _register(name: str, fn):
    """Registers ``fn`` (which writes its ``out`` argument) as the custom op smla::<name>."""
    op = torch.library.custom_op(f"{_LIB}::{name}", mutates_args=("out",))(fn)
    op.register_fake(lambda *args, **kwargs: None)
    return op


def _rows(t: Tensor) -> int:
    """Size of dim 0 for sizing an output; 0 for a 0-d tensor, which the core then rejects
    naming it."""
    return t.shape[0] if t.dim() > 0 else 0


# ------------------------------------------------------------------------ req_id_per_token
def _req_id_per_token_impl(query_start_loc: Tensor, out: Tensor) -> None:
    with device_of(out):
        _smla.req_id_per_token(query_start_loc=dl(query_start_loc), out=dl(out), stream=stream_of(out))


_register("req_id_per_token", _req_id_per_token_impl)


def req_id_per_token(query_start_loc: Tensor, num_tokens: Optional[int] = None, *,
                     out: Optional[Tensor] = None) -> Tensor:
    """``out[t]`` = the request r with ``query_start_loc[r] <= t < query_start_loc[r+1]``, or -1.
    query_start_loc [b+1] int32; out [num_tokens] int32 (pass ``num_tokens`` or ``out``: the
    token count is not read from the device)."""
    check_devices(("query_start_loc", query_start_loc), ("out", out), required=1)
    if out is None:
        if num_tokens is None:
            raise error("num_tokens", "given when out is not", "None")
        out = query_start_loc.new_empty((int_arg("num_tokens", num_tokens, 64, minimum=0),), dtype=torch.int32)
    torch.ops.smla.req_id_per_token(query_start_loc, out)
    return out


# ------------------------------------------------------------- page_table_from_req_to_token
def _page_table_impl(req_to_token: Tensor, req_pool_indices: Tensor, seq_lens: Tensor, out: Tensor,
                     page_size: int) -> None:
    with device_of(out):
        _smla.page_table_from_req_to_token(req_to_token=dl(req_to_token), req_pool_indices=dl(req_pool_indices),
                                           seq_lens=dl(seq_lens), page_size=page_size, block_table=dl(out),
                                           stream=stream_of(out))


_register("page_table_from_req_to_token", _page_table_impl)


def page_table_from_req_to_token(req_to_token: Tensor, req_pool_indices: Tensor, seq_lens: Tensor, page_size: int,
                                 *, max_pages: Optional[int] = None, out: Optional[Tensor] = None) -> Tensor:
    """SGLang's token map to a page table: ``block_table[i, p] = req_to_token[r, p*page_size] //
    page_size`` with ``r = req_pool_indices[i]`` for ``p < ceil(seq_lens[i] / page_size)``, -1
    elsewhere. Returns block_table [b, max_pages] int32 (default max_pages:
    ceil(max_ctx / page_size))."""
    check_devices(("req_to_token", req_to_token), ("req_pool_indices", req_pool_indices), ("seq_lens", seq_lens),
                  ("out", out), required=3)
    page_size = int_arg("page_size", page_size)
    if out is None:
        if max_pages is None:
            max_ctx = req_to_token.shape[-1] if req_to_token.dim() > 0 else 0
            max_pages = -(-max_ctx // max(page_size, 1))
        out = req_to_token.new_empty((_rows(req_pool_indices), int_arg("max_pages", max_pages, 64, minimum=0)),
                                     dtype=torch.int32)
    torch.ops.smla.page_table_from_req_to_token(req_to_token, req_pool_indices, seq_lens, out, page_size)
    return out


# ---------------------------------------------------------------------- positions_to_slots
def _positions_to_slots_impl(block_table: Tensor, req_id: Tensor, positions: Tensor, out: Tensor,
                             page_size: int) -> None:
    with device_of(out):
        _smla.positions_to_slots(block_table=dl(block_table), page_size=page_size, req_id=dl(req_id),
                                 positions=dl(positions), slots=dl(out), stream=stream_of(out))


_register("positions_to_slots", _positions_to_slots_impl)


def positions_to_slots(block_table: Tensor, page_size: int, req_id: Tensor, positions: Tensor, *,
                       out: Optional[Tensor] = None) -> Tensor:
    """Request-local positions to cache slots: ``block_table[req_id[t], p // page_size] *
    page_size + p % page_size``, -1 where that is not valid. positions [T, k] (or [T]) int32;
    returns slots of the same shape, int32."""
    check_devices(("block_table", block_table), ("req_id", req_id), ("positions", positions), ("out", out), required=3)
    squeeze = positions.dim() == 1
    pos2 = positions.unsqueeze(-1) if squeeze else positions
    if out is None:
        out = pos2.new_empty(pos2.shape, dtype=torch.int32)
        result = out.squeeze(-1) if squeeze else out
    else:
        result = out
        out = out.unsqueeze(-1) if squeeze else out
    torch.ops.smla.positions_to_slots(block_table, req_id, pos2, out, int_arg("page_size", page_size))
    return result


# ------------------------------------------------------------------ sliding_window_indices
def _sliding_window_impl(positions: Tensor, out: Tensor, window: int) -> None:
    with device_of(out):
        _smla.sliding_window_indices(positions=dl(positions), window=window, out=dl(out), stream=stream_of(out))


_register("sliding_window_indices", _sliding_window_impl)


def sliding_window_indices(positions: Tensor, window: int, *, out: Optional[Tensor] = None) -> Tensor:
    """Positions ``[max(pos - window + 1, 0), pos]`` ascending, then -1 padding: positions [T]
    int32 -> out [T, window] int32 (a negative position gives a row of -1)."""
    check_devices(("positions", positions), ("out", out), required=1)
    window = int_arg("window", window)
    if out is None:  # a window below 1 gets a placeholder the core then rejects, naming it
        out = positions.new_empty((_rows(positions), max(window, 0)), dtype=torch.int32)
    torch.ops.smla.sliding_window_indices(positions, out, window)
    return out


# ----------------------------------------------------------------- compressed_slot_mapping
def _compressed_slot_mapping_impl(positions: Tensor, req_id: Tensor, block_table: Tensor, out: Tensor,
                                  compress_ratio: int, states_per_page: int) -> None:
    with device_of(out):
        _smla.compressed_slot_mapping(positions=dl(positions), req_id=dl(req_id), block_table=dl(block_table),
                                      compress_ratio=compress_ratio, states_per_page=states_per_page, out=dl(out),
                                      stream=stream_of(out))


_register("compressed_slot_mapping", _compressed_slot_mapping_impl)


def compressed_slot_mapping(positions: Tensor, req_id: Tensor, block_table: Tensor, compress_ratio: int,
                            states_per_page: int, *, out: Optional[Tensor] = None) -> Tensor:
    """The token at position ``pos`` writes compressed state ``pos // compress_ratio`` only when
    ``(pos + 1) % compress_ratio == 0``; its slot through block_table (pages of
    ``states_per_page`` states), else -1. positions [T] int64, req_id [T] int32 -> out [T]
    int64."""
    check_devices(("positions", positions), ("req_id", req_id), ("block_table", block_table), ("out", out),
                  required=3)
    if out is None:
        out = positions.new_empty(positions.shape, dtype=torch.int64)
    torch.ops.smla.compressed_slot_mapping(positions, req_id, block_table, out,
                                           int_arg("compress_ratio", compress_ratio),
                                           int_arg("states_per_page", states_per_page))
    return out


# ------------------------------------------------------------------------------------- DCP
def _dcp_local_seqlens_impl(seqlens: Tensor, out: Tensor, world: int, interleave: int, rank: int) -> None:
    with device_of(out):
        _smla.dcp_local_seqlens(seqlens=dl(seqlens), world=world, interleave=interleave, rank=rank, out=dl(out),
                                stream=stream_of(out))


_register("dcp_local_seqlens", _dcp_local_seqlens_impl)


def dcp_local_seqlens(seqlens: Tensor, *, world: int, rank: int, interleave: int = 1,
                      out: Optional[Tensor] = None) -> Tensor:
    """Decode context parallelism (``world`` ranks, interleave I): the tokens of each sequence
    that live on ``rank``. seqlens [b] int32 -> out [b] int32."""
    check_devices(("seqlens", seqlens), ("out", out), required=1)
    if out is None:
        out = seqlens.new_empty(seqlens.shape, dtype=torch.int32)
    torch.ops.smla.dcp_local_seqlens(seqlens, out, int_arg("world", world), int_arg("interleave", interleave),
                                     int_arg("rank", rank))
    return out


@torch.library.custom_op(f"{_LIB}::dcp_local_topk", mutates_args=("slots", "counts", "topk_length"))
def _dcp_local_topk_op(positions: Tensor, block_table: Tensor, slots: Tensor, counts: Tensor,
                       topk_length: Optional[Tensor], page_size: int, world: int, interleave: int, rank: int) -> None:
    with device_of(slots):
        _smla.dcp_local_topk(positions=dl(positions), block_table=dl(block_table), page_size=page_size, world=world,
                             interleave=interleave, rank=rank, slots=dl(slots), counts=dl(counts),
                             topk_length=dl(topk_length), stream=stream_of(slots))


_dcp_local_topk_op.register_fake(lambda *args, **kwargs: None)


def dcp_local_topk(positions: Tensor, block_table: Tensor, page_size: int, *, world: int, rank: int,
                   interleave: int = 1,
                   out: Optional[Tuple[Tensor, Tensor, Optional[Tensor]]] = None
                   ) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """Rank-local top-k (decode context parallelism): of each row of global top-k positions,
    the ones ``rank`` owns (``dcp_owner_rank(p) == rank``), in their order, as slots of this
    rank's cache (``dcp_local_position(p)`` through ``block_table``), packed to the front, the
    rest -1; an owned position with no slot there is dropped. positions [b, s_q, k] int32
    (request-local positions, -1 padding), block_table [b, max_blocks] int32 (this rank's).
    Returns ``(slots [b, s_q, k] int32, counts [b, s_q] int32, topk_length [b] int32)``, where
    topk_length is each request's largest count, ready for sparse_decode's ``topk_length``.
    ``out``: a (slots, counts, topk_length) tuple to write instead; a None topk_length is not
    computed."""
    if out is not None and not (isinstance(out, (tuple, list)) and len(out) == 3):
        given = f"a {type(out).__name__} of {len(out)}" if isinstance(out, (tuple, list)) else type(out).__name__
        raise error("out", "a (slots, counts, topk_length) tuple", given)
    slots, counts, topk_length = out if out is not None else (None, None, None)
    check_devices(("positions", positions), ("block_table", block_table), ("slots", slots), ("counts", counts),
                  ("topk_length", topk_length), required=2)
    if out is None:
        # Sizes for the outputs; a malformed positions gets placeholders the core then rejects, naming it.
        shape = tuple(positions.shape)
        slots = positions.new_empty(shape, dtype=torch.int32)
        counts = positions.new_empty(shape[:2] if len(shape) == 3 else (0,), dtype=torch.int32)
        topk_length = positions.new_empty((_rows(positions),), dtype=torch.int32)
    torch.ops.smla.dcp_local_topk(positions, block_table, slots, counts, topk_length, int_arg("page_size", page_size),
                                  int_arg("world", world), int_arg("interleave", interleave), int_arg("rank", rank))
    return slots, counts, topk_length


def dcp_owner_rank(p: int, world: int, interleave: int = 1) -> int:
    """The rank holding token position p: ``(p // interleave) % world`` (-1 for p < 0)."""
    return _smla.dcp_owner_rank(int_arg("p", p, 64), int_arg("world", world), int_arg("interleave", interleave))


def dcp_local_position(p: int, world: int, interleave: int = 1) -> int:
    """Position of token p within its owner's shard (-1 for p < 0)."""
    return _smla.dcp_local_position(int_arg("p", p, 64), int_arg("world", world),
                                    int_arg("interleave", interleave))


def dcp_local_length(length: int, world: int, rank: int, interleave: int = 1) -> int:
    """Tokens of a length-``length`` sequence on ``rank``."""
    return _smla.dcp_local_length(int_arg("length", length, 64), int_arg("world", world),
                                  int_arg("interleave", interleave), int_arg("rank", rank))


# ------------------------------------------------------------------- decode_split_schedule
def _split_schedule_impl(lengths: Tensor, out: Tensor, num_units: int, block_n: int, max_keys: int) -> None:
    with device_of(out):
        _smla.decode_split_schedule(lengths=dl(lengths), num_units=num_units, block_n=block_n, max_keys=max_keys,
                                    split_offsets=dl(out), stream=stream_of(out))


_register("decode_split_schedule", _split_schedule_impl)


def decode_split_schedule(lengths: Tensor, *, max_keys: int, num_units: int = 132, block_n: int = 64,
                          out: Optional[Tensor] = None) -> Tensor:
    """The split-KV schedule for decode (docs/METADATA.md): lengths [b] int32 (clamped to
    [0, max_keys]) -> split_offsets [b+1] int32, the prefix sums of each request's split
    count. The total never exceeds ``max_total_splits(b, num_units)``."""
    check_devices(("lengths", lengths), ("out", out), required=1)
    if out is None:
        out = lengths.new_empty((_rows(lengths) + 1,), dtype=torch.int32)
    torch.ops.smla.decode_split_schedule(lengths, out, int_arg("num_units", num_units), int_arg("block_n", block_n),
                                         int_arg("max_keys", max_keys))
    return out


def max_total_splits(batch: int, num_units: int) -> int:
    """``batch + num_units``: the most splits decode_split_schedule can produce."""
    return _smla.max_total_splits(int_arg("batch", batch, 64), int_arg("num_units", num_units))
