"""What each kernel family supports (SPEC §4.7), from the core's one table."""

from __future__ import annotations

from typing import Dict, List, Optional

from . import _smla
from ._convert import dtype_name


def why_not(
    op: str = "sparse_decode",
    *,
    backend: str = "cpu",
    format: str = "bf16",
    q_dtype="bfloat16",
    d_qk: int = 576,
    h_q: int = 128,
    h_kv: int = 1,
    page_size: int = 64,
    topk: int = 2048,
    s_q: int = 1,
) -> Optional[str]:
    """None when ``backend`` ("cpu", "cuda_sm90" or "cuda") supports the configuration, else
    one sentence naming the parameter, what is required and what was given. ``q_dtype`` is a
    torch.dtype or its name; the defaults are those of the core's KernelConfig."""
    return _smla.why_not(op=op, backend=backend, format=format, q_dtype=dtype_name(q_dtype), d_qk=d_qk, h_q=h_q,
                         h_kv=h_kv, page_size=page_size, topk=topk, s_q=s_q)


def capabilities() -> List[Dict[str, str]]:
    """One dict per (op, backend): op, backend, architectures, q_dtypes, formats, d_qk, h_q,
    page_sizes, topk, s_q."""
    return _smla.capabilities()


def built_with_cuda() -> bool:
    """Whether this build holds the sm_90a kernels."""
    return _smla.built_with_cuda()


def cuda_device_available() -> bool:
    """Whether, in a CUDA build, the current device is compute capability 9.0."""
    return _smla.cuda_device_available()
