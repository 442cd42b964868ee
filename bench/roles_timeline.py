#!/usr/bin/env python3
"""Summarizes the per-block marks of the 32-row roles CTAs (build -DSMLA_SD_TIMELINE=4:
src/cuda/sparse_decode/timeline.cuh prints one "role_timeline cta C block I | ..." line per chosen
CTA and block after every launch of the run-time roles kernel). Takes the last launch's lines of
each file and prints, per phase of a block, the median and range over the blocks past the first
two and before the last (the ring's steady state), and the CTA's start and end, in ns; --jsonl
writes one record per file instead, as bench/results/*-timeline-*.jsonl hold them.

usage: python3 bench/roles_timeline.py FILE... [--jsonl --commit C --call N --build B --config CFG]
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import unit_timeline  # noqa: E402  (its command line and figures)

LINE = re.compile(r"role_timeline cta (\d+) block (\d+) \| producer free (-?\d+) issued (-?\d+) \| wg0 full (-?\d+) "
                  r"st (-?\d+) softmax (-?\d+) p_free (-?\d+) handed (-?\d+) \| wg1 taken (-?\d+) pv_done (-?\d+) \| "
                  r"q (-?\d+) epilogue_done (-?\d+)(?: pdl (-?\d+))?"
                  r"(?: \| start bars (-?\d+) regs (-?\d+) q_loaded (-?\d+) q_stored (-?\d+))?"
                  r"(?: \| wg1 split (-?\d+))?"
                  r"(?: \| end in (-?\d+) sums (-?\d+) obuf (-?\d+) stored (-?\d+))?")
KEYS = ["free", "issued", "full", "st", "softmax", "p_free", "handed", "taken", "pv_done", "q", "epilogue_done", "pdl", "bars", "regs", "q_loaded",
        "q_stored", "split", "end_in", "end_sums", "end_obuf", "end_stored"]

# phase of block b (and b - 1: p): differences, ns
PHASES = {
    "wg0_pace": lambda b, p: b["full"] - p["full"],
    "wg0_wait_for_rows": lambda b, p: b["full"] - p["handed"],
    "wg0_st": lambda b, p: b["st"] - b["full"],
    "wg0_softmax": lambda b, p: b["softmax"] - b["st"],
    "wg0_wait_for_wg1_pv": lambda b, p: b["p_free"] - b["softmax"],
    "wg0_pt_and_hand_over": lambda b, p: b["handed"] - b["p_free"],
    "hand_over_to_wg1": lambda b, p: b["taken"] - b["handed"],
    "wg1_pv": lambda b, p: b["pv_done"] - b["taken"],
    "wg1_wait_for_wg0": lambda b, p: b["taken"] - p["pv_done"],
    # its split S^T of the next block first (lines before 2026-12-07's pass 65 have no split mark)
    "wg1_split_st_next": lambda b, p: b["split"] - p["pv_done"],
    "wg1_idle_for_wg0": lambda b, p: b["taken"] - b["split"],
    "producer_slot_free_to_issued": lambda b, p: b["issued"] - b["free"],
    "issued_to_wg0_full": lambda b, p: b["full"] - b["issued"],
}
# the CTA's start and end: block 0's marks, the last block's
ENDS = {
    "pdl_done": lambda f, l: f["pdl"],  # past the wait for the grid before (lines of 0f18546 have none)
    "barriers_initialized": lambda f, l: f["bars"],  # the start's steps (lines before 2026-12-06's pass 61 have none)
    "wg0_registers": lambda f, l: f["regs"],
    "q_loaded": lambda f, l: f["q_loaded"],
    "q_stored": lambda f, l: f["q_stored"],
    "q_in": lambda f, l: f["q"],
    "first_rows_issued": lambda f, l: f["issued"],
    "first_full": lambda f, l: f["full"],
    "last_pv_done": lambda f, l: l["pv_done"],
    "epilogue": lambda f, l: f["epilogue_done"] - l["pv_done"],
    # WG1's epilogue by step (lines before 2026-12-07's pass 66 have none): from its last P V to
    # narrow_epilogue, the heads' sums, O^T into shared memory (and WG0's helpers), the stores
    "end_to_epilogue": lambda f, l: f["end_in"] - l["pv_done"],
    "end_head_sums": lambda f, l: f["end_sums"] - f["end_in"],
    "end_rows_to_smem": lambda f, l: f["end_obuf"] - f["end_sums"],
    "end_stores": lambda f, l: f["end_stored"] - f["end_obuf"],
    "end_after_stores": lambda f, l: f["epilogue_done"] - f["end_stored"],
    "cta": lambda f, l: f["epilogue_done"],
}


def summarize(path):
    blocks = unit_timeline.last_launch(path, LINE, KEYS)
    last = {}  # each CTA's last block printed
    for c, i in blocks:
        last[c] = max(last.get(c, i), i)
    out = {}
    for name, f in PHASES.items():
        x = []
        for (c, i), b in blocks.items():
            if i >= 2 and i < last[c] and (c, i - 1) in blocks:
                try:
                    x.append(f(b, blocks[(c, i - 1)]))
                except TypeError:
                    pass
        if x:
            out[name] = unit_timeline.stats(x)
    for name, f in ENDS.items():
        x = []
        for c in sorted(last):
            try:
                v = f(blocks[(c, 0)], blocks[(c, last[c])])
            except (KeyError, TypeError):  # a mark never reached
                continue
            if v is not None:
                x.append(v)
        if x:
            out[name] = unit_timeline.stats(x)
    return out


def main():
    unit_timeline.cli(__doc__, summarize, "role_timeline", "SMLA_SD_TIMELINE=4")


if __name__ == "__main__":
    main()
