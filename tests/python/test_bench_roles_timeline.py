"""bench/roles_timeline.py summarizes an SMLA_SD_TIMELINE=4 build's per-block marks of the 32-row roles."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "bench" / "roles_timeline.py"


def line(cta, i, pace=2000, q=3000, epi=-1, pdl=1200):
    """A role_timeline line as the print kernel writes it: block i's rows in at 5000 + pace * i."""
    full = 5000 + pace * i
    return (f"role_timeline cta {cta} block {i} | producer free {full - 2500} issued {full - 2400} | wg0 full {full} "
            f"st {full + 700} softmax {full + 1300} p_free {full + 1400} handed {full + 1900} | wg1 taken {full + 1950} "
            f"pv_done {full + 3100} | q {q if i == 0 else -1} epilogue_done {epi if i == 0 else -1}"
            + (f" pdl {pdl if i == 0 else -1}" if pdl is not None else "") + "\n")


def run(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=60)


def test_last_launch_phases(tmp_path):
    n = 8
    first = "".join(line(c, i, pace=9000, epi=99999) for c in (0, 2) for i in range(n))
    last = "".join(line(c, i, epi=5000 + 2000 * (n - 1) + 3100 + 1500) for c in (0, 2) for i in range(n))
    src = tmp_path / "tl.txt"
    src.write_text("| sparse_decode | ... |\n" + first + last)
    p = run(src, "--jsonl", "--commit", "abc", "--call", "2")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    ns = rec["ns"]
    assert rec["kind"] == "role_timeline" and rec["commit"] == "abc" and rec["call"] == 2
    assert ns["wg0_pace"]["median"] == 2000 and ns["wg0_pace"]["n"] == 2 * (n - 3)  # blocks 2 .. n - 2 of both CTAs
    assert ns["wg0_st"]["median"] == 700 and ns["wg0_softmax"]["median"] == 600
    assert ns["wg0_wait_for_rows"]["median"] == 100 and ns["wg1_pv"]["median"] == 1150
    assert ns["wg1_wait_for_wg0"]["median"] == 2000 + 1950 - 3100
    assert ns["q_in"]["median"] == 3000 and ns["epilogue"]["median"] == 1500 and ns["epilogue"]["n"] == 2
    assert ns["pdl_done"]["median"] == 1200 and ns["pdl_done"]["n"] == 2


def test_lines_without_the_pdl_mark(tmp_path):
    """Lines of builds before the pdl mark: every phase but pdl_done."""
    src = tmp_path / "tl.txt"
    src.write_text("".join(line(0, i, pdl=None) for i in range(6)))
    p = run(src, "--jsonl")
    assert p.returncode == 0, p.stderr
    ns = json.loads(p.stdout)["ns"]
    assert "pdl_done" not in ns and ns["q_in"]["median"] == 3000 and ns["wg0_pace"]["median"] == 2000


def test_missing_marks_are_left_out(tmp_path):
    text = "".join(line(0, i) for i in range(6)).replace("st 11700", "st -1")  # block 3's S^T mark never reached
    src = tmp_path / "tl.txt"
    src.write_text(text)
    p = run(src)
    assert p.returncode == 0, p.stderr
    assert "wg0_st " in p.stdout and "wg0_softmax " in p.stdout and "n 2" in p.stdout.split("wg0_st ")[1].split("\n")[0]
    assert "epilogue " not in p.stdout and "cta " not in p.stdout  # no epilogue mark printed
