"""DCP combine (smla.dcp_rescale, smla.dcp_combine) against a float64 merge written here, and
across two real processes on a gloo process group (loopback only)."""
import math
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import smla


def merged_reference(parts, lses, sink):
    """SPEC §3 merge in float64: parts [N, T, h, d_v], lses [N, T, h] -> out [T, h, d_v], lse [T, h]."""
    lses = lses.double()
    finite = torch.isfinite(lses)
    m = torch.where(finite, lses, torch.full_like(lses, -math.inf)).amax(0)
    m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    w = torch.where(finite, torch.exp(lses - m_safe), torch.zeros_like(lses))
    total = w.sum(0)
    lse = torch.where(total > 0, m_safe + torch.log(total), torch.full_like(m, -math.inf))
    weights = torch.where(total > 0, w / total, torch.zeros_like(w))
    out = (weights.unsqueeze(-1) * parts.double()).sum(0)
    if sink is not None:
        factor = 1.0 / (1.0 + torch.exp(sink.double() - lse))
        out = out * torch.where(torch.isfinite(lse), factor, torch.zeros_like(factor)).unsqueeze(-1)
    return out, lse


def random_parts(n, t, h, d_v, seed):
    g = torch.Generator().manual_seed(seed)
    parts = torch.rand((n, t, h, d_v), generator=g) * 2 - 1
    lses = torch.rand((n, t, h), generator=g) * 6 - 3
    lses[0, 0, 0] = -math.inf  # an empty shard
    lses[:, 1, 1] = -math.inf  # a row with no key anywhere
    sink = torch.rand((h,), generator=g) * 2 - 1
    return parts, lses, sink


@pytest.mark.parametrize("n", [1, 2, 4])
def test_rescale_then_sum_is_the_merge(device, n):
    t, h, d_v = 3, 8, 512
    parts, lses, sink = random_parts(n, t, h, d_v, seed=torch.randint(1 << 30, ()).item())
    ref_out, ref_lse = merged_reference(parts, lses, sink)
    received = torch.zeros((n, t, h // n, d_v), dtype=torch.float64)
    for r in range(n):
        scaled, lse = smla.dcp_rescale(parts[r].to(device), lses.to(device), r, attn_sink=sink.to(device))
        received += scaled.cpu().double()
        heads = slice(r * (h // n), (r + 1) * (h // n))
        assert torch.equal(torch.isinf(lse.cpu()), torch.isinf(ref_lse[:, heads]))
        torch.testing.assert_close(lse.cpu().double(), ref_lse[:, heads], rtol=1e-4, atol=1e-5, equal_nan=False)
    for d in range(n):
        heads = slice(d * (h // n), (d + 1) * (h // n))
        torch.testing.assert_close(received[d], ref_out[:, heads], rtol=1e-4, atol=1e-5)


def test_rescale_rejects_bad_rank(device):
    parts, lses, _ = random_parts(2, 2, 4, 16, seed=1)
    with pytest.raises(smla.SmlaError, match=r"rank must be between 0 and 1, got 2"):
        smla.dcp_rescale(parts[0].to(device), lses.to(device), 2)


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _combine_worker(rank, world, port, seed, method, dtype, results):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        t, h, d_v = 3, 8, 512
        parts, lses, sink = random_parts(world, t, h, d_v, seed)
        # A strided partial (every other head of a wider tensor) and a strided lse.
        wide = torch.zeros((t, 2 * h, d_v), dtype=dtype)
        wide[:, ::2] = parts[rank].to(dtype)
        lse_wide = torch.zeros((t, 2 * h))
        lse_wide[:, ::2] = lses[rank]
        results[rank] = smla.dcp_combine(wide[:, ::2], lse_wide[:, ::2], attn_sink=sink, method=method)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("method,dtype", [("reduce_scatter", torch.float32), ("all_to_all", torch.float32),
                                          ("all_to_all", torch.bfloat16)])
def test_combine_across_two_processes(method, dtype):
    world, t, h, d_v = 2, 3, 8, 512
    seed = torch.randint(1 << 30, ()).item()
    port = _free_port()
    ctx = mp.get_context("spawn")
    manager = ctx.Manager()
    results = manager.dict()
    mp.start_processes(_combine_worker, args=(world, port, seed, method, dtype, results), nprocs=world, join=True,
                       start_method="spawn")
    parts, lses, sink = random_parts(world, t, h, d_v, seed)
    ref_out, ref_lse = merged_reference(parts.to(dtype), lses, sink)  # the partials as the ranks hold them
    for r in range(world):
        out, lse = results[r]
        heads = slice(r * (h // world), (r + 1) * (h // world))
        assert out.dtype == torch.float32 and lse.dtype == torch.float32
        torch.testing.assert_close(out.double(), ref_out[:, heads], rtol=1e-4, atol=1e-5)
        assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse[:, heads]))
        torch.testing.assert_close(lse.double(), ref_lse[:, heads], rtol=1e-4, atol=1e-5)


def test_compacted_rank_lists_merge_to_the_unsharded_result():
    """The DCP pipeline on the CPU backend, every rank in one process (bench/dcp_combine.py's
    check): each rank's shard attended over its masked global list and over its compacted list
    (smla.dcp_local_topk -> sparse_decode with topk_length), merged with dcp_rescale, equals the
    unsharded result for N = 2 and 3, interleave 1 and 64."""
    import importlib.util
    import pathlib

    from conftest import SEED

    path = pathlib.Path(__file__).resolve().parents[2] / "bench" / "dcp_combine.py"
    spec = importlib.util.spec_from_file_location("dcp_combine_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.check_cpu(seed=SEED) < 1.6e-2
