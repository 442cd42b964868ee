#!/usr/bin/env python3
"""Turns the output of an SMLA_SD_TIMELINE build (`smla bench` run by a build with
-DSMLA_SD_TIMELINE=1 or 2: src/cuda/sparse_decode/timeline.cuh prints one line per chosen CTA, and
with 2 one per block) into result records, one JSON line each, as
bench/results/*-timeline-*.jsonl hold them; --summary prints instead each mark's range over the
CTAs (ns after each CTA's entry), the table PERF.md quotes.

usage: python3 bench/timeline_jsonl.py OUTPUT_TXT [--commit C] [--call N] [--build B]
           [--config TEXT] [--l2 cold|warm] [--date YYYY-MM-DD] [--summary]

Marks a kernel never reaches print as +0 (timeline_mark(0) sets every slot to the entry time):
the summary leaves zeros out. Lines that are neither kind are ignored.
"""
import argparse
import datetime
import json
import re
import sys

# The CTA line's marks in the order timeline_print writes them (kMarks 1-13).
CTA_MARKS = ["wait", "init", "q", "first_full", "loop_end", "epilogue", "first_stored", "producer_done", "exit",
             "wg1_in", "wg1_states", "wg1_o_smem", "wg1_stored"]
CTA_RE = re.compile(r"timeline cta (\d+) sm (\d+) entry (\d+) \| \+ns (.*)$")
BLOCK_EVENTS = ["raw_in", "tile_free", "handed", "reissued", "full", "s_done", "pv_done"]
BLOCK_RE = re.compile(r"timeline cta (\d+) block (\d+) ns (.*)$")


def numbers(text):
    """The values of the line's "name value" pairs, in order ("wg1" is part of no pair)."""
    return [int(v) for _, v in re.findall(r"([a-z_]+) (-?\d+)", text)]


def parse(lines):
    """Records of the CTA lines (kind cta_marks_ns) and the block lines (kind block_events_ns)."""
    out = []
    for line in lines:
        m = CTA_RE.search(line)
        if m:
            vals = numbers(m.group(4))
            if len(vals) != len(CTA_MARKS):
                continue
            rec = {"kind": "cta_marks_ns", "cta": int(m.group(1)), "sm": int(m.group(2)),
                   "launch_entry": int(m.group(3))}
            rec.update(zip(CTA_MARKS, vals))
            out.append(rec)
            continue
        m = BLOCK_RE.search(line)
        if m:
            vals = numbers(m.group(3))
            if len(vals) != len(BLOCK_EVENTS):
                continue
            rec = {"kind": "block_events_ns", "cta": int(m.group(1)), "block": int(m.group(2))}
            rec.update(zip(BLOCK_EVENTS, vals))
            out.append(rec)
    return out


def summary(recs):
    """One line per CTA mark: its min-max and median over the CTAs that reached it (µs)."""
    ctas = [r for r in recs if r["kind"] == "cta_marks_ns"]
    lines = [f"{len(ctas)} CTA lines"]
    for mark in CTA_MARKS:
        v = sorted(r[mark] for r in ctas if r[mark] != 0)
        if v:
            lines.append(f"{mark:14s} {v[0] / 1e3:7.2f} - {v[-1] / 1e3:7.2f} us (median {v[len(v) // 2] / 1e3:.2f})")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("output_txt")
    ap.add_argument("--commit", default="")
    ap.add_argument("--call", type=int)
    ap.add_argument("--build", default="SMLA_SD_TIMELINE=1")
    ap.add_argument("--config", default="")
    ap.add_argument("--l2", default="cold")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args(argv)
    with open(a.output_txt, errors="replace") as f:
        recs = parse(f)
    if a.summary:
        print(summary(recs))
        return 0
    for r in recs:
        r.update(commit=a.commit, build=a.build, config=a.config, l2=a.l2, date=a.date)
        if a.call is not None:
            r["call"] = a.call
        print(json.dumps(r))
    if not recs:
        print("no timeline lines found", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
