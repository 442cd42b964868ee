"""Decode context parallelism on N GPUs, one process per GPU on an NCCL process group
(NCCL_NVLS_ENABLE=0: no NVLink multicast). Every rank holds the positions p of each request with
(p // I) % N == rank at their local slots (SPEC §4.6) in its own fp8_ds_mla cache and runs
sparse_decode over that shard for all heads, two ways: over the whole global index list with the
positions it does not own masked (-1), and over its compacted list from smla.dcp_local_topk
(its own slots packed to the front, topk_length = the request's largest count); then
smla.dcp_combine with each of its methods. Each rank's heads are checked against the unsharded
single-GPU result (every way and method); the
attention on the shard (both ways), the compaction, the combine and the unsharded attention are
timed with CUDA events (median), each call eagerly (the default method) and, with --graphs, as
CUDA graph replays (the GPU's time without the host's; the combine and the rank step, one graph,
with every method).
The eager rank step is compaction + compacted attention + combine.

usage: python3 bench/dcp_combine.py [--world N] [--small] [--graphs] [--out FILE.jsonl] [--commit C]
       python3 bench/dcp_combine.py --check-cpu   (one process, the CPU backend: every rank's
              masked and compacted shard results merged with dcp_rescale against the unsharded
              result, small shapes; no GPU or process group needed)"""
import argparse
import datetime
import inspect
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
# smla.dcp_combine's ways, each checked and timed; the default is what an engine gets.
METHODS = ("all_to_all", "reduce_scatter")
DEFAULT_METHOD = inspect.signature(smla.dcp_combine).parameters["method"].default


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


def _capture(fn):
    """fn captured in a CUDA graph after two warm-up calls on a side stream (as torch asks), or
    None when the capture fails (the failure is printed)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            fn()
    except Exception as e:  # noqa: BLE001  (any capture failure: time eagerly instead)
        print(f"CUDA graph capture failed: {e}", flush=True)
        return None
    return g


def _replay_us(g, reps=20):
    """Median of `reps` replays of g, each between its own pair of CUDA events: the GPU's time
    for the captured work, without the host's (as engines run decode steps)."""
    return _median_us(g.replay, reps)


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
    # The rank's block table with one-slot pages: request i's local position j at slot i * ctx + j
    # (context lengths need not be multiples of a page).
    table = (req + torch.arange(ctx, device=dev).unsqueeze(0)).int()
    return q, sink, full, glob, shard, loc, pos.int(), table


def _compact(pos, table, world, rank, interleave):
    """This rank's compacted index list: (slots [b, s_q, topk], topk_length [b])."""
    slots, _, topk_length = smla.dcp_local_topk(pos, table, 1, world=world, rank=rank, interleave=interleave)
    return slots, topk_length


def _graph_timings(q, shard, full, glob, slots, topk_length, comp_out, comp_lse, ref_out, ref_lse, sink, pos, table,
                   world, rank, interleave, t, h):
    """The parts as CUDA graph replays, and the whole rank step as one graph, µs by name (empty
    when some rank could not capture): the combine and the step with every method of
    smla.dcp_combine (`combine_<method>`, `step_<method>`; `combine` and `step` are the default
    method's). Every rank captures the same graphs in the same order; they are replayed only if
    every rank captured all of them (a graph with a collective replayed on one rank alone would
    wait forever)."""
    def step(method):
        sl, tl = _compact(pos, table, world, rank, interleave)
        o, l = smla.sparse_decode(q, shard, sl, topk_length=tl, cache_format="fp8_ds_mla")
        smla.dcp_combine(o.view(t, h, 512), l.view(t, h), attn_sink=sink, method=method)

    def combine(method):
        return smla.dcp_combine(comp_out.view(t, h, 512), comp_lse.view(t, h), attn_sink=sink, method=method)

    parts = dict(
        compact=lambda: _compact(pos, table, world, rank, interleave),
        compacted_attention=lambda: smla.sparse_decode(q, shard, slots, topk_length=topk_length,
                                                       cache_format="fp8_ds_mla", out=comp_out, lse=comp_lse),
        **{f"combine_{m}": (lambda m=m: combine(m)) for m in METHODS},
        **{f"step_{m}": (lambda m=m: step(m)) for m in METHODS},
        unsharded=lambda: smla.sparse_decode(q, full, glob, cache_format="fp8_ds_mla", attn_sink=sink,
                                             out=ref_out, lse=ref_lse))
    graphs = {k: _capture(fn) for k, fn in parts.items()}
    ok = torch.tensor([int(all(g is not None for g in graphs.values()))], device=q.device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    if not ok.item():
        return {}
    us = {}
    for k, g in graphs.items():
        dist.barrier()
        us[k] = _replay_us(g)
    us["combine"], us["step"] = us[f"combine_{DEFAULT_METHOD}"], us[f"step_{DEFAULT_METHOD}"]
    return us


def _worker(rank, world, port, cases, seed, results, use_graphs=False):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    try:
        out_rows = []
        for name, b, s_q, h, topk, ctx, interleave in cases:
            q, sink, full, glob, shard, loc, pos, table = _case(rank, world, b, s_q, h, topk, ctx, interleave, seed,
                                                                 torch.device("cuda", rank))
            t = b * s_q
            ref_out, ref_lse = smla.sparse_decode(q, full, glob, cache_format="fp8_ds_mla", attn_sink=sink)
            part_out, part_lse = smla.sparse_decode(q, shard, loc, cache_format="fp8_ds_mla")
            slots, topk_length = _compact(pos, table, world, rank, interleave)
            comp_out, comp_lse = smla.sparse_decode(q, shard, slots, topk_length=topk_length, cache_format="fp8_ds_mla")
            heads = slice(rank * (h // world), (rank + 1) * (h // world))
            want = ref_out.view(t, h, 512)[:, heads].float()
            errs = {}
            for way, (po, pl) in (("masked", (part_out, part_lse)), ("compacted", (comp_out, comp_lse))):
                for method in METHODS:
                    out, lse = smla.dcp_combine(po.view(t, h, 512), pl.view(t, h), attn_sink=sink, method=method)
                    errs[way] = max(errs.get(way, 0.0), (out - want).abs().max().item())
                    errs[way + "_lse"] = max(errs.get(way + "_lse", 0.0),
                                             (lse - ref_lse.view(t, h)[:, heads]).abs().max().item())
                    torch.testing.assert_close(out, want, atol=1.6e-2, rtol=1.6e-2,
                                               msg=lambda m: f"{name}, rank {rank}, {way}, {method}: {m}")
                    torch.testing.assert_close(lse, ref_lse.view(t, h)[:, heads], atol=1e-3, rtol=1e-4,
                                               msg=lambda m: f"{name}, rank {rank}, {way}, {method} lse: {m}")
            shard_us = _median_us(lambda: smla.sparse_decode(q, shard, loc, cache_format="fp8_ds_mla",
                                                             out=part_out, lse=part_lse))
            compact_us = _median_us(lambda: _compact(pos, table, world, rank, interleave))
            comp_attn_us = _median_us(lambda: smla.sparse_decode(q, shard, slots, topk_length=topk_length,
                                                                 cache_format="fp8_ds_mla", out=comp_out, lse=comp_lse))
            dist.barrier()
            combine_us = _median_us(lambda: smla.dcp_combine(comp_out.view(t, h, 512), comp_lse.view(t, h),
                                                             attn_sink=sink))
            full_us = _median_us(lambda: smla.sparse_decode(q, full, glob, cache_format="fp8_ds_mla",
                                                            attn_sink=sink, out=ref_out, lse=ref_lse))
            step_us = compact_us + comp_attn_us + combine_us

            graph_us = _graph_timings(q, shard, full, glob, slots, topk_length, comp_out, comp_lse, ref_out, ref_lse,
                                      sink, pos, table, world, rank, interleave, t, h) if use_graphs else {}
            g_ratio = graph_us["step"] / graph_us["unsharded"] if graph_us else None
            out_rows.append(dict(name=name, world=world, rank=rank, interleave=interleave, b=b, h=h,
                                 max_err=max(errs["masked"], errs["compacted"]),
                                 lse_err=max(errs["masked_lse"], errs["compacted_lse"]),
                                 shard_attention_us=shard_us, compact_us=compact_us,
                                 compacted_attention_us=comp_attn_us, combine_us=combine_us, step_us=step_us,
                                 unsharded_us=full_us, step_ratio=step_us / full_us,
                                 **{f"{k}_graph_us": v for k, v in graph_us.items()}, step_ratio_graph=g_ratio))
        results[rank] = out_rows
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(world, small, seed=None, use_graphs=False):
    """Runs the check and timing on `world` GPUs; returns every rank's result rows. A mismatch
    in any rank raises (torch.multiprocessing.ProcessRaisedException)."""
    seed = int(torch.randint(1 << 30, ()).item()) if seed is None else seed
    ctx = mp.get_context("spawn")
    results = ctx.Manager().dict()
    mp.start_processes(_worker, args=(world, _free_port(), SMALL if small else REAL, seed, results, use_graphs),
                       nprocs=world, join=True, start_method="spawn")
    return [row for r in range(world) for row in results[r]]


def check_cpu(seed=0):
    """Every rank of a small case in one process on the CPU backend: the masked and the compacted
    shard results, merged with dcp_rescale (the combine without collectives), against the
    unsharded result. Returns the largest error."""
    worst = 0.0
    dev = torch.device("cpu")
    for name, b, s_q, h, topk, ctx, interleave in SMALL:
        for world in (2, 3):
            hw = h - h % world
            if hw == 0:
                continue
            per_rank = []
            for rank in range(world):
                q, sink, full, glob, shard, loc, pos, table = _case(rank, world, b, s_q, h, topk, ctx, interleave,
                                                                    seed, dev)
                q, sink = q[:, :, :hw].contiguous(), sink[:hw].contiguous()
                slots, topk_length = _compact(pos, table, world, rank, interleave)
                masked = smla.sparse_decode(q, shard, loc, cache_format="fp8_ds_mla")
                compacted = smla.sparse_decode(q, shard, slots, topk_length=topk_length, cache_format="fp8_ds_mla")
                per_rank.append((masked, compacted))
            ref_out, ref_lse = smla.sparse_decode(q, full, glob, cache_format="fp8_ds_mla", attn_sink=sink)
            t = b * s_q
            for way in (0, 1):
                lse_all = torch.stack([r[way][1].reshape(t, hw) for r in per_rank])
                scaled = sum(smla.dcp_rescale(r[way][0].reshape(t, hw, 512), lse_all, rank, attn_sink=sink)[0]
                             for rank, r in enumerate(per_rank))
                for rank in range(world):
                    heads = slice(rank * (hw // world), (rank + 1) * (hw // world))
                    want = ref_out.reshape(t, hw, 512)[:, heads].float()
                    err = (scaled[rank] - want).abs().max().item()
                    torch.testing.assert_close(scaled[rank], want, atol=1.6e-2, rtol=1.6e-2,
                                               msg=lambda m: f"{name} N={world} rank {rank} way {way}: {m}")
                    worst = max(worst, err)
            print(f"{name} I={interleave} N={world}: masked and compacted shards merge to the unsharded result")
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=torch.cuda.device_count())
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--graphs", action="store_true", help="also time CUDA graph replays of each part and of the rank step")
    ap.add_argument("--out")
    ap.add_argument("--commit", default=os.environ.get("SMLA_COMMIT", "unknown"))
    ap.add_argument("--check-cpu", action="store_true")
    args = ap.parse_args()
    if args.check_cpu:
        print(f"largest error {check_cpu():.2e}")
        return
    if args.world < 2:
        raise SystemExit(f"dcp_combine.py needs at least 2 GPUs, this machine has {torch.cuda.device_count()}")
    rows = launch(args.world, args.small, use_graphs=args.graphs)
    if args.out:
        # One row per rank, plus the keys (dcp<N>_b<b>_h<h>_{combine,step_ratio}: the
        # slowest rank's value; a ratio row keeps the ratio in `us`).
        date = datetime.date.today().isoformat()
        with open(args.out, "w") as f:
            f.writelines(json.dumps(dict(r, commit=args.commit, date=date)) + "\n" for r in rows)
            for name in dict.fromkeys(r["name"] for r in rows):
                rs = [r for r in rows if r["name"] == name]
                key = f"dcp{rs[0]['world']}_b{rs[0]['b']}_h{rs[0]['h']}"
                for suffix, field in (("combine", "combine_us"), ("step_ratio", "step_ratio"),
                                      ("combine_graph", "combine_graph_us"), ("step_ratio_graph", "step_ratio_graph"),
                                      *((f"combine_graph_{m}", f"combine_{m}_graph_us") for m in METHODS)):
                    if any(r.get(field) is None for r in rs):
                        continue  # no graph timings: a capture failed on some rank
                    f.write(json.dumps(dict(key=f"{key}_{suffix}", name=name, us=max(r[field] for r in rs),
                                            commit=args.commit, date=date,
                                            check=f"ok {max(r['max_err'] for r in rs):.1e}")) + "\n")
    print("| config | N | rank | shard attention, masked µs | compaction µs | shard attention, compacted µs | "
          "combine µs | rank step µs | unsharded µs | step / unsharded | max err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} I={r['interleave']} | {r['world']} | {r['rank']} | {r['shard_attention_us']:.1f} | "
              f"{r['compact_us']:.1f} | {r['compacted_attention_us']:.1f} | {r['combine_us']:.1f} | "
              f"{r['step_us']:.1f} | {r['unsharded_us']:.1f} | {r['step_ratio']:.2f} | {r['max_err']:.1e} |")
    if not args.graphs:
        return
    print(f"\nCUDA graph replays (the GPU's time, no host work), µs; combine and rank step by method "
          f"(default {DEFAULT_METHOD}; the ratio is the default's):\n")
    print("| config | N | rank | compaction | shard attention, compacted | "
          + " | ".join(f"combine, {m}" for m in METHODS) + " | "
          + " | ".join(f"rank step (one graph), {m}" for m in METHODS) + " | unsharded | step / unsharded |")
    print("|---|---|---|---|---|" + "---|" * (2 * len(METHODS)) + "---|---|")
    for r in rows:
        if r.get("step_ratio_graph") is None:
            print(f"| {r['name']} I={r['interleave']} | {r['world']} | {r['rank']} | capture failed |")
            continue
        print(f"| {r['name']} I={r['interleave']} | {r['world']} | {r['rank']} | {r['compact_graph_us']:.1f} | "
              f"{r['compacted_attention_graph_us']:.1f} | "
              + " | ".join(f"{r[f'combine_{m}_graph_us']:.1f}" for m in METHODS) + " | "
              + " | ".join(f"{r[f'step_{m}_graph_us']:.1f}" for m in METHODS)
              + f" | {r['unsharded_graph_us']:.1f} | {r['step_ratio_graph']:.2f} |")


if __name__ == "__main__":
    main()
