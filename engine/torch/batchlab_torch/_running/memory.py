"""Keeping freed host memory in the process, so that a batched step does
not page-fault its temporaries in afresh every mini-batch.

A batch's tensors are large (a Tree-LSTM leaf batch at hidden 256 makes
a 3.7 MB affine output and several 1.2 MB gates), and PyTorch's CPU
allocator takes them from glibc's ``malloc``. glibc hands blocks that big
back to the kernel when they are freed (``mmap`` above its threshold, heap
trimming above another), so the next mini-batch's writes fault every page
in again, zeroed by the kernel: measured at hidden 256, about 1,900 minor
faults and 4 ms of system time in a 32 ms step, in some processes and not
in others (where the heap happened to stay grown). The per-instance eager
loop's tensors are small and never fault. Fixing both thresholds keeps
freed blocks in the heap for the next mini-batch, as the CUDA side's
caching allocator does on the device; the process keeps its high-water
mark of host memory.

:func:`keep_freed_memory` does that once per process, on Linux with
glibc; ``BATCHLAB_TORCH_KEEP_FREED=0`` leaves the allocator as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks up to this size come from the heap (glibc's own upper limit for the
# threshold on 64-bit: 4 MiB * sizeof(long)); larger ones stay mmap'd.
_MMAP_MAX = 32 << 20
# Freed memory at the heap's top is kept up to this much, mallopt's largest
# (the process keeps its high-water mark, which a step reaches again every
# mini-batch).
_TRIM = 2**31 - 1

_state: bool | None = None


def keep_freed_memory() -> bool:
    """Sets glibc's ``mmap`` and trim thresholds so that freed blocks stay
    in the process (see the module docs), once per process. True when the
    allocator keeps freed memory now; False where it could not be set (not
    Linux, not glibc) or ``BATCHLAB_TORCH_KEEP_FREED=0`` says not to."""
    global _state
    if _state is None:
        _state = _set() if os.environ.get("BATCHLAB_TORCH_KEEP_FREED", "1") != "0" else False
    return _state


def _set() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 (glibc's; musl has no thresholds to set)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_MAX)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM))
