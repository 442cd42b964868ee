"""bench/unit_timeline.py summarizes an SMLA_SD_TIMELINE=3 build's per-unit marks."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "bench" / "unit_timeline.py"


def line(cta, k, t0, steps=True):
    """A unit_timeline line as the print kernel writes it, every mark t0 + a fixed offset."""
    s = (f"unit_timeline cta {cta} k {k} | wg0 start {t0} q {t0 + 100} full {t0 + 300} last_qk {t0 + 9000} "
         f"loop_end {t0 + 10000} epilogue {t0 + 12500} | wg1 epilogue {t0 + 12700} | producer start {t0 - 500} "
         f"q_issued {t0 - 9000 + 1800} last_handed {t0 + 8000} | entry {0 if k == 0 else -1}")
    if steps:
        s += f" | wg0 p_free {t0 + 10032} factors {t0 + 10900} o_stored {t0 + 12100}"
        s += f" | block0 tile_wait {t0 - 400} tile_free {t0 - 300} issued {-1 if (cta, k) == (1, 2) else t0 - 100} handed {t0 + 200}"
    return s + "\n"


def write(tmp_path, text):
    src = tmp_path / "tl.txt"
    src.write_text(text)
    return src


def run(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=60)


def test_last_launch_phases(tmp_path):
    # A first launch whose units are 50000 ns apart, then the last one at 13300: only the last counts.
    first = "".join(line(c, k, 50000 * k) for c in (0, 1) for k in range(3))
    last = "".join(line(c, k, 13300 * k) for c in (0, 1) for k in range(3))
    src = write(tmp_path, "| sparse_prefill | ... |\n" + first + last)
    p = run(src, "--jsonl", "--commit", "abc", "--call", "3", "--build", "SMLA_SD_TIMELINE=3")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    ns = rec["ns"]
    assert rec["commit"] == "abc" and rec["call"] == 3 and rec["kind"] == "unit_timeline"
    assert ns["unit"]["median"] == 13300 and ns["unit"]["n"] == 4  # units 1 and 2 of both CTAs
    assert ns["wg0_epilogue"]["median"] == 2500
    assert ns["wg0_epilogue_to_next_start"]["median"] == 13300 - 12500
    assert ns["wg0_final_factors"]["median"] == 868 and ns["wg0_o_rows_out"]["median"] == 1200
    assert ns["block0_tile_wait"]["median"] == 100 and ns["block0_handed_to_wg0_full"]["median"] == 100
    assert ns["block0_rows_landing"]["n"] == 3  # cta 1 unit 2 printed -1 (not reached): left out


def test_lines_without_the_epilogue_steps(tmp_path):
    src = write(tmp_path, "".join(line(0, k, 20000 * k, steps=False) for k in range(3)))
    p = run(src)
    assert p.returncode == 0, p.stderr
    assert "wg0_epilogue " in p.stdout and "wg0_o_rows_out" not in p.stdout
