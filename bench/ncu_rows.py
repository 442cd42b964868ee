#!/usr/bin/env python3
"""Where each benchmark row's time goes, from Nsight Compute (the issues' "ncu: issue slots,
stalls, bytes in flight"): profiles one launch of the attention kernel of each named row of
bench/run_set.py with `ncu --set full`, exports its details page, raw metrics and per-instruction
stall samples, and writes one JSON record per row: the kernel's time and SM clock under the
profiler, the throughputs (DRAM, L2, L1/shared, SM), issue slots, IPC, eligible warps per
scheduler, the tensor pipe, shared-memory bank conflicts, registers and occupancy, and each role's
share of the stall samples with its top reasons (bench/ncu_roles.py splits the SASS by role).

usage: python3 bench/ncu_rows.py profile SMLA_BINARY OUT_DIR OUT_JSONL KEY [KEY ...]
                                 [--commit C] [--prefill_s_q N] [--ncu PATH] [--timeout S]
       python3 bench/ncu_rows.py summarize NAME [--key K] [--config TEXT] [--commit C]
       python3 bench/ncu_rows.py markdown RECORDS_JSONL

profile    for each key: NAME = OUT_DIR/KEY; runs ncu on the key's `smla bench` flags (one eager
           call after one warm-up, no check) and writes NAME.details.csv, NAME.raw.csv and
           NAME.source.csv, then appends the record to OUT_JSONL. Sparse prefill rows run at
           --prefill_s_q query tokens (default 1024: the kernel's per-unit behaviour at a quarter
           of the time ncu's replays take; the record says so).
summarize  the record of the three CSVs of an existing NAME (a missing raw or source CSV leaves
           its fields out).
markdown   one table row per record, for docs/PERF.md.
"""
import argparse
import csv
import datetime
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_roles  # noqa: E402
from run_set import CONFIGS  # noqa: E402

# (field, details-page section, metric name): the human-readable names of ncu's details page,
# stable across its versions where the raw metric names are not.
DETAILS = [
    ("duration", "GPU Speed Of Light Throughput", "Duration"),
    ("sm_frequency", "GPU Speed Of Light Throughput", "SM Frequency"),
    ("dram_throughput_pct", "GPU Speed Of Light Throughput", "DRAM Throughput"),
    ("l1tex_throughput_pct", "GPU Speed Of Light Throughput", "L1/TEX Cache Throughput"),
    ("l2_throughput_pct", "GPU Speed Of Light Throughput", "L2 Cache Throughput"),
    ("sm_throughput_pct", "GPU Speed Of Light Throughput", "Compute (SM) Throughput"),
    ("issue_slots_busy_pct", "Compute Workload Analysis", "Issue Slots Busy"),
    ("ipc_active", "Compute Workload Analysis", "Executed Ipc Active"),
    ("l2_hit_rate_pct", "Memory Workload Analysis", "L2 Hit Rate"),
    ("mem_pipes_busy_pct", "Memory Workload Analysis", "Mem Pipes Busy"),
    ("eligible_warps_per_scheduler", "Scheduler Statistics", "Eligible Warps Per Scheduler"),
    ("active_warps_per_scheduler", "Scheduler Statistics", "Active Warps Per Scheduler"),
    ("no_eligible_pct", "Scheduler Statistics", "No Eligible"),
    ("warp_cycles_per_issued", "Warp State Statistics", "Warp Cycles Per Issued Instruction"),
    ("registers_per_thread", "Launch Statistics", "Registers Per Thread"),
    ("dynamic_smem_per_block", "Launch Statistics", "Dynamic Shared Memory Per Block"),
    ("grid_size", "Launch Statistics", "Grid Size"),
    ("block_size", "Launch Statistics", "Block Size"),
    ("achieved_occupancy_pct", "Occupancy", "Achieved Occupancy"),
]

# Raw metrics by pattern (their names differ between ncu versions and architectures): the tensor
# pipe's busy share (wgmma counts as gmma on sm_90) and the shared-memory wavefronts and conflicts.
RAW = [
    ("tensor_pipe_pct", re.compile(r"^sm__pipe_tensor_op_(gmma|hmma)\w*_cycles_active\.avg\.pct_of_peak_sustained_active$")),
    ("shared_ld_wavefronts", re.compile(r"^l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld\.sum$")),
    ("shared_st_wavefronts", re.compile(r"^l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st\.sum$")),
    ("shared_ld_bank_conflicts", re.compile(r"^l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld\.sum$")),
    ("shared_st_bank_conflicts", re.compile(r"^l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st\.sum$")),
]


def number(text):
    """ncu's values carry thousands separators ("1,234.5"); non-numbers stay text."""
    t = text.strip().replace(",", "")
    try:
        return float(t)
    except ValueError:
        return text.strip()


def read_details(path):
    """{(section, metric): (unit, value)} of the first kernel of `ncu --page details --csv`, and
    that kernel's name."""
    out, kernel = {}, None
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header = next((r for r in rows if "Section Name" in r and "Metric Name" in r), None)
    if header is None:
        raise ValueError(f"{path}: no header with 'Section Name' and 'Metric Name' (expected ncu --page details --csv)")
    col = {name: i for i, name in enumerate(header)}
    first_id = None
    for r in rows[rows.index(header) + 1:]:
        if len(r) <= col["Metric Value"] or not r[col["Metric Name"]]:
            continue
        rid = r[col["ID"]] if "ID" in col else "0"
        if first_id is None:
            first_id = rid
            kernel = r[col["Kernel Name"]] if "Kernel Name" in col else None
        if rid != first_id:
            break
        unit = r[col["Metric Unit"]] if "Metric Unit" in col else ""
        out[(r[col["Section Name"]], r[col["Metric Name"]])] = (unit, number(r[col["Metric Value"]]))
    return out, kernel


def read_raw(path):
    """{metric: value} of the first kernel of `ncu --page raw --csv` (a row of names, a row of
    units, a row per kernel)."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    if len(rows) < 3:
        raise ValueError(f"{path}: expected a row of metric names, a row of units and a row per kernel")
    return {name: number(v) for name, v in zip(rows[0], rows[2])}


def duration_us(unit, value):
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
    return round(value * scale[unit], 3) if isinstance(value, float) and unit in scale else None


def summarize(name, key="", config="", commit="", date=None):
    details, kernel = read_details(name + ".details.csv")
    rec = {"key": key, "config": config, "commit": commit, "date": date or datetime.date.today().isoformat(),
           "kernel": kernel, "metrics": {}}
    m = rec["metrics"]
    for field, section, metric in DETAILS:
        if (section, metric) not in details:
            continue
        unit, value = details[(section, metric)]
        if field == "duration":
            m["duration_us"] = duration_us(unit, value)
        elif field == "sm_frequency":
            ghz = {"hz": 1e-9, "khz": 1e-6, "mhz": 1e-3, "ghz": 1.0}.get(unit.lower())
            m["sm_ghz"] = round(value * ghz, 3) if ghz and isinstance(value, float) else None
        else:
            m[field] = value
    if os.path.exists(name + ".raw.csv"):
        raw = read_raw(name + ".raw.csv")
        for field, pattern in RAW:
            hits = sorted(k for k in raw if pattern.match(k))
            if hits:
                m[field] = raw[hits[0]]
    if os.path.exists(name + ".source.csv"):
        header, rows = ncu_roles.read_rows(name + ".source.csv")
        roles = ncu_roles.roles(header, rows)
        total = max(sum(r["samples"] for r in roles), 1)
        rec["roles"] = [{"role": r["role"], "samples_pct": round(100.0 * r["samples"] / total, 1),
                         "instructions_executed": r["executed"],
                         "top_stalls_pct": {k: round(100.0 * v / max(r["samples"], 1), 1)
                                            for k, v in r["stalls"].most_common(4) if v > 0}}
                        for r in roles]
    return rec


def flags_of(key, prefill_s_q):
    """The row's `smla bench` flags, prefill at prefill_s_q tokens; KeyError for an unknown key."""
    for k, name, flags, _ in CONFIGS:
        if k == key:
            if prefill_s_q and "--op sparse_prefill" in flags:
                flags = re.sub(r"--s_q \d+", f"--s_q {prefill_s_q}", flags)
                name += f" (profiled at s_q {prefill_s_q})"
            return name, flags
    raise KeyError(key)


def ncu_commands(ncu, smla, name, flags):
    """The profile and its three exports."""
    run = [ncu, "--kernel-name", "regex:sparse_decode_kernel|attention_kernel", "--launch-skip", "1",
           "--launch-count", "1", "--set", "full", "--import-source", "yes", "-f", "-o", name,
           smla, "bench", "--backend", "cuda", "--eager", "--warmup", "1", "--iters", "1", "--check_rows", "0"] + flags.split()
    rep = name + ".ncu-rep"
    return [(run, name + ".ncu.log"),  # the profiled run's own output opens the log
            ([ncu, "-i", rep, "--page", "details", "--csv"], name + ".details.csv"),
            ([ncu, "-i", rep, "--page", "raw", "--csv"], name + ".raw.csv"),
            ([ncu, "-i", rep, "--page", "source", "--csv", "--print-source", "sass"], name + ".source.csv")]


def profile(args):
    os.makedirs(args.out_dir, exist_ok=True)
    status = 0
    for key in args.keys:
        config, flags = flags_of(key, args.prefill_s_q)
        name = os.path.join(args.out_dir, key)
        ok = True
        log = name + ".ncu.log"
        open(log, "w").close()
        for cmd, out in ncu_commands(args.ncu, args.smla, name, flags):
            # The exports' CSV is their stdout alone; every message goes to the log.
            with open(log, "a") as err, open(out, "a" if out == log else "w") as f:
                try:
                    rc = subprocess.run(cmd, stdout=f, stderr=err, timeout=args.timeout).returncode
                except subprocess.TimeoutExpired:
                    rc = "timeout"
            if rc != 0:
                print(f"{key}: {' '.join(cmd[:3])} ... rc={rc} (see {log})")
                ok = False
                break
        if not ok:
            status = 1
            continue
        try:
            rec = summarize(name, key, config, args.commit)
        except (OSError, ValueError) as e:
            print(f"{key}: {e}")
            status = 1
            continue
        with open(args.out_jsonl, "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(markdown_row(rec))
    return status


HEADER = ("| key | µs under ncu | SM GHz | issue slots busy % | IPC | eligible warps / scheduler | tensor pipe % | "
          "DRAM % | L2 % | L1/shared % | stall samples by role (top reasons) |\n|---|---|---|---|---|---|---|---|---|---|---|")


def fmt(v, digits=1):
    return f"{v:.{digits}f}" if isinstance(v, float) else ("-" if v is None else str(v))


def markdown_row(rec):
    m = rec.get("metrics", {})
    roles = "; ".join(f"{r['role']} {fmt(r['samples_pct'])}%: " + ", ".join(f"{k} {fmt(v, 0)}%" for k, v in
                                                                               list(r["top_stalls_pct"].items())[:3])
                      for r in rec.get("roles", []))
    cells = [f"`{rec.get('key', '')}`", fmt(m.get("duration_us")), fmt(m.get("sm_ghz"), 2), fmt(m.get("issue_slots_busy_pct")),
             fmt(m.get("ipc_active"), 2), fmt(m.get("eligible_warps_per_scheduler"), 2), fmt(m.get("tensor_pipe_pct")),
             fmt(m.get("dram_throughput_pct")), fmt(m.get("l2_throughput_pct")), fmt(m.get("l1tex_throughput_pct")), roles or "-"]
    return "| " + " | ".join(cells) + " |"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("profile")
    p.add_argument("smla")
    p.add_argument("out_dir")
    p.add_argument("out_jsonl")
    p.add_argument("keys", nargs="+")
    p.add_argument("--commit", default=os.environ.get("SMLA_COMMIT", ""))
    p.add_argument("--prefill_s_q", type=int, default=1024)
    p.add_argument("--ncu", default="ncu")
    p.add_argument("--timeout", type=int, default=300)
    s = sub.add_parser("summarize")
    s.add_argument("name")
    s.add_argument("--key", default="")
    s.add_argument("--config", default="")
    s.add_argument("--commit", default="")
    md = sub.add_parser("markdown")
    md.add_argument("records")
    args = ap.parse_args()
    if args.cmd == "profile":
        for key in args.keys:
            flags_of(key, 0)  # an unknown key stops here, before any profile
        return profile(args)
    if args.cmd == "summarize":
        print(json.dumps(summarize(args.name, args.key, args.config, args.commit)))
        return 0
    print(HEADER)
    with open(args.records) as f:
        for line in f:
            if line.strip():
                print(markdown_row(json.loads(line)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyError as e:
        sys.exit(f"ncu_rows: unknown key {e} (bench/run_set.py CONFIGS)")
