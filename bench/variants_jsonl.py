#!/usr/bin/env python3
"""Turns the variants.txt of a device call (bench/sparse_decode_variants.sh and the session run
scripts: one line "BUILD | CONFIG | <smla bench table row>" per timed run) into result records,
one JSON line each, as bench/results/*-variants-*.jsonl hold them.

usage: python3 bench/variants_jsonl.py VARIANTS_TXT --commit C --call N [--name BUILD=VARIANT ...]
           [--date YYYY-MM-DD] [--flags "--seed 7 --iters 30"] [--note TEXT] [--unchecked] >> OUT.jsonl

--name maps a build folder's label to the variant it was built as (b0=0, bR=SMLA_SD_BF16_ROUTE=0);
labels without one are kept as they are. Lines that are not timed rows (a failed run, a test
summary) are skipped and counted on stderr, so a broken run never becomes a number. Rows timed
without the reference check (CHECK_ROWS=0: the measurement variants 4, 7, 8, 9, whose results are
wrong by design) count as such too, unless --unchecked keeps them (check "unchecked", max_err
null).
"""
import argparse
import datetime
import json
import sys


def parse_line(line, unchecked=False):
    """(build, config, microseconds, max_err, check) of a timed row, or None; with `unchecked`
    also the rows timed without the check (max_err None)."""
    f = [x.strip() for x in line.split("|")]
    # BUILD | CONFIG | '' | op | shape | backend | ms | TFLOP/s | GB/s | err | check | ''
    if len(f) < 11:
        return None
    try:
        ms = float(f[6])
        err = None if unchecked and f[9] == "-" and f[10] == "unchecked" else float(f[9])
    except ValueError:
        return None
    return f[0], f[1], round(ms * 1000.0, 2), err, f[10]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variants_txt")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--call", type=int, required=True)
    ap.add_argument("--name", action="append", default=[], metavar="BUILD=VARIANT")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--flags", default="--seed 7 --iters 30")
    ap.add_argument("--note", default="")
    ap.add_argument("--unchecked", action="store_true", help="keep rows timed without the reference check")
    a = ap.parse_args(argv)
    names = dict(n.split("=", 1) for n in a.name)
    skipped = 0
    with open(a.variants_txt) as f:
        for line in f:
            row = parse_line(line, a.unchecked)
            if row is None:
                skipped += line.strip() != ""
                continue
            build, config, us, err, check = row
            rec = {"config": config, "variant": names.get(build, build), "us": us, "commit": a.commit,
                   "date": a.date, "call": a.call, "check": check, "max_err": err, "flags": a.flags}
            if a.note:
                rec["note"] = a.note
            print(json.dumps(rec))
    if skipped:
        print(f"{skipped} line(s) were not timed rows and were skipped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
