"""bench/ncu_rows.py: one record per benchmark row from ncu's details, raw and source pages, and the
profile driver's commands (run here against a stand-in for ncu)."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "bench" / "ncu_rows.py"
sys.path.insert(0, str(ROOT / "bench"))
import ncu_rows  # noqa: E402

# The shape of `ncu --page details --csv` (with the rule columns of newer versions): a row per
# metric, two kernels of which only the first counts.
DETAILS_HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
                  '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name",'
                  '"Rule Type","Rule Description"')
METRICS = [
    ("GPU Speed Of Light Throughput", "SM Frequency", "Ghz", "1.75"),
    ("GPU Speed Of Light Throughput", "Duration", "us", "188.32"),
    ("GPU Speed Of Light Throughput", "DRAM Throughput", "%", "19.01"),
    ("GPU Speed Of Light Throughput", "L1/TEX Cache Throughput", "%", "77.40"),
    ("GPU Speed Of Light Throughput", "L2 Cache Throughput", "%", "32.11"),
    ("GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", "45.33"),
    ("Compute Workload Analysis", "Issue Slots Busy", "%", "26.50"),
    ("Compute Workload Analysis", "Executed Ipc Active", "inst/cycle", "1.06"),
    ("Scheduler Statistics", "Eligible Warps Per Scheduler", "warp", "0.34"),
    ("Launch Statistics", "Registers Per Thread", "register/thread", "168"),
    ("Launch Statistics", "Grid Size", "", "1,056"),
]


def write_details(path, second_kernel=True):
    lines = [DETAILS_HEADER]
    for kid, duration in [("0", None), ("1", "999.0")] if second_kernel else [("0", None)]:
        for section, metric, unit, value in METRICS:
            if duration and metric == "Duration":
                value = duration
            lines.append(f'"{kid}","7","smla","h","sparse_decode_kernel","1","7","(384, 1, 1)","(132, 2, 1)","0","9.0",'
                         f'"{section}","{metric}","{unit}","{value}","","",""')
        # a rule's row: no metric
        lines.append(f'"{kid}","7","smla","h","sparse_decode_kernel","1","7","(384, 1, 1)","(132, 2, 1)","0","9.0",'
                     '"GPU Speed Of Light Throughput","","","","SOLBottleneck","OPT","This kernel ..."')
    path.write_text("\n".join(lines) + "\n")


def write_raw(path):
    names = ['"ID"', '"Kernel Name"', '"sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"',
             '"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"', '"gpu__time_duration.sum"']
    units = ['""', '""', '"%"', '""', '"usecond"']
    values = ['"0"', '"sparse_decode_kernel"', '"57.3"', '"5,372,817"', '"188.32"']
    path.write_text("\n".join(",".join(r) for r in (names, units, values)) + "\n")


def write_source(path):
    header = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
              '"Instructions Executed","stall_barrier","stall_long_sb","stall_wait"')
    rows = [("0x00", "MOV R1, c[0x0][0x28]", 10, 10, 0, 0, 10),
            ("0x10", "USETMAXREG.DEALLOC.CTAPOOL 0x58", 0, 10, 0, 0, 0),
            ("0x20", "LDG.E R2, desc[UR4][R2.64]", 30, 100, 0, 30, 0),
            ("0x30", "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xd8", 0, 5, 0, 0, 0),
            ("0x40", "BAR.SYNC.DEFER_BLOCKING 0x1, 0x100", 60, 50, 45, 0, 15)]
    lines = ['"Kernel Name","void k(int)",', header]
    lines += [f'"{a}","{s}","{n}","{n}","{e}","{b}","{l}","{w}"' for a, s, n, e, b, l, w in rows]
    path.write_text("\n".join(lines) + "\n")


def test_summarize_reads_the_first_kernel_of_all_three_pages(tmp_path):
    name = tmp_path / "sd_v32_b128_sq1_h64"
    write_details(pathlib.Path(f"{name}.details.csv"))
    write_raw(pathlib.Path(f"{name}.raw.csv"))
    write_source(pathlib.Path(f"{name}.source.csv"))
    rec = ncu_rows.summarize(str(name), "sd_v32_b128_sq1_h64", "V3.2 b128 s_q1 h64", "abc1234", "2026-12-05")
    m = rec["metrics"]
    assert rec["kernel"] == "sparse_decode_kernel" and rec["commit"] == "abc1234" and rec["date"] == "2026-12-05"
    assert m["duration_us"] == 188.32  # the second kernel's 999 is not read
    assert m["sm_ghz"] == 1.75 and m["issue_slots_busy_pct"] == 26.5 and m["ipc_active"] == 1.06
    assert m["eligible_warps_per_scheduler"] == 0.34 and m["registers_per_thread"] == 168.0
    assert m["grid_size"] == 1056.0  # thousands separators dropped
    assert m["tensor_pipe_pct"] == 57.3 and m["shared_st_bank_conflicts"] == 5372817.0
    assert "shared_ld_bank_conflicts" not in m  # absent from the raw page: left out
    assert [r["role"] for r in rec["roles"]] == ["entry", "88 registers", "216 registers"]
    entry, producer, consumer = rec["roles"]
    assert (entry["samples_pct"], producer["samples_pct"], consumer["samples_pct"]) == (10.0, 30.0, 60.0)
    assert consumer["top_stalls_pct"] == {"barrier": 75.0, "wait": 25.0}


def test_summarize_without_raw_or_source_and_bad_details(tmp_path):
    name = tmp_path / "k"
    write_details(pathlib.Path(f"{name}.details.csv"), second_kernel=False)
    rec = ncu_rows.summarize(str(name))
    assert "roles" not in rec and "tensor_pipe_pct" not in rec["metrics"]
    assert rec["metrics"]["l2_throughput_pct"] == 32.11
    pathlib.Path(f"{name}.details.csv").write_text("a,b\n1,2\n")
    p = subprocess.run([sys.executable, str(TOOL), "summarize", str(name)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "no header with 'Section Name'" in p.stderr


def test_flags_of_rows_and_prefill_tokens():
    name, flags = ncu_rows.flags_of("sp_d512_h64_k512_s32k_sink", 1024)
    assert "--s_q 1024" in flags and "--s_q 4096" not in flags and name.endswith("(profiled at s_q 1024)")
    name, flags = ncu_rows.flags_of("sp_d512_h64_k512_s32k_sink", 0)
    assert "--s_q 4096" in flags and "profiled" not in name
    _, flags = ncu_rows.flags_of("sd_v32_b1_sq1_h128", 1024)
    assert flags.endswith("--b 1 --s_q 1 --h_q 128")  # decode rows keep their shape
    p = subprocess.run([sys.executable, str(TOOL), "profile", "smla", "out", "o.jsonl", "sd_v32_b128_sq1_h64", "nope"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "unknown key 'nope'" in p.stderr


# A stand-in for ncu: the profile run records its arguments in NAME.ncu-rep; each export prints
# the fixture page its --page asks for.
FAKE_NCU = '''#!/usr/bin/env python3
import os, pathlib, sys
a = sys.argv[1:]
fixtures = pathlib.Path(__file__).parent
if "-o" in a:
    pathlib.Path(a[a.index("-o") + 1] + ".ncu-rep").write_text(" ".join(a))
    print("==PROF== profiling")
    sys.exit(0)
rep = pathlib.Path(a[a.index("-i") + 1])
if os.environ.get("FAKE_FAIL") and os.environ["FAKE_FAIL"] in rep.name:
    sys.exit(3)
print("==WARNING== to stderr", file=sys.stderr)
sys.stdout.write((fixtures / ("page." + a[a.index("--page") + 1] + ".csv")).read_text())
'''


def fake_ncu(tmp_path):
    fx = tmp_path / "fx"
    fx.mkdir()
    ncu = fx / "ncu"
    ncu.write_text(FAKE_NCU)
    ncu.chmod(0o755)
    write_details(fx / "page.details.csv")
    write_raw(fx / "page.raw.csv")
    write_source(fx / "page.source.csv")
    return ncu


def test_profile_runs_ncu_per_key_and_appends_records(tmp_path):
    ncu = fake_ncu(tmp_path)
    out, jsonl = tmp_path / "out", tmp_path / "rows.jsonl"
    p = subprocess.run([sys.executable, str(TOOL), "profile", "/bin/smla", str(out), str(jsonl), "sd_v32_b128_sq1_h16",
                        "sp_d576_h128_k2048_s32k", "--ncu", str(ncu), "--commit", "abc1234"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    recs = [json.loads(x) for x in jsonl.read_text().splitlines()]
    assert [r["key"] for r in recs] == ["sd_v32_b128_sq1_h16", "sp_d576_h128_k2048_s32k"]
    assert all(r["commit"] == "abc1234" and r["metrics"]["tensor_pipe_pct"] == 57.3 for r in recs)
    run = (out / "sp_d576_h128_k2048_s32k.ncu-rep").read_text()
    assert "--set full" in run and "--launch-skip 1 --launch-count 1" in run and "/bin/smla bench" in run
    assert "--op sparse_prefill --s_q 1024" in run and "--check_rows 0" in run
    assert "==WARNING==" not in (out / "sd_v32_b128_sq1_h16.details.csv").read_text()  # stderr kept out of the CSV
    assert "==WARNING==" in (out / "sd_v32_b128_sq1_h16.ncu.log").read_text()
    assert p.stdout.count("| `sd_v32_b128_sq1_h16` | 188.3 | 1.75 | 26.5 |") == 1


def test_profile_goes_on_after_a_failed_row(tmp_path):
    ncu = fake_ncu(tmp_path)
    out, jsonl = tmp_path / "out", tmp_path / "rows.jsonl"
    p = subprocess.run([sys.executable, str(TOOL), "profile", "/bin/smla", str(out), str(jsonl), "sd_v32_b128_sq1_h16",
                        "sd_v32_b1_sq1_h128", "--ncu", str(ncu)], capture_output=True, text=True, timeout=120,
                       env={"FAKE_FAIL": "h16", "PATH": "/usr/bin:/bin"})
    assert p.returncode == 1
    assert "sd_v32_b128_sq1_h16: " in p.stdout and "rc=3" in p.stdout
    assert [json.loads(x)["key"] for x in jsonl.read_text().splitlines()] == ["sd_v32_b1_sq1_h128"]


def test_markdown_table(tmp_path):
    rec = {"key": "sd_v32_b1_sq1_h128", "metrics": {"duration_us": 21.5, "sm_ghz": 1.98, "issue_slots_busy_pct": 12.0},
           "roles": [{"role": "216 registers", "samples_pct": 55.0, "top_stalls_pct": {"long_sb": 40.0, "wait": 20.0}}]}
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(rec) + "\n\n")
    p = subprocess.run([sys.executable, str(TOOL), "markdown", str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("| key | µs under ncu |") and len(lines) == 3
    assert lines[2] == ("| `sd_v32_b1_sq1_h128` | 21.5 | 1.98 | 12.0 | - | - | - | - | - | - | "
                        "216 registers 55.0%: long_sb 40%, wait 20% |")
