#!/usr/bin/env python3
"""Where a warp-specialized kernel's stall samples go, role by role: reads the per-instruction
source page of an Nsight Compute report (bench/ncu_sparse_decode.sh writes it as NAME.source.csv:
`ncu -i R --page source --csv --print-source sass`) and splits the SASS at its setmaxnreg
instructions, as bench/sass_roles.py does (a role is named by the registers it sets; the code
before the first is "entry"). Per role: its stall samples, instructions executed, the share of
each stall reason, and its instructions with the most samples.

usage: python3 bench/ncu_roles.py SOURCE_CSV [--top N] [--jsonl] [--commit C] [--config TEXT]
           [--date YYYY-MM-DD]

--jsonl prints one record per role instead (bench/results/*-ncu-*.jsonl), with the top
instructions' line numbers (0-based in the CSV's SASS listing), text and samples.
"""
import argparse
import collections
import csv
import datetime
import json
import re
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
ROLE_START = re.compile(r"USETMAXREG\.\S+\s+(?:U?P\w+,\s*)?(0x[0-9a-f]+|\d+)")


def number(text):
    try:
        return float(text) if text else 0.0
    except ValueError:
        return 0.0


def read_rows(path):
    """The header and the instruction rows (the first line names the kernel; the header follows)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    for i, row in enumerate(rows):
        if "Source" in row and SAMPLES in row:
            return row, rows[i + 1:]
    sys.exit(f"ncu_roles: {path}: no header with 'Source' and '{SAMPLES}' (expected ncu --page source --csv)")


def roles(header, rows):
    col = {name: i for i, name in enumerate(header)}
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    out, cur = [], None
    for n, row in enumerate(rows):
        if len(row) <= col["Source"]:
            continue
        src = row[col["Source"]].strip()
        m = ROLE_START.search(src)
        if m or cur is None:
            name = f"{int(m.group(1), 0)} registers" if m else "entry"
            cur = {"role": name, "first_line": n, "samples": 0, "executed": 0, "stalls": collections.Counter(), "lines": []}
            out.append(cur)
        s = int(number(row[col[SAMPLES]]))
        cur["samples"] += s
        cur["executed"] += int(number(row[col[EXECUTED]])) if EXECUTED in col else 0
        reasons = collections.Counter({h[len("stall_"):]: int(number(row[col[h]])) for h in stalls})
        cur["stalls"].update(reasons)
        top = [r for r, v in reasons.most_common(2) if v > 0]
        cur["lines"].append((s, n, src, top))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source_csv")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--jsonl", action="store_true")
    ap.add_argument("--commit", default="")
    ap.add_argument("--config", default="")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    args = ap.parse_args()
    header, rows = read_rows(args.source_csv)
    for r in roles(header, rows):
        total = max(r["samples"], 1)
        shares = {k: round(100.0 * v / total, 1) for k, v in r["stalls"].most_common() if v > 0}
        top = sorted(r["lines"], key=lambda x: (-x[0], x[1]))[: args.top]
        if args.jsonl:
            rec = {"role": r["role"], "samples": r["samples"], "instructions_executed": r["executed"],
                   "stall_pct": shares, "top": [{"line": n, "sass": src, "samples": s, "stalls": t} for s, n, src, t in top],
                   "date": args.date}
            if args.commit:
                rec["commit"] = args.commit
            if args.config:
                rec["config"] = args.config
            print(json.dumps(rec))
            continue
        print(f"{r['role']} (from line {r['first_line']}): {r['samples']} samples, {r['executed']} instructions executed")
        print("  " + ", ".join(f"{k} {v:.0f}%" for k, v in list(shares.items())[:8]))
        for s, n, src, t in top:
            print(f"  {s:7d}  {n:5d}  {src[:72]:72s}  {' '.join(t)}")


if __name__ == "__main__":
    main()
