"""smla: MLA attention kernels for LLM serving, over torch tensors.

CPU tensors run on the CPU backend (float64 accumulation), CUDA tensors on the sm_90a
kernels, on ``torch.cuda.current_stream()``. Every operation is a torch.library custom op
(namespace ``smla``), usable under ``torch.compile(fullgraph=True)`` and inside CUDA graphs.
Bad input raises :class:`SmlaError` (a ValueError) before anything is written.

``smla.flash_mla`` offers FlashMLA-compatible entry points. See docs/PYTHON.md.
"""

# torch first: it loads its own CUDA runtime and NCCL, and the extension, loaded first, would
# bind them to the system's copies (an older NCCL then lacks symbols torch needs).
import torch  # noqa: F401

from . import _smla
from ._convert import CACHE_FORMATS, SmlaError, infer_cache_format
from .dcp import dcp_combine, dcp_rescale
from .capabilities import built_with_cuda, capabilities, cuda_device_available, why_not
from .index import (
    compressed_slot_mapping,
    dcp_local_length,
    dcp_local_position,
    dcp_local_seqlens,
    dcp_local_topk,
    dcp_owner_rank,
    decode_split_schedule,
    max_total_splits,
    page_table_from_req_to_token,
    positions_to_slots,
    req_id_per_token,
    sliding_window_indices,
)
from .ops import (
    D_V,
    dense_decode,
    empty_cache,
    gather_cache,
    merge_states,
    sparse_decode,
    sparse_prefill,
    write_cache,
)
from . import flash_mla  # noqa: E402  (after the ops it calls)

D_ROPE = _smla.D_ROPE
bytes_per_token = _smla.bytes_per_token
model1_aligned_page_bytes = _smla.model1_aligned_page_bytes

__version__ = "0.1.0"

__all__ = [
    "CACHE_FORMATS", "D_ROPE", "D_V", "SmlaError", "built_with_cuda", "bytes_per_token", "capabilities",
    "compressed_slot_mapping", "cuda_device_available", "dcp_combine", "dcp_local_length", "dcp_local_position",
    "dcp_local_seqlens", "dcp_local_topk", "dcp_owner_rank", "dcp_rescale", "decode_split_schedule", "dense_decode",
    "empty_cache", "flash_mla",
    "gather_cache", "infer_cache_format", "max_total_splits", "merge_states", "model1_aligned_page_bytes",
    "page_table_from_req_to_token", "positions_to_slots", "req_id_per_token", "sliding_window_indices",
    "sparse_decode", "sparse_prefill", "why_not", "write_cache",
]
