"""bench/variants_jsonl.py turns a device call's variants.txt into result records."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "bench" / "variants_jsonl.py"

ROWS = """\
b0 | --op sparse_decode --format fp8_ds_mla --topk 2048 --b 128 --s_q 1 --h_q 64 | | sparse_decode | b=128 s_q=1 h_q=64 topk=2048 fp8_ds_mla p64 | cuda    |    0.1332 |     273 | 1428 | 1.28e-04 | ok    |
bR | --op sparse_decode --format fp8_ds_mla --topk 2048 --b 128 --s_q 1 --h_q 64 | | sparse_decode | b=128 s_q=1 h_q=64 topk=2048 fp8_ds_mla p64 | cuda    |    0.1354 |     269 | 1405 | 1.28e-04 | ok    |
b8 | --op sparse_decode --format fp8_ds_mla --topk 2048 --b 128 --s_q 1 --h_q 64 | | sparse_decode | b=128 s_q=1 h_q=64 topk=2048 fp8_ds_mla p64 | cuda    |    0.0735 |     495 | 2589 |       - | unchecked |
bX | --op sparse_decode --b 1 | error: h_q must be positive (got 0)
b0 | tests GpuSparseDecode.* | rc=0 [  PASSED  ] 14 tests.
"""


def run(tmp_path, *args):
    src = tmp_path / "variants.txt"
    src.write_text(ROWS)
    return subprocess.run([sys.executable, str(TOOL), str(src), *args], capture_output=True, text=True, timeout=60)


def test_timed_rows_become_records(tmp_path):
    p = run(tmp_path, "--commit", "69b5c7c", "--call", "3", "--name", "b0=0", "--name", "bR=SMLA_SD_BF16_ROUTE=0",
            "--date", "2026-12-02", "--note", "a test")
    assert p.returncode == 0, p.stderr
    recs = [json.loads(x) for x in p.stdout.splitlines()]
    assert [r["variant"] for r in recs] == ["0", "SMLA_SD_BF16_ROUTE=0"]
    assert [r["us"] for r in recs] == [133.2, 135.4]
    assert recs[0]["config"].endswith("--h_q 64") and recs[0]["check"] == "ok" and recs[0]["max_err"] == 1.28e-4
    assert all(r["commit"] == "69b5c7c" and r["call"] == 3 and r["date"] == "2026-12-02" and r["note"] == "a test"
               for r in recs)


def test_untimed_lines_are_skipped_and_counted(tmp_path):
    p = run(tmp_path, "--commit", "x", "--call", "1")
    assert p.returncode == 0
    assert len(p.stdout.splitlines()) == 2           # the unchecked row, the error line, the test summary: none
    assert "3 line(s) were not timed rows" in p.stderr
    assert {json.loads(x)["variant"] for x in p.stdout.splitlines()} == {"b0", "bR"}  # no --name: labels kept


def test_unchecked_rows_are_kept_on_request(tmp_path):
    p = run(tmp_path, "--commit", "x", "--call", "1", "--unchecked")
    assert p.returncode == 0, p.stderr
    recs = [json.loads(x) for x in p.stdout.splitlines()]
    assert [r["variant"] for r in recs] == ["b0", "bR", "b8"]
    assert recs[2]["us"] == 73.5 and recs[2]["check"] == "unchecked" and recs[2]["max_err"] is None
    assert "2 line(s) were not timed rows" in p.stderr
