"""DCP across GPUs: one process per GPU on an NCCL process group, each running sparse_decode
over its shard of the cache and smla.dcp_combine; every rank's heads must equal the unsharded
single-GPU result. The check is the benchmark's (bench/dcp_combine.py) on small shapes; it
needs a machine with two GPUs."""
import importlib.util
import pathlib

import pytest
import torch

from conftest import cuda_ready

needs_two_gpus = pytest.mark.skipif(not cuda_ready() or torch.cuda.device_count() < 2,
                                    reason="needs 2 GPUs and a CUDA build of smla")


def _bench_module():
    path = pathlib.Path(__file__).resolve().parents[2] / "bench" / "dcp_combine.py"
    spec = importlib.util.spec_from_file_location("dcp_combine_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_two_gpus
def test_sharded_sparse_decode_combines_across_two_gpus():
    rows = _bench_module().launch(world=2, small=True)
    assert len(rows) == 2 * 2  # two cases on each rank
    assert all(r["max_err"] < 1.6e-2 for r in rows)
