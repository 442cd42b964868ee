"""Decode context parallelism on N GPUs, one process per GPU on an NCCL process group
(NCCL_NVLS_ENABLE=0: no NVLink multicast). Every rank holds the positions p of each request with
(p // I) % N == rank at their local slots (SPEC §4.6) in its own fp8_ds_mla cache, runs
sparse_decode over that shard for all heads, then smla.dcp_combine. Each rank's heads are
checked against the unsharded single-GPU result; the attention on the shard, the combine and
the unsharded attention are timed with CUDA events (median).

usage: python3 bench/dcp_combine.py [--world N] [--small] [--out FILE.jsonl]"""
import argparse
import json
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import smla

# (name, b, s_q, h, topk, context length per request, interleave)
REAL = [("V3.2 sparse_decode fp8_ds_mla b64 s_q1 h128 topk2048 ctx32768", 64, 1, 128, 2048, 32768, 1),
        ("V3.2 sparse_decode fp8_ds_mla b128 s_q2 h16 topk2048 ctx16384", 128, 2, 16, 2048, 16384, 64)]
SMALL = [("small b3 s_q2 h32 topk512 ctx3000", 3, 2, 32, 512, 3000, 1),
         ("small b2 s_q1 h16 topk256 ctx777", 2, 1, 16, 256, 777, 64)]
PAGE = 64


def _median_us(fn, reps=20):
    fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return sorted(times)[len(times) // 2]


def _case(rank, world, b, s_q, h, topk, ctx, interleave, seed, dev):
    """The same inputs on every rank (seeded generator on `dev`); the unsharded cache and
    indices, and this rank's shard cache and local indices."""
    g = torch.Generator(device=dev).manual_seed(seed)
    rows = b * ctx
    blocks = (rows + PAGE - 1) // PAGE
    kv_c = (torch.rand((rows, 512), generator=g, device=dev) * 2 - 1).bfloat16()
    k_pe = (torch.rand((rows, 64), generator=g, device=dev) * 2 - 1).bfloat16()
    q = (torch.rand((b, s_q, h, 576), generator=g, device=dev) * 2 - 1).bfloat16()
    sink = torch.rand((h,), generator=g, device=dev) * 3 - 1
    pos = torch.randint(0, ctx, (b, s_q, topk), generator=g, device=dev, dtype=torch.int64)
    pos[torch.rand(pos.shape, generator=g, device=dev) < 0.05] = -1  # padding the indexer leaves

    # Request i's position p: slot i * ctx + p unsharded, i * ctx + local(p) on its owner rank.
    p = torch.arange(ctx, device=dev)
    owner = (p // interleave) % world
    local = p // (interleave * world) * interleave + p % interleave
    req = torch.arange(b, device=dev).unsqueeze(1) * ctx
    full = torch.full((blocks, PAGE, 656), 0xFF, dtype=torch.uint8, device=dev)
    smla.write_cache(kv_c, k_pe, torch.arange(rows, device=dev), full, cache_format="fp8_ds_mla")
    shard = torch.full_like(full, 0xFF)
    shard_slots = torch.where(owner == rank, req + local, torch.full_like(req, -1)).reshape(-1)
    smla.write_cache(kv_c, k_pe, shard_slots, shard, cache_format="fp8_ds_mla")

    base = (torch.arange(b, device=dev) * ctx).view(b, 1, 1)
    safe = pos.clamp(min=0)
    glob = torch.where(pos >= 0, base + pos, -1).int()
    mine = (pos >= 0) & (owner[safe] == rank)
    loc = torch.where(mine, base + local[safe], -1).int()
    return q, sink, full, glob, shard, loc


def _worker(rank, world, port, cases, seed, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    try:
        out_rows = []
        for name, b, s_q, h, topk, ctx, interleave in cases:
            q, sink, full, glob, shard, loc = _case(rank, world, b, s_q, h, topk, ctx, interleave, seed,
                                                     torch.device("cuda", rank))
            t = b * s_q
            ref_out, ref_lse = smla.sparse_decode(q, full, glob, cache_format="fp8_ds_mla", attn_sink=sink)
            part_out, part_lse = smla.sparse_decode(q, shard, loc, cache_format="fp8_ds_mla")
            out, lse = smla.dcp_combine(part_out.view(t, h, 512), part_lse.view(t, h), attn_sink=sink)
            heads = slice(rank * (h // world), (rank + 1) * (h // world))
            want = ref_out.view(t, h, 512)[:, heads].float()
            err = (out - want).abs().max().item()
            lse_err = (lse - ref_lse.view(t, h)[:, heads]).abs().max().item()
            torch.testing.assert_close(out, want, atol=1.6e-2, rtol=1.6e-2, msg=lambda m: f"{name}, rank {rank}: {m}")
            torch.testing.assert_close(lse, ref_lse.view(t, h)[:, heads], atol=1e-3, rtol=1e-4,
                                       msg=lambda m: f"{name}, rank {rank} lse: {m}")
            shard_us = _median_us(lambda: smla.sparse_decode(q, shard, loc, cache_format="fp8_ds_mla",
                                                             out=part_out, lse=part_lse))
            dist.barrier()
            combine_us = _median_us(lambda: smla.dcp_combine(part_out.view(t, h, 512), part_lse.view(t, h),
                                                             attn_sink=sink))
            full_us = _median_us(lambda: smla.sparse_decode(q, full, glob, cache_format="fp8_ds_mla",
                                                            attn_sink=sink, out=ref_out, lse=ref_lse))
            out_rows.append(dict(name=name, world=world, rank=rank, interleave=interleave, max_err=err,
                                 lse_err=lse_err, shard_attention_us=shard_us, combine_us=combine_us,
                                 unsharded_us=full_us))
        results[rank] = out_rows
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(world, small, seed=None):
    """Runs the check and timing on `world` GPUs; returns every rank's result rows. A mismatch
    in any rank raises (torch.multiprocessing.ProcessRaisedException)."""
    seed = int(torch.randint(1 << 30, ()).item()) if seed is None else seed
    ctx = mp.get_context("spawn")
    results = ctx.Manager().dict()
    mp.start_processes(_worker, args=(world, _free_port(), SMALL if small else REAL, seed, results),
                       nprocs=world, join=True, start_method="spawn")
    return [row for r in range(world) for row in results[r]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=torch.cuda.device_count())
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.world < 2:
        raise SystemExit(f"dcp_combine.py needs at least 2 GPUs, this machine has {torch.cuda.device_count()}")
    rows = launch(args.world, args.small)
    if args.out:
        with open(args.out, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    print("| config | N | rank | attention on the shard µs | combine µs | combine share | unsharded µs | max err |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        share = r["combine_us"] / (r["shard_attention_us"] + r["combine_us"])
        print(f"| {r['name']} I={r['interleave']} | {r['world']} | {r['rank']} | {r['shard_attention_us']:.1f} | "
              f"{r['combine_us']:.1f} | {100 * share:.0f}% | {r['unsharded_us']:.1f} | {r['max_err']:.1e} |")


if __name__ == "__main__":
    main()
