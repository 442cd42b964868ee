#!/usr/bin/env python3
"""What a build's SASS holds, without a GPU: the checks the sparse-decode work makes before and
after a device call (a measurement switch must leave the default's SASS alone; two builds of one
algorithm can differ in time by their instruction order alone, PERF.md twenty-first pass).

usage: python3 bench/sass_roles.py same A B
           per kernel of two builds: "same" or "differs" (code addresses and encodings ignored)
       python3 bench/sass_roles.py roles A --kernel SUBSTR
           the kernel's roles (the code between its setmaxnreg instructions, each named by the
           registers it sets), per role its instructions, the longest loop in it and where that
           loop's loads, prefetches, barrier operations and cluster stores sit

A and B are cubins (read with cuobjdump: $CUOBJDUMP, else the one on PATH; `pip install
nvidia-cuda-cuobjdump` ships one) or saved `cuobjdump -sass` text.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
FUNC = re.compile(r"\s*Function : (\S+)")
BRANCH = re.compile(r"\bBRA\b.*?(0x[0-9a-f]+)")
# Instructions whose hex operand is a code address (it moves with the layout, not the code).
CODE_ADDRESS = re.compile(r"^(@!?U?P\w+\s+)?(BRA|BSSY|CALL|JMP|JMX|BRX|BMOV|WARPSYNC)\b")
EVENTS = re.compile(r"\b(LDG|CCTL|SYNCS|STAS|BAR|UBLKCP|UTMALDG)\b")


def sass_text(path):
    if not path.endswith(".cubin"):
        with open(path) as f:
            return f.read()
    tool = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not tool:
        sys.exit("sass_roles: cuobjdump not found: set CUOBJDUMP, or pip install nvidia-cuda-cuobjdump")
    return subprocess.run([tool, "-sass", path], capture_output=True, text=True, check=True).stdout


def kernels(text):
    """{mangled name: [(address, instruction text)]}"""
    out, cur = {}, None
    for line in text.splitlines():
        m = FUNC.match(line)
        if m:
            cur = out.setdefault(m.group(1), [])
            continue
        m = LINE.search(line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(2)))
    return out


def opcode(ins):
    words = ins.split()
    return words[1] if words[0].startswith("@") else words[0]


def normalized(body):
    # Branch targets move with the code's layout; every other operand (registers, immediates such
    # as a setmaxnreg budget) is compared as it is.
    return [re.sub(r"0x[0-9a-f]+", "X", ins) if CODE_ADDRESS.match(ins) else ins for _, ins in body]


def roles(body):
    """[(name, instructions)]: the entry code, then one role per setmaxnreg."""
    cuts = [i for i, (_, ins) in enumerate(body) if opcode(ins).startswith("USETMAXREG")]
    bounds = [0] + cuts + [len(body)]
    out = []
    for k in range(len(bounds) - 1):
        part = body[bounds[k]:bounds[k + 1]]
        if not part:
            continue
        name = "entry"
        if k > 0:
            regs = re.search(r"(0x[0-9a-f]+)\s*$", part[0][1])
            name = f"{int(regs.group(1), 16)} registers" if regs else part[0][1]
        out.append((name, part))
    return out


def longest_loop(part):
    """(first, last) indices of the longest backward branch's loop inside the role, or None."""
    start = {a: i for i, (a, _) in enumerate(part)}
    best = None
    for i, (a, ins) in enumerate(part):
        m = BRANCH.search(ins)
        if m and opcode(ins) == "BRA":
            t = int(m.group(1), 16)
            if t < a and t in start and (best is None or i - start[t] > best[1] - best[0]):
                best = (start[t], i)
    return best


def cmd_same(a, b):
    ka, kb = kernels(sass_text(a)), kernels(sass_text(b))
    for name in sorted(set(ka) | set(kb)):
        if name not in kb or name not in ka:
            state = f"only in {a if name in ka else b}"
        else:
            state = "same" if normalized(ka[name]) == normalized(kb[name]) else \
                f"differs ({len(ka[name])} / {len(kb[name])} instructions)"
        print(f"{state}  {name}")
    return 0


def cmd_roles(a, key):
    ks = {n: body for n, body in kernels(sass_text(a)).items() if key in n}
    if not ks:
        sys.exit(f"sass_roles: no kernel whose name contains {key!r}")
    for name, body in ks.items():
        print(f"{name}: {len(body)} instructions")
        for role, part in roles(body):
            mix = collections.Counter(opcode(ins).split(".")[0] for _, ins in part)
            top = ", ".join(f"{op} {n}" for op, n in mix.most_common(8))
            print(f"  {role}: {len(part)} instructions ({top})")
            loop = longest_loop(part)
            if loop:
                first, last = loop
                print(f"    loop: {last - first + 1} instructions")
                for i in range(first, last + 1):
                    if EVENTS.search(opcode(part[i][1])):
                        print(f"      {i - first:5d}  {part[i][1]}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["same", "roles"])
    ap.add_argument("a")
    ap.add_argument("b", nargs="?")
    ap.add_argument("--kernel", default="")
    args = ap.parse_args(argv)
    if args.what == "same":
        if not args.b:
            ap.error("same needs two builds")
        return cmd_same(args.a, args.b)
    return cmd_roles(args.a, args.kernel)


if __name__ == "__main__":
    sys.exit(main())
