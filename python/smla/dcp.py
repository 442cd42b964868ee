"""Decode context parallelism (SPEC §3, §4.6): every rank attends over its shard of the cache
for all heads; ``dcp_combine`` then merges the partial results across the ranks of a
``torch.distributed`` process group: each rank receives every rank's partial for its own heads
(one all-to-all of the partials in their dtype, one of the LSEs) and merges them with
:func:`merge_states`, applying the sink once, after the merge. :func:`dcp_rescale` is the
other way engines do it (an all-gather of the LSEs, the rescale, a reduce-scatter of float32
sums), kept as an operation of its own."""

from typing import Optional, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

from . import _smla
from ._convert import check_devices, describe, device_of, dl, error, stream_of
from .ops import merge_states

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
    """Merges the ranks' partial attention results. out_local [T, h, d_v] float32 or bfloat16 and
    lse_local [T, h] are this rank's (over its shard, all heads, no sink); h must be a multiple
    of the group's size N. Returns ``(out [T, h/N, d_v] float32, lse [T, h/N] float32)`` for this
    rank's heads ``rank * h/N ...``, with the sink applied once. Collectives run on ``group``
    (NCCL for CUDA tensors, gloo on the CPU): two all-to-alls, each rank sending every other
    rank that rank's heads of its partial (out_local's bytes as they are, and the LSEs)."""
    check_devices(("out_local", out_local), ("lse_local", lse_local), ("attn_sink", attn_sink))
    # Every shape is checked here, before the first collective, so that a mismatch names the
    # caller's argument and no rank is left waiting in a collective another rank never joins.
    if out_local.dim() != 3:
        raise error("out_local", "a tensor of shape (T, h, d_v)", describe(out_local))
    if out_local.dtype not in (torch.float32, torch.bfloat16):
        raise error("out_local", "float32 or bfloat16 of shape (T, h, d_v)", describe(out_local))
    t, h, d_v = out_local.shape
    if tuple(lse_local.shape) != (t, h):
        raise error("lse_local", f"a tensor of shape ({t}, {h}) (T and h of out_local)", describe(lse_local))
    if attn_sink is not None and (attn_sink.dtype != torch.float32 or tuple(attn_sink.shape) != (h,)):
        raise error("attn_sink", f"float32 of shape ({h},) (h of out_local)", describe(attn_sink))
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    if h < 1 or h % world != 0:  # the core's rule, before the collectives rather than after them
        raise error("out_local", f"a tensor of shape (T, h, d_v) with h a positive multiple of the world size {world}",
                    describe(out_local))
    hr = h // world
    # Row d of a send buffer goes to rank d: this rank's partial for rank d's heads.
    send_o = out_local.reshape(t, world, hr, d_v).transpose(0, 1).contiguous()
    send_l = lse_local.float().reshape(t, world, hr).transpose(0, 1).contiguous()
    recv_o = torch.empty_like(send_o)
    recv_l = torch.empty_like(send_l)
    dist.all_to_all_single(recv_o, send_o, group=group)
    dist.all_to_all_single(recv_l, send_l, group=group)
    sink = None if attn_sink is None else attn_sink[rank * hr:(rank + 1) * hr]
    return merge_states(recv_o, recv_l, attn_sink=sink, out_dtype=torch.float32)
