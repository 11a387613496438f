"""Freed host memory stays in the process once a Runner is made on the CPU
(batchlab_torch._running.memory): a mini-batch's big temporaries are not faulted in
afresh by the next one. Each case runs in its own interpreter, since the
setting is the process's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Allocates, touches and frees a 24 MB block with glibc's malloc, then
# allocates and touches it again, and prints whether the setting took and
# the minor page faults of the second touch. glibc's default serves a block
# this big by mmap and unmaps it when freed, so the second touch faults in
# every page (~6,000) again; kept, it touches the same pages.
_PROBE = """
import ctypes, resource, sys
from torch import nn
import batchlab_torch as bt
from batchlab_torch._running.memory import keep_freed_memory
bt.Runner(nn.Linear(2, 2), cells={})
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
n = 24 << 20
p = libc.malloc(n)
libc.memset(p, 1, n)
libc.free(p)
f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
p = libc.malloc(n)
libc.memset(p, 1, n)
print(keep_freed_memory(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f)
"""

glibc = sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION") is not None


def probe(**env: str) -> tuple[bool, int]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return out[0] == "True", int(out[1])


only_glibc = pytest.mark.skipif(
    not glibc, reason="SKIPPED: glibc's allocator thresholds exist on Linux with glibc only"
)


@only_glibc
def test_a_runner_on_the_cpu_keeps_a_big_freed_block_so_its_pages_are_not_faulted_in_again() -> None:
    kept, faults = probe()
    assert kept
    assert faults < 600, faults


@only_glibc
def test_batchlab_torch_keep_freed_0_leaves_glibc_to_unmap_the_block() -> None:
    kept, faults = probe(BATCHLAB_TORCH_KEEP_FREED="0")
    assert not kept
    assert faults > 5000, faults
