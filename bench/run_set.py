"""The benchmark set of docs/PERF.md: runs `smla bench` for each configuration on the GPU and
prints a markdown table with the fraction of the ceilings measured in the same run and the
matching FlashMLA figure from shared/ANCHORS.md.

usage: python3 bench/run_set.py SMLA_BINARY CEILINGS_JSON OUT_JSONL [--quick]"""
import json
import subprocess
import sys

# (name, smla bench flags, FlashMLA µs on the same H200 or None)
CONFIGS = [
    ("V3.2 decode fp8_ds_mla b128 s_q2 h128", "--op sparse_decode --b 128 --s_q 2 --h_q 128 --topk 2048", 369.5),
    ("V3.2 decode fp8_ds_mla b128 s_q2 h16", "--op sparse_decode --b 128 --s_q 2 --h_q 16 --topk 2048", 230.3),
    ("V3.2 decode fp8_ds_mla b128 s_q1 h128", "--op sparse_decode --b 128 --s_q 1 --h_q 128 --topk 2048", 189.8),
    ("V3.2 decode fp8_ds_mla b128 s_q1 h64", "--op sparse_decode --b 128 --s_q 1 --h_q 64 --topk 2048", 121.3),
    ("V3.2 decode fp8_ds_mla b128 s_q1 h16", "--op sparse_decode --b 128 --s_q 1 --h_q 16 --topk 2048", 121.3),
    ("V3.2 decode fp8_ds_mla b1 s_q1 h128", "--op sparse_decode --b 1 --s_q 1 --h_q 128 --topk 2048", 21.5),
    ("V3.2 decode fp8_ds_mla b32 s_q1 h128", "--op sparse_decode --b 32 --s_q 1 --h_q 128 --topk 2048", 66.8),
    ("V4 decode fp8_model1 b128 s_q1 h64 win128+512", "--op sparse_decode --format fp8_model1 --b 128 --s_q 1 --h_q 64 "
     "--window --topk 128 --page 256 --extra_topk 512 --extra_page 64 --sink", 52.6),
    ("V4 decode fp8_model1 b128 s_q1 h128 win128+1024", "--op sparse_decode --format fp8_model1 --b 128 --s_q 1 "
     "--h_q 128 --window --topk 128 --page 256 --extra_topk 1024 --extra_page 64 --sink", 109.0),
    ("sparse prefill bf16 s_q4096 h128 topk2048 s_kv32768", "--op sparse_prefill --s_q 4096 --h_q 128 --topk 2048 "
     "--s_kv 32768", 4121.0),
    ("dense decode bf16 b128 s_q1 h128 seqlen8192", "--op dense_decode --format bf16 --b 128 --s_q 1 --h_q 128 "
     "--seqlen 8192 --page 64", 461.3),
    ("dense decode bf16 b128 s_q1 h16 seqlen8192", "--op dense_decode --format bf16 --b 128 --s_q 1 --h_q 16 "
     "--seqlen 8192 --page 64", 311.8),
    ("dense decode fp8_e4m3 b128 s_q1 h16 seqlen8192", "--op dense_decode --format fp8_e4m3 --b 128 --s_q 1 --h_q 16 "
     "--seqlen 8192 --page 64", None),
]


def main():
    smla, ceilings_path, out_path = sys.argv[1:4]
    with open(ceilings_path) as f:
        ceil = json.load(f)
    rows = []
    with open(out_path, "w") as out:
        for name, flags, anchor in CONFIGS:
            cmd = [smla, "bench", "--backend", "cuda", "--json", "/tmp/smla_bench.json"] + flags.split()
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
            if proc.returncode != 0:
                rows.append(f"| {name} | failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]} |")
                continue
            with open("/tmp/smla_bench.json") as f:
                r = json.load(f)["results"][0]
            r["name"], r["flashmla_us"] = name, anchor
            out.write(json.dumps(r) + "\n")
            us = r["time_ms"] * 1e3
            ratio = f"{anchor / us:.2f}x" if anchor else "-"
            rows.append(
                f"| {name} | {us:.1f} | {r['tflops']:.1f} | {r['gbps']:.0f} | "
                f"{100 * r['tflops'] / ceil['bf16_mm_TFLOPs']:.0f}% | {100 * r['gbps'] / ceil['copy_GBps']:.0f}% | "
                f"{anchor if anchor else '-'} | {ratio} | {r['status']} {r.get('max_err', 0):.1e} |")
            print(rows[-1], flush=True)
    print()
    print(f"Ceilings in this run: copy {ceil['copy_GBps']} GB/s, bf16 matmul {ceil['bf16_mm_TFLOPs']} TFLOP/s")
    print()
    print("| config | µs | TFLOP/s | GB/s | % mm ceiling | % copy ceiling | FlashMLA µs | FlashMLA/smla | check |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
