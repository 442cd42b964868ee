import os
import random
import zlib

import pytest
import torch

import smla

# Fresh random data every run (SPEC §6); SMLA_TEST_SEED=<n> replays a run.
SEED = int(os.environ.get("SMLA_TEST_SEED", random.randrange(1 << 30)))


def cuda_ready() -> bool:
    return torch.cuda.is_available() and smla.built_with_cuda() and smla.cuda_device_available()


def cuda_skip_reason() -> str:
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False"
    if not smla.built_with_cuda():
        return "smla was built without CUDA"
    return "no sm_90 device (smla.cuda_device_available() is False)"


requires_cuda = pytest.mark.skipif(not cuda_ready(), reason=cuda_skip_reason() if not cuda_ready() else "")

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=requires_cuda),
]


def pytest_configure(config):
    # scripts/gpu_check.sh sets SMLA_REQUIRE_CUDA=1: on the GPU machine the CUDA tests must run.
    if os.environ.get("SMLA_REQUIRE_CUDA") == "1" and not cuda_ready():
        raise pytest.UsageError(f"SMLA_REQUIRE_CUDA=1 but the CUDA tests cannot run: {cuda_skip_reason()}")


def pytest_report_header(config):
    return [f"smla test seed: {SEED} (set SMLA_TEST_SEED to replay)",
            f"torch {torch.__version__}; smla built with CUDA: {smla.built_with_cuda()}; "
            f"CUDA tests: {'on' if cuda_ready() else 'skipped (' + cuda_skip_reason() + ')'}"]


@pytest.fixture(autouse=True)
def _seed(request):
    seed = (SEED + zlib.crc32(request.node.nodeid.encode())) % (1 << 31)
    torch.manual_seed(seed)
    random.seed(seed)
    yield


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param
