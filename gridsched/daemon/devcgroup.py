"""Device isolation of jobs through cgroups: a job cannot open the nodes of devices it does not hold.

On a machine with devices, each job that does not hold all of them runs in a
cgroup of its own, made by its shepherd inside the daemon's cgroup (and
removed after it), that denies the device nodes of every device the job does
not hold (:meth:`gridsched.host.device_nodes.NodeMap.denied`) and allows everything
else (``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/null``, ...):

* cgroup v1, where the ``devices`` controller is mounted: one
  ``devices.deny`` line per node (``c 195:1 rwm``);
* cgroup v2: a ``BPF_PROG_TYPE_CGROUP_DEVICE`` program, loaded with
  ``bpf(2)`` and attached to the job's cgroup with ``BPF_F_ALLOW_MULTI``
  (so programs on the cgroups above it, such as a container's, still run and
  each may refuse).  The program returns 0 (refused) for the char or block
  devices it lists and 1 for every other access.

Both need root (``CAP_SYS_ADMIN``; ``CAP_BPF`` for the program) and a
cgroup file system the daemon may write: a personal daemon, or one in a
container without a delegated hierarchy, has neither, and its jobs are told
of their devices by environment alone.  :func:`controller` finds out which
applies by trying it once on a probe cgroup.

Standard library only (ctypes for ``bpf(2)``); everything here may run in a
forked shepherd.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gridsched.core.topology import Device
from gridsched.daemon import cgroup
from gridsched.host.device_nodes import Node, NodeMap, node_map

V1_MOUNT = "/sys/fs/cgroup/devices"
V2_MOUNTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")

# bpf(2)
SYS_BPF = {"x86_64": 321, "aarch64": 280, "ppc64le": 361, "ppc64": 361, "s390x": 351, "riscv64": 280}
BPF_PROG_LOAD = 5
BPF_PROG_ATTACH = 8
BPF_PROG_TYPE_CGROUP_DEVICE = 15
BPF_CGROUP_DEVICE = 6
BPF_F_ALLOW_MULTI = 2
BPF_DEVCG_DEV_BLOCK = 1
BPF_DEVCG_DEV_CHAR = 2
# instruction classes and codes
_LDX_MEM_W = 0x61  # dst = *(u32 *)(src + off)
_ALU64_AND_K = 0x57  # dst &= imm
_ALU64_MOV_K = 0xB7  # dst = imm
_JMP_JNE_K = 0x55  # if dst != imm: pc += off
_JMP_EXIT = 0x95
MAX_NODES = 4000  # a program of 4 + 5 * n + 2 instructions stays well under the kernel's limit

_libc: ctypes.CDLL | None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - every Linux has a libc
    _libc = None


class IsolationError(OSError):
    """Device isolation cannot be set up (the message says why)."""


@dataclass(frozen=True, slots=True)
class Controller:
    """Where job cgroups with device rules are made: cgroup ``version`` 1 or 2, in ``base`` (the daemon's own
    cgroup of that hierarchy)."""

    version: int
    base: Path

    def describe(self) -> str:
        return "cgroup v1 devices controller" if self.version == 1 else "cgroup v2 device program"


# -- the program ----------------------------------------------------------------------------------


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def program(deny: Iterable[Node]) -> bytes:
    """The instructions of a device program refusing every access to the nodes ``deny``, allowing the rest.

    The kernel calls it with ``struct bpf_cgroup_dev_ctx { u32 access_type
    (access << 16 | type); u32 major; u32 minor; }`` in r1.
    """
    code = [
        _insn(_LDX_MEM_W, dst=2, src=1, off=0),  # r2 = access_type
        _insn(_ALU64_AND_K, dst=2, imm=0xFFFF),  # r2 = its device type (char or block)
        _insn(_LDX_MEM_W, dst=3, src=1, off=4),  # r3 = major
        _insn(_LDX_MEM_W, dst=4, src=1, off=8),  # r4 = minor
    ]
    for n in sorted(set(deny)):
        kind = BPF_DEVCG_DEV_CHAR if n.kind == "c" else BPF_DEVCG_DEV_BLOCK
        code += [
            _insn(_JMP_JNE_K, dst=2, off=4, imm=kind),
            _insn(_JMP_JNE_K, dst=3, off=3, imm=n.major),
            _insn(_JMP_JNE_K, dst=4, off=2, imm=n.minor),
            _insn(_ALU64_MOV_K, dst=0, imm=0),  # this node: refused
            _insn(_JMP_EXIT),
        ]
    code += [_insn(_ALU64_MOV_K, dst=0, imm=1), _insn(_JMP_EXIT)]  # any other: allowed
    return b"".join(code)


def _bpf(cmd: int, attr: ctypes.Array[ctypes.c_char]) -> int:
    nr = SYS_BPF.get(platform.machine())
    if nr is None or _libc is None:
        raise IsolationError(errno.ENOSYS, f"bpf(2) is not known on {platform.machine()}")
    ret = _libc.syscall(ctypes.c_long(nr), ctypes.c_int(cmd), attr, ctypes.c_uint(len(attr)))
    if ret < 0:
        e = ctypes.get_errno()
        raise IsolationError(e, os.strerror(e))
    return int(ret)


def load(deny: Iterable[Node]) -> int:
    """Load the program for ``deny``; its file descriptor (the caller closes it).  IsolationError if the kernel
    refuses (no CAP_BPF, no cgroup BPF, ...)."""
    nodes = tuple(deny)
    if len(nodes) > MAX_NODES:
        raise IsolationError(errno.E2BIG, f"{len(nodes)} device nodes to refuse; at most {MAX_NODES}")
    insns = ctypes.create_string_buffer(program(nodes))
    n_insns = (len(insns) - 1) // 8  # create_string_buffer adds a NUL
    lic = ctypes.create_string_buffer(b"GPL")  # the kernel reads it only to allow GPL-only helpers: none is called
    log = ctypes.create_string_buffer(1 << 16)
    attr = ctypes.create_string_buffer(128)
    struct.pack_into("<IIQQ", attr, 0, BPF_PROG_TYPE_CGROUP_DEVICE, n_insns, ctypes.addressof(insns),
                     ctypes.addressof(lic))  # fmt: skip
    name = b"gridsched_dev"
    ctypes.memmove(ctypes.addressof(attr) + 48, name, len(name))
    try:
        return _bpf(BPF_PROG_LOAD, attr)
    except IsolationError as e:
        if e.errno != errno.EINVAL:
            raise IsolationError(e.errno, f"bpf(BPF_PROG_LOAD): {e.strerror}") from None
    # refused by the verifier: load again with its log, to say why
    struct.pack_into("<IIQ", attr, 24, 1, len(log), ctypes.addressof(log))
    try:
        return _bpf(BPF_PROG_LOAD, attr)
    except IsolationError as e:
        said = log.value.decode(errors="replace").strip().splitlines()
        raise IsolationError(e.errno, f"bpf(BPF_PROG_LOAD): {e.strerror}{': ' + said[-1] if said else ''}") from None


def attach(cgroup_dir: Path, prog_fd: int) -> None:
    """Attach the program ``prog_fd`` to the cgroup v2 directory ``cgroup_dir`` (with BPF_F_ALLOW_MULTI)."""
    fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        attr = ctypes.create_string_buffer(32)
        struct.pack_into("<IIII", attr, 0, fd, prog_fd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI)
        try:
            _bpf(BPF_PROG_ATTACH, attr)
        except IsolationError as e:
            raise IsolationError(e.errno, f"bpf(BPF_PROG_ATTACH): {e.strerror}") from None
    finally:
        os.close(fd)


# -- where job cgroups go ---------------------------------------------------------------------------


def _v1() -> Controller:
    own = cgroup._own_path("devices")
    if own is None or not Path(V1_MOUNT, "devices.deny").exists():
        raise IsolationError(errno.ENOENT, "no cgroup v1 devices controller is mounted")
    return Controller(1, Path(V1_MOUNT) / own.lstrip("/"))


def _v2() -> Controller:
    own = cgroup._own_path(None)
    if own is None:
        raise IsolationError(errno.ENOENT, "this process is in no cgroup v2 hierarchy")
    for mount in V2_MOUNTS:
        if Path(mount, "cgroup.controllers").exists():
            return Controller(2, Path(mount) / own.lstrip("/"))
    raise IsolationError(errno.ENOENT, "no cgroup v2 file system is mounted")


def _probe(c: Controller) -> None:
    """Make a cgroup with one rule in ``c`` and remove it again: IsolationError if any step is refused."""
    path = c.base / f"gridsched-probe-{os.getpid()}"
    try:
        path.mkdir()
    except OSError as e:
        raise IsolationError(e.errno or errno.EPERM, f"cannot make a cgroup in {c.base}: {e.strerror}") from None
    try:
        rules(c, path, (Node("c", 1, 3),))  # /dev/null: nothing is in the probe cgroup
    finally:
        cgroup.remove(path, timeout=1.0)


def rules(c: Controller, path: Path, deny: Iterable[Node]) -> None:
    """Refuse the nodes ``deny`` to the processes of the cgroup at ``path`` (made already)."""
    nodes = tuple(deny)
    if c.version == 1:
        for n in nodes:
            try:
                with open(path / "devices.deny", "w") as f:
                    f.write(f"{n} rwm")
            except OSError as e:
                raise IsolationError(e.errno or errno.EPERM, f"{path}/devices.deny: {e.strerror}") from None
        return
    fd = load(nodes)
    try:
        attach(path, fd)
    finally:
        os.close(fd)


_found: tuple[Controller | None, str] | None = None


def controller(refresh: bool = False) -> tuple[Controller | None, str]:
    """Where job cgroups with device rules can be made here, tried once per process (cgroup v1's devices
    controller first, then a cgroup v2 device program), or None and why neither can."""
    global _found
    if _found is not None and not refresh:
        return _found
    whys = []
    for find in (_v1, _v2):
        try:
            c = find()
            _probe(c)
        except IsolationError as e:
            whys.append(e.strerror or str(e))
            continue
        _found = (c, "")
        return _found
    if os.geteuid() != 0:
        whys = [f"the daemon is not root (uid {os.geteuid()})"]
    _found = (None, "; ".join(whys))
    return _found


def create(c: Controller, name: str, deny: Iterable[Node]) -> Path:
    """The job cgroup ``name`` in ``c`` refusing the nodes ``deny`` (an existing one, such as the job's memory
    cgroup in the same hierarchy, gets the rules too).  IsolationError if it cannot be done (nothing is left
    behind that this call made)."""
    path = c.base / name
    made = False
    try:
        path.mkdir()
        made = True
    except FileExistsError:
        pass
    except OSError as e:
        raise IsolationError(e.errno or errno.EPERM, f"cannot make a cgroup in {c.base}: {e.strerror}") from None
    try:
        rules(c, path, deny)
    except IsolationError:
        if made:
            cgroup.remove(path, timeout=0.5)
        raise
    return path


def describe(enforce: str, system: bool, probe: bool = True) -> tuple[bool, str]:
    """Whether jobs' devices are isolated here, and how or why not, for people (``gctl info``)."""
    env = "jobs see only their devices through CUDA_VISIBLE_DEVICES etc."
    if enforce == "off":
        return False, f'not enforced: [devices] enforce = "off"; {env}'
    c, why = controller() if probe else (None, "not probed")
    if c is None:
        return False, f"not enforced: {why}; {env}"
    return True, f"isolated by {c.describe()}"


_maps: dict[tuple[Device, ...], NodeMap] = {}


def nodes(devices: tuple[Device, ...]) -> NodeMap:
    """The device nodes of the machine's ``devices``, looked up (and declared nodes stat'ed) once per daemon."""
    m = _maps.get(devices)
    if m is None:
        m = _maps[devices] = node_map(devices)
    return m


def denied(devices: tuple[Device, ...], held: Iterable[tuple[str, int]], enforce: str) -> tuple[Node, ...]:
    """The nodes a job holding ``held`` must not open (none with ``enforce = "off"`` or without devices)."""
    if enforce == "off" or not devices:
        return ()
    return nodes(devices).denied(held)


def announce(devices: tuple[Device, ...], enforce: str, system: bool) -> list[str]:
    """What the daemon logs when it starts: how jobs are kept from the devices they do not hold."""
    if not devices:
        return []
    on, how = describe(enforce, system)
    out = [f"device access: {how}"]
    if on and enforce == "required" and not system:
        out[0] += ' (enforce = "required" fails jobs in system mode only)'
    m = nodes(devices)
    if m.unknown and enforce != "off":
        out.append(f"device access: not isolated (no node known): {m.describe_unknown()}")
    return out
