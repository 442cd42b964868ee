"""bench/plot.py draws the roofline of a committed benchmark-results file."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLOT = ROOT / "bench" / "plot.py"
RESULTS = ROOT / "bench" / "results" / "2026-11-30-3bea476.jsonl"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_plot(*args):
    return subprocess.run([sys.executable, str(PLOT), *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def test_roofline_png(tmp_path):
    out = tmp_path / "roofline.png"
    p = run_plot(RESULTS, "-o", out)
    assert p.returncode == 0, p.stderr
    data = out.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 10_000  # axes, two ceilings, 17 points and their labels: not an empty canvas
    assert "17 configuration(s)" in p.stdout


def test_records_without_figures_are_refused(tmp_path):
    # The variant timings carry only µs: nothing to place on a roofline, and the script says so.
    out = tmp_path / "variants.png"
    p = run_plot(ROOT / "bench" / "results" / "2026-11-30-sparse-decode-variants.jsonl", "-o", out)
    assert p.returncode != 0
    assert "no record with tflops and gbps" in p.stderr
    assert not out.exists()
