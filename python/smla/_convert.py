"""Handing torch tensors to the binding: DLPack capsules, streams, cache formats."""

from __future__ import annotations

from typing import Optional

import torch

from . import _smla

SmlaError = _smla.SmlaError

CACHE_FORMATS = ("bf16", "fp16", "fp8_e4m3", "fp8_ds_mla", "fp8_model1")

_to_dlpack = getattr(getattr(torch, "utils", None), "dlpack", None)
_to_dlpack = getattr(_to_dlpack, "to_dlpack", None)


def error(argument: str, expected: str, given: str) -> SmlaError:
    """An SmlaError worded like the core's: '<argument> must be <expected>, got <given>'."""
    e = SmlaError(f"{argument} must be {expected}, got {given}")
    e.argument, e.expected, e.given = argument, expected, given
    return e


def capsule(t: torch.Tensor):
    # torch's Tensor.__dlpack__() without a stream makes the legacy default stream wait on
    # the current one (an event record plus a wait): a stray dependency in eager mode and an
    # error inside CUDA graph capture. to_dlpack / stream=-1 exports with no synchronization;
    # the operation itself runs on the stream it is given.
    t = t.detach()
    if _to_dlpack is not None:
        return _to_dlpack(t)
    if t.is_cuda:
        return t.__dlpack__(stream=-1)
    return t.__dlpack__()


def dl(t: Optional[torch.Tensor]):
    """None, a DLPack capsule, or (uint8 capsule, 'float8_e4m3fn') for float8 tensors, so
    that no torch version's DLPack float8 support is needed."""
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        return t  # another DLPack producer: the binding imports it as it is
    if t.dtype == torch.float8_e4m3fn:
        return (capsule(t.view(torch.uint8)), "float8_e4m3fn")
    return capsule(t)


def stream_of(t: torch.Tensor) -> int:
    """The cudaStream_t (as an int) the operation runs on: torch's current stream on the
    tensor's device; 0 for CPU tensors."""
    if t.device.type != "cuda":
        return 0
    return torch.cuda.current_stream(t.device).cuda_stream


class device_of:
    """Makes the tensor's CUDA device current for the call (smla launches on the current
    device); nothing for CPU tensors or when it already is."""

    def __init__(self, t: torch.Tensor):
        self._guard = None
        if t.device.type == "cuda" and t.device.index is not None and t.device.index != torch.cuda.current_device():
            self._guard = torch.cuda.device(t.device.index)

    def __enter__(self):
        if self._guard is not None:
            self._guard.__enter__()
        return self

    def __exit__(self, *exc):
        if self._guard is not None:
            self._guard.__exit__(*exc)
        return False


def infer_cache_format(cache: torch.Tensor, name: str = "cache") -> str:
    """The format a cache tensor's dtype and row width imply: bfloat16 -> bf16, float16 ->
    fp16, uint8 or float8_e4m3fn rows of 656 bytes -> fp8_ds_mla, of 584 bytes -> fp8_model1,
    other uint8 / float8_e4m3fn rows -> fp8_e4m3. Any other dtype gives bf16, which the core
    then rejects naming the dtype it expected."""
    if not isinstance(cache, torch.Tensor):
        raise error(name, "a torch.Tensor", type(cache).__name__)
    row = cache.shape[-1] if cache.dim() > 0 else 0
    if cache.dtype == torch.float16:
        return "fp16"
    if cache.dtype in (torch.uint8, torch.float8_e4m3fn):
        if row == 656:
            return "fp8_ds_mla"
        if row == 584:
            return "fp8_model1"
        return "fp8_e4m3"
    return "bf16"


def cache_arg(cache: torch.Tensor, cache_format: Optional[str], name: str = "cache"):
    """(tensor to pass, format). The packed formats take uint8 or float8_e4m3fn tensors
    (FlashMLA's tests use float8) and fp8_e4m3 takes float8_e4m3fn or uint8: either is passed
    to the core as the dtype the format defines."""
    fmt = infer_cache_format(cache, name) if cache_format is None else cache_format
    if fmt not in CACHE_FORMATS:
        raise error(f"{name}_format", "one of " + ", ".join(CACHE_FORMATS), repr(fmt))
    if isinstance(cache, torch.Tensor):
        if fmt in ("fp8_ds_mla", "fp8_model1") and cache.dtype == torch.float8_e4m3fn:
            cache = cache.view(torch.uint8)
        elif fmt == "fp8_e4m3" and cache.dtype == torch.uint8:
            cache = cache.view(torch.float8_e4m3fn)
    return cache, fmt


def dtype_name(dtype) -> str:
    if isinstance(dtype, torch.dtype):
        return str(dtype).replace("torch.", "")
    return str(dtype)
