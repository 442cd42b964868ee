"""bench/timeline_jsonl.py turns an SMLA_SD_TIMELINE build's printed marks into records."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "bench" / "timeline_jsonl.py"

# Two CTA lines as timeline_print writes them (the second never reached the wg1 marks: +0), one
# block line, and unrelated output.
OUTPUT = """\
| sparse_decode | b=128 s_q=1 h_q=64 topk=2048 fp8_ds_mla p64 | cuda | 0.1245 | 292 | 1528 | 0 | - |
timeline cta 0 block 0 ns raw_in 900 tile_free 950 handed 1000 reissued 1100 | full 1200 s_done 1500 pv_done 2100
timeline cta 0 sm 130 entry 1796189443015507904 | +ns wait 96 init 1184 q 6816 first_full 7520 loop_end 12480 epilogue 17312 first_stored 5760 producer_done 5856 exit 17376 | wg1 epilogue in 0 states 0 o_smem 0 stored 0
timeline cta 65 sm 3 entry 1796189443015508000 | +ns wait 128 init 1216 q 7000 first_full 8000 loop_end 13000 epilogue 18000 first_stored 6000 producer_done 6100 exit 18100 | wg1 epilogue in 0 states 0 o_smem 0 stored 0
timeline cta 1 sm 2 entry 12 | +ns wait 1 init 2
"""


def run(tmp_path, *args):
    src = tmp_path / "timeline.txt"
    src.write_text(OUTPUT)
    return subprocess.run([sys.executable, str(TOOL), str(src), *args], capture_output=True, text=True, timeout=60)


def test_marks_become_records(tmp_path):
    p = run(tmp_path, "--commit", "acffb63", "--call", "2", "--config", "V3.2 h64", "--date", "2026-12-02")
    assert p.returncode == 0, p.stderr
    recs = [json.loads(x) for x in p.stdout.splitlines()]
    assert [r["kind"] for r in recs] == ["block_events_ns", "cta_marks_ns", "cta_marks_ns"]  # the cut line dropped
    blk, cta0, cta65 = recs
    assert blk["block"] == 0 and blk["raw_in"] == 900 and blk["pv_done"] == 2100
    assert cta0["cta"] == 0 and cta0["sm"] == 130 and cta0["launch_entry"] == 1796189443015507904
    assert cta0["q"] == 6816 and cta0["exit"] == 17376 and cta0["wg1_stored"] == 0
    assert cta65["first_full"] == 8000
    assert all(r["commit"] == "acffb63" and r["call"] == 2 and r["config"] == "V3.2 h64" for r in recs)


def test_summary_ranges_leave_unreached_marks_out(tmp_path):
    p = run(tmp_path, "--summary")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert out.startswith("2 CTA lines")
    assert "q                 6.82 -    7.00 us" in out
    assert "wg1_in" not in out  # +0 in every line: never reached
