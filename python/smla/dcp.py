"""Decode context parallelism (SPEC §3, §4.6): every rank attends over its shard of the cache
for all heads; ``dcp_combine`` then merges the partial results across the ranks of a
``torch.distributed`` process group the way engines do — an all-gather of the LSEs, the
rescale of this rank's partial (:func:`dcp_rescale`), and a reduce-scatter (sum) over the
head dimension — applying the sink once, after the merge."""

from typing import Optional, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

from . import _smla
from ._convert import check_devices, describe, device_of, dl, error, stream_of

_LIB = "smla"


@torch.library.custom_op(f"{_LIB}::dcp_rescale", mutates_args=("scaled", "lse"))
def _dcp_rescale_op(out_local: Tensor, lse_all: Tensor, rank: int, attn_sink: Optional[Tensor], scaled: Tensor,
                    lse: Tensor) -> None:
    with device_of(out_local):
        _smla.dcp_rescale(out_local=dl(out_local), lse_all=dl(lse_all), rank=rank, attn_sink=dl(attn_sink),
                          scaled=dl(scaled), lse=dl(lse), stream=stream_of(out_local))


@_dcp_rescale_op.register_fake
def _(out_local, lse_all, rank, attn_sink, scaled, lse) -> None:
    return None


def dcp_rescale(out_local: Tensor, lse_all: Tensor, rank: int, *,
                attn_sink: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """This rank's share of the combine. out_local [T, h, d_v] float32 or bfloat16 (its partial,
    no sink), lse_all [N, T, h] float32 (every rank's lse). Returns ``(scaled [N, T, h/N, d_v]
    float32, lse [T, h/N] float32)``: summing ``scaled`` over the ranks gives, at index d, the
    merged output of rank d's heads; ``lse`` is the merged lse of this rank's heads."""
    check_devices(("out_local", out_local), ("lse_all", lse_all), ("attn_sink", attn_sink))
    # Sizes for the outputs; malformed inputs get placeholders the core then rejects, naming them.
    n, t, h = lse_all.shape if lse_all.dim() == 3 else (1, 0, 0)
    d_v = out_local.shape[-1] if out_local.dim() > 0 else 0
    scaled = out_local.new_empty((n, t, h // max(n, 1), d_v), dtype=torch.float32)
    lse = out_local.new_empty((t, h // max(n, 1)), dtype=torch.float32)
    torch.ops.smla.dcp_rescale(out_local, lse_all, int(rank), attn_sink, scaled, lse)
    return scaled, lse


def dcp_combine(out_local: Tensor, lse_local: Tensor, group: Optional[dist.ProcessGroup] = None, *,
                attn_sink: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Merges the ranks' partial attention results. out_local [T, h, d_v] and lse_local [T, h]
    are this rank's (over its shard, all heads, no sink); h must be a multiple of the group's
    size N. Returns ``(out [T, h/N, d_v] float32, lse [T, h/N] float32)`` for this rank's heads
    ``rank * h/N ...``, with the sink applied once. Collectives run on ``group`` (NCCL for CUDA
    tensors; gloo on the CPU, where the reduce-scatter is an all-reduce and a slice)."""
    check_devices(("out_local", out_local), ("lse_local", lse_local), ("attn_sink", attn_sink))
    # lse_local is gathered into lse_all before the core sees anything: its shape is checked
    # here, so that a mismatch names lse_local (not lse_all) and no collective runs first.
    if out_local.dim() != 3:
        raise error("out_local", "a tensor of shape (T, h, d_v)", describe(out_local))
    t, h = out_local.shape[0], out_local.shape[1]
    if tuple(lse_local.shape) != (t, h):
        raise error("lse_local", f"a tensor of shape ({t}, {h}) (T and h of out_local)", describe(lse_local))
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    if h < 1 or h % world != 0:  # the core's rule, before the gather rather than after it
        raise error("out_local", f"a tensor of shape (T, h, d_v) with h a positive multiple of the world size {world}",
                    describe(out_local))
    lse_all = lse_local.new_empty((world, t, h), dtype=torch.float32)
    dist.all_gather_into_tensor(lse_all.view(world * t, h), lse_local.contiguous().float(), group=group)
    scaled, lse = dcp_rescale(out_local, lse_all, rank, attn_sink=attn_sink)
    hr = h // world
    if dist.get_backend(group) == dist.Backend.GLOO:
        dist.all_reduce(scaled, group=group)
        return scaled[rank].clone(), lse
    out = scaled.new_empty((t, hr, scaled.shape[-1]))
    dist.reduce_scatter_tensor(out, scaled.reshape(world * t, hr, -1), group=group)
    return out, lse
