"""Handing torch tensors to the binding: DLPack capsules, streams, cache formats."""

from __future__ import annotations

import math
import operator
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


_INT_RANGE = {32: (-(1 << 31), (1 << 31) - 1), 64: (-(1 << 63), (1 << 63) - 1)}


def int_arg(name: str, value, bits: int = 32, minimum: Optional[int] = None) -> int:
    """A scalar integer argument as the core takes it (int32, or int64 where the core says so):
    an integer, or a float with an integral value; anything else, a value outside the type, or
    one below ``minimum``, is an SmlaError naming the argument (not the binding's TypeError)."""
    given = repr(value)
    if isinstance(value, bool):
        raise error(name, "an integer", f"bool {given}")
    try:
        v = operator.index(value)
    except TypeError:
        if not (isinstance(value, float) and math.isfinite(value) and value.is_integer()):
            raise error(name, "an integer", f"{type(value).__name__} {given}") from None
        v = int(value)
    lo, hi = _INT_RANGE[bits]
    if not lo <= v <= hi:
        raise error(name, f"an int{bits} value ({lo} to {hi})", str(v))
    if minimum is not None and v < minimum:
        raise error(name, f"at least {minimum}", str(v))
    return v


def float_arg(name: str, value) -> float:
    """A scalar float argument: a real number (its range is the core's to check)."""
    if isinstance(value, (str, bytes)) or value is None:
        raise error(name, "a float", f"{type(value).__name__} {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise error(name, "a float", f"{type(value).__name__} {value!r}") from None


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


# What each format stores, as the inference reads it (docs/PYTHON.md).
_FORMAT_TENSORS = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp8_e4m3": "float8_e4m3fn or uint8 rows of 576 or 512 bytes",
    "fp8_ds_mla": "uint8 or float8_e4m3fn rows of 656 bytes",
    "fp8_model1": "uint8 or float8_e4m3fn rows of 584 bytes",
}
_ROW_BYTES = {"fp8_e4m3": (576, 512), "fp8_ds_mla": (656,), "fp8_model1": (584,)}
_BYTE_DTYPES = (torch.uint8, torch.float8_e4m3fn)


def describe(t: torch.Tensor) -> str:
    """A tensor as the core's messages render one: 'bfloat16 (2, 3)'."""
    return f"{dtype_name(t.dtype)} {tuple(t.shape)}"


def _as_read(cache: torch.Tensor) -> str:
    """The cache as the inference reads it: 'uint8 rows of 600 bytes' for 1-byte dtypes."""
    if cache.dtype in _BYTE_DTYPES and cache.dim() > 0:
        return f"{dtype_name(cache.dtype)} rows of {cache.shape[-1]} bytes"
    return describe(cache)


def _formats_text(formats) -> str:
    parts = [f"{f} ({_FORMAT_TENSORS[f]})" for f in formats]
    return "a cache of format " + (", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else parts[0])


def infer_cache_format(cache: torch.Tensor, name: str = "cache", formats=CACHE_FORMATS) -> str:
    """The format a cache tensor's dtype and row width imply: bfloat16 -> bf16, float16 ->
    fp16, uint8 or float8_e4m3fn rows of 656 bytes -> fp8_ds_mla, of 584 bytes -> fp8_model1,
    of 576 or 512 bytes -> fp8_e4m3. Raises SmlaError naming ``name`` when no format fits, or
    when the one that does is not among ``formats`` (those the operation takes); the message
    says what was read from the tensor, as no format was named by the caller."""
    if not isinstance(cache, torch.Tensor):
        raise error(name, "a torch.Tensor", type(cache).__name__)
    fmt, source = None, "its dtype"
    if cache.dtype == torch.bfloat16:
        fmt = "bf16"
    elif cache.dtype == torch.float16:
        fmt = "fp16"
    elif cache.dtype in _BYTE_DTYPES:
        source = "its dtype and row width"
        row = cache.shape[-1] if cache.dim() > 0 else None
        fmt = next((f for f, widths in _ROW_BYTES.items() if row in widths), None)
    if fmt is None:
        why = ("no cache format has that dtype" if cache.dtype not in _BYTE_DTYPES
               else "no cache format has that row width" if cache.dim() > 0 else "no cache format has that shape")
        raise error(name, _formats_text(formats), f"{_as_read(cache)} ({why})")
    if fmt not in formats:
        raise error(name, _formats_text(formats), f"{_as_read(cache)} (format {fmt}, inferred from {source})")
    return fmt


def cache_arg(cache: torch.Tensor, cache_format: Optional[str], name: str = "cache", formats=CACHE_FORMATS):
    """(tensor to pass, format). ``formats`` are those the operation takes (only an inferred
    format is held to them here; a named one is the core's to judge, as ``<name>.format``).
    The packed formats take uint8 or float8_e4m3fn tensors (FlashMLA's tests use float8) and
    fp8_e4m3 takes float8_e4m3fn or uint8: either is passed to the core as the dtype the
    format defines."""
    fmt = infer_cache_format(cache, name, formats) if cache_format is None else cache_format
    if fmt not in CACHE_FORMATS:
        raise error(f"{name}_format", "one of " + ", ".join(CACHE_FORMATS), repr(fmt))
    if isinstance(cache, torch.Tensor) and fmt in _ROW_BYTES and cache.dtype in _BYTE_DTYPES:
        # The core would see the reinterpreted dtype; a row-width error names the one given.
        if fmt in formats and cache.dim() > 0 and cache.shape[-1] not in _ROW_BYTES[fmt]:
            raise error(name, f"{_FORMAT_TENSORS[fmt]} for format {fmt}", _as_read(cache))
        if fmt in ("fp8_ds_mla", "fp8_model1") and cache.dtype == torch.float8_e4m3fn:
            cache = cache.view(torch.uint8)
        elif fmt == "fp8_e4m3" and cache.dtype == torch.uint8:
            cache = cache.view(torch.float8_e4m3fn)
    return cache, fmt


_DEVICE_TYPES = ("cpu", "cuda")


def check_device_type(name: str, t) -> None:
    """A tensor on a device smla runs on. A meta tensor has no data: the custom op would
    dispatch it to the fake implementation and return uninitialized outputs."""
    if isinstance(t, torch.Tensor) and t.device.type not in _DEVICE_TYPES:
        raise error(name, "on cpu or a cuda device", f"on {t.device}")


def check_devices(*named, required: int = 0) -> None:
    """(name, tensor or None) pairs: each a tensor or None (the first ``required`` a tensor),
    every tensor on cpu or a cuda device, and all on the device of the first (named as the
    core names its reference argument). Checked in the wrappers, before anything is allocated
    or dispatched; FakeTensors report the device they stand for, so tracing passes through."""
    for i, (n, t) in enumerate(named):
        if not isinstance(t, torch.Tensor) and (t is not None or i < required):
            raise error(n, "a torch.Tensor", f"{type(t).__name__} {repr(t)[:40]}")
    present = [(n, t) for n, t in named if isinstance(t, torch.Tensor)]
    for n, t in present:
        check_device_type(n, t)
    if present:
        ref_name, ref = present[0]
        for n, t in present[1:]:
            if t.device != ref.device:
                raise error(n, f"on {ref.device} like {ref_name}", f"on {t.device}")


def dtype_name(dtype) -> str:
    if isinstance(dtype, torch.dtype):
        return str(dtype).replace("torch.", "")
    return str(dtype)
