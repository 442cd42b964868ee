#!/usr/bin/env python3
"""Summarizes the per-unit marks of persistent bf16-row CTAs (build -DSMLA_SD_TIMELINE=3:
src/cuda/sparse_decode/timeline.cuh prints one "unit_timeline cta C k K | ..." line per chosen CTA
and unit after every launch). Takes the last launch's lines of each file and prints, per phase of
a unit, the median and range over its units after the first, in ns; --jsonl writes one record per
file instead, as bench/results/*-timeline-*.jsonl hold them.

usage: python3 bench/unit_timeline.py FILE... [--jsonl --commit C --call N --build B --config CFG]
"""
import argparse
import json
import re
import statistics

LINE = re.compile(r"unit_timeline cta (\d+) k (\d+) \| wg0 start (-?\d+) q (-?\d+) full (-?\d+) last_qk (-?\d+) "
                  r"loop_end (-?\d+) epilogue (-?\d+) \| wg1 epilogue (-?\d+) \| producer start (-?\d+) "
                  r"q_issued (-?\d+) last_handed (-?\d+) \| entry -?\d+(?: \| wg0 p_free (-?\d+) factors (-?\d+) o_stored (-?\d+))?"
                  r"(?: \| block0 tile_wait (-?\d+) tile_free (-?\d+) issued (-?\d+) handed (-?\d+))?")

# phase: (mark of this unit or of the unit before, ...) differences, ns
PHASES = {
    "unit": lambda u, v: u["start"] - v["start"],
    "q_wait": lambda u, v: u["q"] - u["start"],
    "first_full_wait": lambda u, v: u["full"] - u["q"],
    "blocks": lambda u, v: u["loop_end"] - u["full"],
    "last_qk_to_loop_end": lambda u, v: u["loop_end"] - u["last_qk"],
    "wg0_epilogue": lambda u, v: u["epilogue"] - u["loop_end"],
    "wg1_epilogue_after_wg0_loop_end": lambda u, v: u["wg1_epilogue"] - u["loop_end"],
    "wg0_epilogue_to_next_start": lambda u, v: u["start"] - v["epilogue"],
    "wg0_wait_for_wg1_last_pv": lambda u, v: u["p_free"] - u["loop_end"],
    "wg0_final_factors": lambda u, v: u["factors"] - u["p_free"],
    "wg0_o_rows_out": lambda u, v: u["o_stored"] - u["factors"],
    "wg0_lse_and_release": lambda u, v: u["epilogue"] - u["o_stored"],
    "producer_start_to_block0_tile_wait": lambda u, v: u["b0_tile_wait"] - u["pstart"],
    "block0_tile_wait": lambda u, v: u["b0_tile_free"] - u["b0_tile_wait"],
    "block0_indices_and_issue": lambda u, v: u["b0_issued"] - u["b0_tile_free"],
    "block0_rows_landing": lambda u, v: u["b0_handed"] - u["b0_issued"],
    "block0_handed_to_wg0_full": lambda u, v: u["full"] - u["b0_handed"],
    "q_issued_after_last_qk_before": lambda u, v: u["q_issued"] - v["last_qk"],
    "q_landed_after_issue": lambda u, v: u["q"] - u["q_issued"],
    "producer_start_after_last_handed_before": lambda u, v: u["pstart"] - v["last_handed"],
}
KEYS = ["start", "q", "full", "last_qk", "loop_end", "epilogue", "wg1_epilogue", "pstart", "q_issued", "last_handed",
        "p_free", "factors", "o_stored", "b0_tile_wait", "b0_tile_free", "b0_issued", "b0_handed"]


def stats(x):
    """A phase's figures over its samples (ns)."""
    return {"median": statistics.median(x), "min": min(x), "max": max(x), "n": len(x)}


def last_launch(path, line, keys):
    """The marks of a file's last launch (this one's and bench/roles_timeline.py's lines): {(cta,
    index): {key: ns}} from the last line of index 0 of the first CTA printed (CTA 0 unless it
    printed nothing) on; a mark printed as -1 (never reached) or not printed by the build is None."""
    lines = [m for m in (line.search(l) for l in open(path)) if m]
    if not lines:
        return {}
    c0 = min(m.group(1) for m in lines)
    first = max(i for i, m in enumerate(lines) if m.group(1) == c0 and m.group(2) == "0")
    marks = {}
    for m in lines[first:]:
        v = [int(x) if x not in ("-1", None) else None for x in m.groups()]
        marks[(v[0], v[1])] = dict(zip(keys, v[2:]))
    return marks


def summarize(path):
    units = last_launch(path, LINE, KEYS)
    out = {}
    for name, f in PHASES.items():
        x = []
        for (c, k), u in units.items():
            if k > 0 and (c, k - 1) in units:
                try:
                    x.append(f(u, units[(c, k - 1)]))
                except TypeError:  # a mark this build does not print, or the unit did not reach
                    pass
        if x:
            out[name] = stats(x)
    return out


def cli(doc, summarize, kind, build=""):
    """The command line of a marks summarizer (this one, bench/roles_timeline.py): FILE... and the
    record's fields; summarize(path) gives {phase: {median, min, max, n}}."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--jsonl", action="store_true")
    ap.add_argument("--commit", default="")
    ap.add_argument("--call", type=int, default=0)
    ap.add_argument("--build", default=build)
    ap.add_argument("--config", default="")
    ap.add_argument("--date", default="")
    a = ap.parse_args()
    for path in a.files:
        s = summarize(path)
        if a.jsonl:
            print(json.dumps({"kind": kind, "build": a.build, "config": a.config, "commit": a.commit,
                              "call": a.call, "date": a.date, "file": path.split("/")[-1], "ns": s}))
        else:
            print(path)
            for name, v in s.items():
                print(f"  {name:42s} median {v['median']:8.0f}  min {v['min']:8.0f}  max {v['max']:8.0f}  n {v['n']}")


def main():
    cli(__doc__, summarize, "unit_timeline")


if __name__ == "__main__":
    main()
