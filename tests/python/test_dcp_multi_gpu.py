"""DCP across GPUs: one process per GPU on an NCCL process group, each running sparse_decode
over its shard of the cache and smla.dcp_combine; every rank's heads must equal the unsharded
single-GPU result. The check is the benchmark's (bench/dcp_combine.py, run here on small
shapes); it needs a machine with two GPUs."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

from conftest import cuda_ready

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "dcp_combine.py"


@pytest.mark.skipif(not cuda_ready() or torch.cuda.device_count() < 2, reason="needs 2 GPUs and a CUDA build of smla")
def test_sharded_sparse_decode_combines_across_two_gpus(tmp_path):
    out = tmp_path / "dcp.jsonl"
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    proc = subprocess.run([sys.executable, str(BENCH), "--world", "2", "--small", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    ranks = [r for r in rows if "rank" in r]
    assert len(ranks) == 2 * 2  # two cases on each rank
    assert all(r["max_err"] < 1.6e-2 for r in ranks)
    # The keys (dcp2_b<b>_h<h>_<what>): combine time and rank step / unsharded per case,
    # eagerly (graph replays only with --graphs, not asked for here).
    suffixes = sorted(r["key"].split("_", 3)[3] for r in rows if "key" in r)
    assert [x for x in suffixes if not x.endswith("_graph")] == ["combine", "combine", "step_ratio", "step_ratio"]
    assert all(r["step_ratio_graph"] is None for r in ranks)
