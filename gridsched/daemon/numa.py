"""A process's memory bound to NUMA nodes (``set_mempolicy``): a job's boards' memory, inherited across the
spawn and the exec of its first process.  Standard library only; runs in the shepherds."""

from __future__ import annotations

import ctypes
import os

_libc: ctypes.CDLL | None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - every Linux has a libc
    _libc = None

MPOL_BIND = 2
SYS_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237, "ppc64le": 261}


def bind_memory(nodes: tuple[int, ...]) -> str | None:
    """Bind the calling process's memory to the NUMA ``nodes`` (set_mempolicy MPOL_BIND); why not, or None."""
    import platform

    nr = SYS_SET_MEMPOLICY.get(platform.machine())
    if nr is None or _libc is None:
        return f"set_mempolicy is not known on {platform.machine()}"
    maxnode = max(nodes) + 1
    words = (maxnode + 63) // 64
    mask = (ctypes.c_ulong * words)()
    for n in nodes:
        mask[n // 64] |= 1 << (n % 64)
    if _libc.syscall(nr, MPOL_BIND, ctypes.byref(mask), ctypes.c_ulong(words * 64)) != 0:
        return os.strerror(ctypes.get_errno())
    return None


def unbind_memory() -> None:
    """The calling process's memory policy back to the default (set_mempolicy MPOL_DEFAULT), if it can be."""
    import platform

    nr = SYS_SET_MEMPOLICY.get(platform.machine())
    if nr is not None and _libc is not None:
        _libc.syscall(nr, 0, None, ctypes.c_ulong(0))
