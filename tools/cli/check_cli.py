"""Checks of the smla command line that need more than a regular expression: the operation
lists, the JSON it prints, and which stream each kind of output goes to. Run by CTest
(tools/CMakeLists.txt) as `python3 check_cli.py CHECK SMLA_BINARY`; exit code 0 when the check
passes, 1 with the reason on stderr."""
import json
import os
import re
import subprocess
import sys
import tempfile

# Small enough that each call takes well under a second on the CPU.
MERGE = ["bench", "--op", "merge_states", "--backend", "cpu", "--b", "4", "--h_q", "8", "--iters", "1",
         "--warmup", "0", "--seed", "7"]


def run(smla, args):
    p = subprocess.run([smla] + args, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def fail(msg):
    print("check_cli: " + msg, file=sys.stderr)
    sys.exit(1)


def expect(cond, msg):
    if not cond:
        fail(msg)


def parse_json(text, what):
    try:
        return json.loads(text)
    except ValueError as e:
        fail(f"{what}: stdout is not JSON ({e}):\n{text}")


def help_op_list(smla, command):
    """The operations the --op line of `smla COMMAND --help` lists."""
    rc, out, _ = run(smla, [command, "--help"])
    expect(rc == 0, f"smla {command} --help: exit code {rc}, expected 0")
    m = re.search(r"^\s*--op NAME\s+(.*)$", out, re.M)
    expect(m, f"smla {command} --help: no --op line in:\n{out}")
    return names(re.sub(r"\s*\(default \w+\)\s*$", "", m.group(1)))


def names(text):
    """["a", "b", "c"] from "a, b or c"."""
    return [n.strip() for n in re.split(r",| or ", text) if n.strip()]


def check_op_list(smla):
    bench = help_op_list(smla, "bench")
    expect(bench == ["sparse_decode", "sparse_prefill", "dense_decode", "merge_states"],
           f"smla bench --help lists {bench}, expected the four operations it times")
    caps_json = parse_json(run(smla, ["caps", "--json"])[1], "smla caps --json")
    caps = help_op_list(smla, "caps")
    expect(caps == caps_json["operations"],
           f"smla caps --help lists {caps}, smla caps --json lists {caps_json['operations']}")
    for bad in ["foo", "write_cache", "gather_cache"]:
        rc, out, err = run(smla, ["bench", "--op", bad])
        expect(rc == 2, f"smla bench --op {bad}: exit code {rc}, expected 2")
        m = re.search(r"--op must be one of (.*?) \(the operations smla bench times\), got '(\w+)'", err)
        expect(m, f"smla bench --op {bad}: no list of operations in:\n{err}")
        expect(names(m.group(1)) == bench, f"smla bench --op {bad} names {names(m.group(1))}, --help {bench}")
        expect(m.group(2) == bad, f"smla bench --op {bad}: the error quotes '{m.group(2)}'")
    # Every listed operation gets past --op: the run stops at the next flag instead.
    for op in bench:
        rc, _, err = run(smla, ["bench", "--op", op, "--warmup", "-1"])
        expect(rc == 2 and "--warmup must be >= 0" in err and "--op" not in err,
               f"smla bench --op {op} (listed) was refused: rc {rc}\n{err}")
    for op in caps:
        rc, out, err = run(smla, ["caps", "--op", op])
        expect(rc == 0, f"smla caps --op {op} (listed): exit code {rc}\n{err}")
    rc, _, err = run(smla, ["caps", "--op", "foo"])
    m = re.search(r"--op must be one of (.*?) \(.*\), got 'foo'", err)
    expect(rc == 2 and m and names(m.group(1)) == caps, f"smla caps --op foo: rc {rc}\n{err}")


def check_caps(smla):
    rc, out, err = run(smla, ["caps", "--json"])
    expect(rc == 0, f"smla caps --json: exit code {rc}\n{err}")
    d = parse_json(out, "smla caps --json")
    for key in ["built_with_cuda", "cuda_device", "cpu", "operations", "backends", "capabilities"]:
        expect(key in d, f"smla caps --json: no '{key}'")
    pairs = {(c["op"], c["backend"]) for c in d["capabilities"]}
    expect(pairs == {(o, b) for o in d["operations"] for b in d["backends"]},
           f"smla caps --json: not one entry per (operation, backend): {sorted(pairs)}")
    by = {(c["op"], c["backend"]): c for c in d["capabilities"]}
    sd = by[("sparse_decode", "cuda_sm90")]
    expect(sd["h_q"] == {"min": 1, "max": 128}, f"sparse_decode cuda_sm90 h_q: {sd['h_q']}")
    expect({"format": "fp8_ds_mla", "d_qk": [576], "q_dtypes": ["bfloat16"]} in sd["formats"],
           f"sparse_decode cuda_sm90 formats: {sd['formats']}")
    expect(by[("merge_states", "cpu")]["formats"] is None, "merge_states reads no cache: formats must be null")
    expect(by[("dense_decode", "cpu")]["h_q_multiple_of_h_kv"] is True, "dense_decode: h_q a multiple of h_kv")
    expect(by[("sparse_decode", "cpu")]["in_this_build"] is True, "the cpu backend is in every build")

    rc, out, err = run(smla, ["caps", "--json", "--op", "sparse_decode", "--format", "fp8_ds_mla", "--h_q", "256"])
    expect(rc == 0, f"smla caps --json --op ...: exit code {rc}\n{err}")
    v = parse_json(out, "smla caps --json --op ...")
    expect(v["config"]["h_q"] == 256 and v["config"]["format"] == "fp8_ds_mla", f"config: {v['config']}")
    verdict = {b["backend"]: b for b in v["backends"]}
    expect(verdict["cpu"]["supported"] is True, f"cpu verdict: {verdict['cpu']}")
    cuda = verdict["cuda_sm90"]
    expect(cuda["supported"] is False and cuda["argument"] == "h_q" and cuda["given"] == "256"
           and "128" in cuda["expected"] and cuda["why"], f"cuda_sm90 verdict: {cuda}")

    rc, out, err = run(smla, ["caps"])
    expect(rc == 0, f"smla caps: exit code {rc}\n{err}")
    wide = [line for line in out.splitlines() if len(line) > 100]
    expect(not wide, "smla caps: lines over 100 columns:\n" + "\n".join(wide))
    for op in d["operations"]:
        expect(re.search(rf"^{op}$", out, re.M), f"smla caps: no block for {op}")


def check_device(smla):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "r.json")
        rc, out, err = run(smla, MERGE + ["--json", path])
        expect(rc == 0 and os.path.exists(path), f"smla bench --json FILE: exit code {rc}\n{err}")
        with open(path) as f:
            d = parse_json(f.read(), "smla bench --json FILE")
    expect(d["device"] and "thread" in d["device"], f"device of a CPU run: '{d['device']}'")
    expect(d["device"] == d["cpu"], f"device '{d['device']}' is not the cpu '{d['cpu']}'")
    expect(d["results"][0]["backend"] == "cpu", "backend of the row")
    expect(d["device"] in out, f"the header does not name the device '{d['device']}':\n{out}")


def check_progress(smla):
    marker = re.compile(r"^smla bench \[[0-9.]+ s\] ", re.M)
    # Forced on, JSON to stdout: stdout is the JSON alone, the table and progress on stderr.
    rc, out, err = run(smla, MERGE + ["--progress", "always", "--json", "-"])
    expect(rc == 0, f"--json -: exit code {rc}\n{err}")
    d = parse_json(out, "smla bench --json -")
    expect(d["results"][0]["status"] == "ok", f"--json -: {d['results']}")
    for what in ["building the inputs", "timing on cpu", "checking", "done: ok"]:
        expect(re.search(r"^smla bench \[[0-9.]+ s\] " + what, err, re.M), f"no progress line '{what}':\n{err}")
    expect("| merge_states" in err, f"--json -: the table is not on stderr:\n{err}")
    # Forced on, table to stdout: no progress line among the results.
    rc, out, err = run(smla, MERGE + ["--progress", "always"])
    expect(rc == 0 and "| merge_states" in out, f"table run: rc {rc}\n{out}{err}")
    expect(not marker.search(out), f"progress on stdout:\n{out}")
    expect(marker.search(err), f"--progress always: no progress on stderr:\n{err}")
    # Default (auto): stderr is a pipe here, as in CI logs, so nothing.
    rc, out, err = run(smla, MERGE)
    expect(rc == 0 and not marker.search(err) and not marker.search(out), f"auto, not a terminal:\n{err}")
    rc, _, err = run(smla, MERGE + ["--progress", "sometimes"])
    expect(rc == 2 and "--progress must be auto, always or never, got 'sometimes'" in err, f"bad --progress:\n{err}")


def check_thirds(smla):
    # Nine or more timed calls: the medians of the first and last third are reported, each at
    # least the fastest call; fewer: neither.
    at = MERGE.index("--iters") + 1
    args = MERGE[:at] + ["9"] + MERGE[at + 1:]
    rc, out, err = run(smla, args + ["--json", "-"])
    expect(rc == 0, f"--iters 9 --json -: exit code {rc}\n{err}")
    r = parse_json(out, "smla bench --iters 9 --json -")["results"][0]
    for key in ["first_third_ms", "last_third_ms"]:
        expect(key in r and r[key] >= r["min_ms"] > 0, f"--iters 9: {key} missing or below min_ms: {r}")
    rc, out, err = run(smla, MERGE + ["--json", "-"])
    r = parse_json(out, "smla bench --iters 1 --json -")["results"][0]
    expect(rc == 0 and "first_third_ms" not in r, f"--iters 1: thirds reported: {r}")


CHECKS = {"op-list": check_op_list, "caps": check_caps, "device": check_device, "progress": check_progress,
          "thirds": check_thirds}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in CHECKS:
        sys.exit(f"usage: check_cli.py {'|'.join(CHECKS)} SMLA_BINARY")
    CHECKS[sys.argv[1]](sys.argv[2])
