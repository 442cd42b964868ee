"""bench/ncu_roles.py splits an ncu source page's stall samples by the kernel's roles."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "bench" / "ncu_roles.py"

# The shape of `ncu --page source --csv --print-source sass`: a kernel line, the header, one row
# per instruction (two roles after the entry; stall columns as ncu names them).
HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
          '"Instructions Executed","stall_barrier","stall_long_sb","stall_wait","stall_long_sb (Not Issued)"')
ROWS = [
    ("0x00", "MOV R1, c[0x0][0x28]", 3, 10, 0, 0, 3),
    ("0x10", "USETMAXREG.DEALLOC.CTAPOOL 0x50", 0, 10, 0, 0, 0),
    ("0x20", "LDG.E R2, desc[UR4][R2.64]", 5, 100, 0, 4, 1),
    ("0x30", "MOV R3, R2", 40, 100, 0, 40, 0),
    ("0x40", "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xc0", 1, 5, 0, 0, 1),
    ("0x50", "BAR.SYNC.DEFER_BLOCKING 0x1, 0x100", 0, 50, 0, 0, 0),
    ("0x60", "LDS R7, [R2+0x38020]", 20, 50, 18, 0, 2),
]


def write(tmp_path):
    lines = ['"Kernel Name","void k(int)",', HEADER]
    for addr, src, s, e, bar, lsb, wait in ROWS:
        lines.append(f'"{addr}","{src}","{s}","{s}","{e}","{bar}","{lsb}","{wait}","{lsb}"')
    path = tmp_path / "k.source.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def run(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=60)


def test_roles_split_at_setmaxnreg(tmp_path):
    p = run(write(tmp_path), "--jsonl", "--top", "1", "--commit", "abc1234", "--date", "2026-12-02")
    assert p.returncode == 0, p.stderr
    recs = [json.loads(x) for x in p.stdout.splitlines()]
    assert [r["role"] for r in recs] == ["entry", "80 registers", "192 registers"]
    entry, producer, consumer = recs
    assert entry["samples"] == 3 and entry["stall_pct"] == {"wait": 100.0}
    assert producer["samples"] == 45 and producer["instructions_executed"] == 210
    assert producer["stall_pct"] == {"long_sb": 97.8, "wait": 2.2}  # "(Not Issued)" columns not counted
    assert producer["top"] == [{"line": 3, "sass": "MOV R3, R2", "samples": 40, "stalls": ["long_sb"]}]
    assert consumer["samples"] == 21 and consumer["top"][0]["stalls"] == ["barrier", "wait"]
    assert all(r["commit"] == "abc1234" and r["date"] == "2026-12-02" for r in recs)


def test_text_summary_and_bad_input(tmp_path):
    p = run(write(tmp_path), "--top", "2")
    assert p.returncode == 0, p.stderr
    assert "80 registers (from line 1): 45 samples, 210 instructions executed" in p.stdout
    assert "long_sb 98%" in p.stdout
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    q = run(bad)
    assert q.returncode != 0 and "no header" in q.stderr
