"""The benchmark set of docs/PERF.md: runs `smla bench` (CUDA-graph replays, cold L2, serving-
like inputs) for each configuration on the GPU, prints a markdown table with the fraction of the
ceilings measured in the same run and the matching FlashMLA figure from docs/BENCHMARKS.md
("Side by side", 2026-11-30, same H200 and method), and writes one JSON object per
configuration (key, us, tflops, gbps, commit, date, check) to OUT_JSONL.

usage: python3 bench/run_set.py SMLA_BINARY CEILINGS_JSON OUT_JSONL [--commit C] [--only PREFIX,...]
                                [--generic] [--flags "--seed 7"]
  --generic  also time every sparse_decode, dense_decode and sparse_prefill configuration on the
             generic gather-attention kernel (SMLA_SPARSE_DECODE_KERNEL / SMLA_DENSE_DECODE_KERNEL /
             SMLA_SPARSE_PREFILL_KERNEL=generic), for an A/B in the same run.
  --flags    appended to every configuration's `smla bench` flags (a fixed --seed makes two
             binaries time identical inputs: bench/ab_trees.sh)."""
import argparse
import datetime
import json
import os
import subprocess

V32 = "--op sparse_decode --format fp8_ds_mla --topk 2048"
V4 = "--op sparse_decode --format fp8_model1 --window --topk 128 --page 256 --extra_page 64 --sink"

# (key, name, smla bench flags, FlashMLA µs on the same H200 or None). Keys of the targets are
# the issue tables' codes.
CONFIGS = [
    ("sd_v32_b128_sq2_h128", "V3.2 sparse fp8 b128 s_q2 h128 topk2048", f"{V32} --b 128 --s_q 2 --h_q 128", 368.3),
    ("sd_v32_b128_sq1_h128", "V3.2 b128 s_q1 h128", f"{V32} --b 128 --s_q 1 --h_q 128", 189.5),
    ("sd_v32_b128_sq1_h64", "V3.2 b128 s_q1 h64", f"{V32} --b 128 --s_q 1 --h_q 64", 120.4),
    ("sd_v32_b128_sq1_h32", "V3.2 b128 s_q1 h32 (FlashMLA padded to 64)", f"{V32} --b 128 --s_q 1 --h_q 32", 120.1),
    ("sd_v32_b128_sq1_h16", "V3.2 b128 s_q1 h16 (FlashMLA padded to 64)", f"{V32} --b 128 --s_q 1 --h_q 16", 119.8),
    ("sd_v32_b128_sq2_h16", "V3.2 b128 s_q2 h16 (FlashMLA padded to 64)", f"{V32} --b 128 --s_q 2 --h_q 16", 228.1),
    ("sd_v32_b32_sq1_h128", "V3.2 b32 s_q1 h128", f"{V32} --b 32 --s_q 1 --h_q 128", 66.4),
    ("sd_v32_b8_sq1_h128", "V3.2 b8 s_q1 h128", f"{V32} --b 8 --s_q 1 --h_q 128", 30.0),
    ("sd_v32_b1_sq1_h128", "V3.2 b1 s_q1 h128", f"{V32} --b 1 --s_q 1 --h_q 128", 21.4),
    ("sd_v4_b128_sq1_h64", "V4 fp8_model1 b128 s_q1 h64, 128 + 512 keys, sink", f"{V4} --b 128 --s_q 1 --h_q 64 --extra_topk 512", 61.2),
    ("sd_v4_b128_sq2_h64", "V4 b128 s_q2 h64, 128 + 512", f"{V4} --b 128 --s_q 2 --h_q 64 --extra_topk 512", 104.4),
    ("sd_v4_b128_sq1_h128", "V4 b128 s_q1 h128, 128 + 1024", f"{V4} --b 128 --s_q 1 --h_q 128 --extra_topk 1024", 110.5),
    ("sd_v4_b128_sq2_h128", "V4 b128 s_q2 h128, 128 + 1024", f"{V4} --b 128 --s_q 2 --h_q 128 --extra_topk 1024", 209.5),
    ("sp_d576_h128_k2048_s32k", "sparse prefill d576 s_q4096 h128 topk2048 s_kv32768",
     "--op sparse_prefill --s_q 4096 --h_q 128 --topk 2048 --s_kv 32768", 3610.9),
    ("sp_d576_h128_k2048_s8k", "sparse prefill d576 s_q4096 h128 topk2048 s_kv8192",
     "--op sparse_prefill --s_q 4096 --h_q 128 --topk 2048 --s_kv 8192", 3433.0),
    ("sp_d512_h128_k1024_s32k_sink", "sparse prefill d512 s_q4096 h128 topk1024 s_kv32768, sink",
     "--op sparse_prefill --d_qk 512 --s_q 4096 --h_q 128 --topk 1024 --s_kv 32768 --sink", 1829.0),
    ("sp_d512_h64_k512_s32k_sink", "sparse prefill d512 s_q4096 h64 topk512 s_kv32768, sink",
     "--op sparse_prefill --d_qk 512 --s_q 4096 --h_q 64 --topk 512 --s_kv 32768 --sink", 546.3),
    # FlashMLA's prefill reads bf16 kv rows only: its figure is sp_d576_h128_k2048_s32k's, without
    # the gather of the cache into bf16 rows that it would need first.
    ("spf_ds_mla_d576_h128_k2048", "sparse prefill from the fp8_ds_mla paged cache d576 s_q4096 h128 topk2048 "
     "s_kv32768, no workspace (FlashMLA: bf16 kv, its gather not counted)",
     "--op sparse_prefill --format fp8_ds_mla --s_q 4096 --h_q 128 --topk 2048 --s_kv 32768", 3610.9),
    ("dd_bf16_b128_sq1_h16_L8k", "dense bf16 b128 s_q1 h16 L8192", "--op dense_decode --format bf16 --b 128 --s_q 1 "
     "--h_q 16 --seqlen 8192 --page 64", 321.2),
    ("dd_bf16_b128_sq1_h128_L8k", "dense bf16 b128 s_q1 h128 L8192", "--op dense_decode --format bf16 --b 128 --s_q 1 "
     "--h_q 128 --seqlen 8192 --page 64", 458.2),
    ("dd_bf16_b128_sq2_h128_L8k", "dense bf16 b128 s_q2 h128 L8192", "--op dense_decode --format bf16 --b 128 --s_q 2 "
     "--h_q 128 --seqlen 8192 --page 64", 816.5),
    ("dd_bf16_b128_sq1_h16_L32k", "dense bf16 b128 s_q1 h16 L32768", "--op dense_decode --format bf16 --b 128 --s_q 1 "
     "--h_q 16 --seqlen 32768 --page 64", 1156.5),
    ("dd_bf16_b1_sq1_h128_L8k", "dense bf16 b1 s_q1 h128 L8192", "--op dense_decode --format bf16 --b 1 --s_q 1 "
     "--h_q 128 --seqlen 8192 --page 64", 36.1),
    ("dd_fp8q_b128_sq2_h128_L8k", "dense fp8_e4m3 cache + fp8 q b128 s_q2 h128 L8192 (FlashMLA: none; bf16 816.5)",
     "--op dense_decode --format fp8_e4m3 --q_fp8 --b 128 --s_q 2 --h_q 128 --seqlen 8192 --page 64", None),
    ("dd_fp8_b128_sq1_h16_L8k", "dense fp8_e4m3 b128 s_q1 h16 L8192", "--op dense_decode --format fp8_e4m3 --b 128 "
     "--s_q 1 --h_q 16 --seqlen 8192 --page 64", None),
]

# --generic: the environment variable that sends a key's operation to the generic kernel.
GENERIC_SWITCH = [("sd_", "SMLA_SPARSE_DECODE_KERNEL"), ("dd_", "SMLA_DENSE_DECODE_KERNEL"),
                  ("sp_", "SMLA_SPARSE_PREFILL_KERNEL"), ("spf_", "SMLA_SPARSE_PREFILL_KERNEL")]


def run_one(smla, flags, env=None):
    cmd = [smla, "bench", "--backend", "cuda", "--json", "/tmp/smla_bench.json"] + flags.split()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return None, lines[-1] if lines else f"rc {proc.returncode}"
    with open("/tmp/smla_bench.json") as f:
        return json.load(f)["results"][0], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("smla")
    ap.add_argument("ceilings")
    ap.add_argument("out")
    ap.add_argument("--commit", default=os.environ.get("SMLA_COMMIT", "unknown"))
    ap.add_argument("--only", default="")
    ap.add_argument("--generic", action="store_true")
    ap.add_argument("--flags", default="")
    args = ap.parse_args()
    with open(args.ceilings) as f:
        ceil = json.load(f)
    date = datetime.date.today().isoformat()
    only = [p for p in args.only.split(",") if p]
    rows = []
    with open(args.out, "w") as out:
        for key, name, flags, anchor in CONFIGS:
            if only and not any(key.startswith(p) for p in only):
                continue
            variants = [("", None)]
            switch = next((var for prefix, var in GENERIC_SWITCH if key.startswith(prefix)), None)
            if args.generic and switch:
                variants.append((" [generic]", dict(os.environ, **{switch: "generic"})))
            for suffix, env in variants:
                r, err = run_one(args.smla, f"{flags} {args.flags}".strip(), env)
                if r is None:
                    rows.append(f"| `{key}`{suffix} | {name} | failed: {err} |")
                    print(rows[-1], flush=True)
                    continue
                us = r["time_ms"] * 1e3
                rec = {"key": key + ("_generic" if suffix else ""), "name": name, "us": round(us, 2),
                       "tflops": r["tflops"], "gbps": r["gbps"], "commit": args.commit, "date": date,
                       "check": r["status"], "max_err": r.get("max_err"), "lse_err": r.get("lse_err"),
                       "flashmla_us": anchor, "ratio_vs_flashmla": round(anchor / us, 3) if anchor else None,
                       "pct_mm_ceiling": round(100 * r["tflops"] / ceil["bf16_mm_TFLOPs"], 1),
                       "pct_copy_ceiling": round(100 * r["gbps"] / ceil["copy_GBps"], 1),
                       "shape": r.get("shape"), "flags": flags,
                       # > 1: the replays slowed down as the run went on (the power cap, PERF.md)
                       "last_over_first_third": round(r["last_third_ms"] / r["first_third_ms"], 3)
                       if r.get("first_third_ms") else None}
                out.write(json.dumps(rec) + "\n")
                ratio = f"{anchor / us:.2f}x" if anchor else "-"
                rows.append(
                    f"| `{key}`{suffix} | {name} | {us:.1f} | {r['tflops']:.1f} | {r['gbps']:.0f} | "
                    f"{rec['pct_mm_ceiling']:.0f}% | {rec['pct_copy_ceiling']:.0f}% | "
                    f"{anchor if anchor else '-'} | {ratio} | {r['status']} {r.get('max_err', 0) or 0:.1e} |")
                print(rows[-1], flush=True)
    print()
    print(f"Ceilings in this run: copy {ceil['copy_GBps']} GB/s, bf16 matmul {ceil['bf16_mm_TFLOPs']} TFLOP/s")
    print()
    print("| key | config | µs | TFLOP/s | GB/s | % mm ceiling | % copy ceiling | FlashMLA µs | FlashMLA/smla | check |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
