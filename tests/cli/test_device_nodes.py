"""Which device nodes belong to which device: declared paths, NVIDIA and AMD GPUs found in sysfs; the topology
file's ``path`` and the configuration's ``[devices] enforce``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gridsched.core.topology import Device, TopologyError
from gridsched.host.device_nodes import Node, NodeError, node_map, nodes_of, stat_node
from gridsched.host.topology import parse
from gridsched.protocol import config

BOARD = '[[board]]\ncores = "0-1"\n'


def _node(where: Path, name: str, major: int, minor: int) -> str:
    p = where / name
    try:
        os.mknod(p, 0o600 | stat.S_IFCHR, os.makedev(major, minor))
    except OSError as e:
        pytest.skip(f"cannot make a device node here (mknod: {e.strerror})")
    return str(p)


@pytest.fixture
def devdir(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("device nodes owned by root can be made by root only")
    d = tmp_path / "dev"
    d.mkdir(mode=0o755)
    return d


def test_a_declared_node_is_read_through_a_root_link(devdir):
    p = _node(devdir, "nvidia1", 195, 1)
    os.symlink(p, devdir / "by-path")
    assert stat_node(p) == Node("c", 195, 1)
    assert stat_node(str(devdir / "by-path")) == Node("c", 195, 1)


def test_a_declared_path_users_could_change_is_refused(devdir):
    p = _node(devdir, "nvidia0", 195, 0)
    with pytest.raises(NodeError, match="not a device node"):
        stat_node(str(devdir.parent))
    with pytest.raises(NodeError, match="no such device node"):
        stat_node(str(devdir / "nvidia9"))
    open_dir = devdir / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)  # writable by all, not sticky: anyone could put another node there
    q = _node(open_dir, "nvidia2", 195, 2)
    with pytest.raises(NodeError, match="can be changed by users other than root"):
        stat_node(q)
    os.chown(devdir / "nvidia0", 65534, 65534)
    with pytest.raises(NodeError, match="not owned by root"):
        stat_node(p)
    os.symlink(p, devdir / "userlink")
    os.lchown(devdir / "userlink", 65534, 65534)
    with pytest.raises(NodeError, match="link a user owns"):
        stat_node(str(devdir / "userlink"))


def _pci(sysfs: Path, bus: str, vendor: str, drm: dict[str, str] | None = None) -> None:
    dev = sysfs / "bus" / "pci" / "devices" / bus
    dev.mkdir(parents=True)
    (dev / "vendor").write_text(vendor + "\n")
    for name, numbers in (drm or {}).items():
        (dev / "drm" / name).mkdir(parents=True)
        (dev / "drm" / name / "dev").write_text(numbers + "\n")


def test_an_nvidia_gpu_is_195_and_its_driver_minor(tmp_path):
    sysfs, proc = tmp_path / "sys", tmp_path / "proc"
    _pci(sysfs, "0000:3b:00.0", "0x10de")
    _pci(sysfs, "0000:5e:00.0", "0x10de")
    info = proc / "driver" / "nvidia" / "gpus" / "0000:5e:00.0"
    info.mkdir(parents=True)
    (info / "information").write_text("Model: H100\nDevice Minor: \t 3\n")
    a = Device("gpu", 0, 0, pci="00000000:3B:00.0")
    b = Device("gpu", 1, 0, pci="0000:5e:00.0")
    assert nodes_of(a, sysfs, proc) == (Node("c", 195, 0),)  # no minor from the driver: the index
    assert nodes_of(b, sysfs, proc) == (Node("c", 195, 3),)
    # no PCI address, the NVIDIA driver loaded: /dev/nvidiaINDEX
    assert nodes_of(Device("gpu", 5, 0), sysfs, proc) == (Node("c", 195, 5),)


def test_an_amd_gpu_has_its_card_and_render_nodes(tmp_path):
    sysfs, proc = tmp_path / "sys", tmp_path / "proc"
    _pci(sysfs, "0000:c1:00.0", "0x1002", {"card1": "226:1", "renderD129": "226:129", "controlD65": "226:65"})
    assert nodes_of(Device("gpu", 0, 0, pci="0000:c1:00.0"), sysfs, proc) == (
        Node("c", 226, 1),
        Node("c", 226, 129),
    )
    # without its PCI address: the INDEX-th AMD card of /sys/class/drm
    card = sysfs / "class" / "drm" / "card1"
    card.mkdir(parents=True)
    (card / "device").symlink_to(sysfs / "bus" / "pci" / "devices" / "0000:c1:00.0")
    assert nodes_of(Device("gpu", 0, 0), sysfs, proc) == (Node("c", 226, 1), Node("c", 226, 129))


def test_devices_without_a_known_node_are_named_and_the_rest_denied(tmp_path):
    sysfs, proc = tmp_path / "sys", tmp_path / "proc"
    sysfs.mkdir()
    (proc / "driver" / "nvidia").mkdir(parents=True)
    m = node_map([Device("gpu", 0, 0), Device("gpu", 1, 0), Device("fpga", 0, 0)], sysfs, proc)
    assert [k for k, _ in m.unknown] == [("fpga", 0)]
    assert "no device node known" in m.describe_unknown()
    assert m.denied([("gpu", 0)]) == (Node("c", 195, 1),)
    assert m.denied([]) == (Node("c", 195, 0), Node("c", 195, 1))
    assert m.denied([("gpu", 0), ("gpu", 1)]) == ()


def test_the_topology_file_names_device_nodes_and_writes_them_back():
    text = (
        BOARD
        + '[[device]]\ntype = "gpu"\nindex = 0\nboard = 0\npath = "/dev/nvidia0"\n'
        + '[[device]]\ntype = "gpu"\nindex = 1\nboard = 0\npath = ["/dev/dri/card1", "/dev/dri/renderD129"]\n'
    )
    m = parse(text, "t.toml")
    assert [dv.paths for dv in m.devices] == [("/dev/nvidia0",), ("/dev/dri/card1", "/dev/dri/renderD129")]
    assert parse(m.text(), "again.toml") == m


@pytest.mark.parametrize("bad", ['"dev/nvidia0"', '"/dev/../etc/shadow"', "[]", "3", '"/dev/a b"', '["/dev/x", 1]'])
def test_a_bad_device_path_is_refused_with_its_line(bad):
    text = BOARD + f'[[device]]\ntype = "gpu"\nindex = 0\nboard = 0\npath = {bad}\n'
    with pytest.raises(TopologyError, match=r"^t\.toml:7: device #1: path = "):
        parse(text, "t.toml")


def test_devices_enforce_is_auto_required_or_off():
    assert config.parse({}).device_enforce == "auto"
    c = config.parse({"devices": {"enforce": "required", "gpu": {"share": 2}}})
    assert c.device_enforce == "required" and c.devices["gpu"].share == 2
    with pytest.raises(config.ConfigError, match="devices.enforce = 'yes': must be one of 'auto', 'required', 'off'"):
        config.parse({"devices": {"enforce": "yes"}})
