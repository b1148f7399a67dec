"""Devices found on the host (a fake nvidia-smi on PATH, a fake sysfs root) and [devices.TYPE] of the config."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gridsched.core.topology import board, make
from gridsched.host import devices, topology
from gridsched.job.env import device_env
from gridsched.protocol.config import ConfigError
from gridsched.protocol.config import parse as parse_config
from gridsched.protocol.device_asks import format_keys, parse_keys

SMI = """#!/bin/sh
case "$*" in
  *--query-gpu=index,uuid,name,memory.total,pci.bus_id*)
    echo "0, GPU-aaaa-0001, NVIDIA H100 80GB HBM3, 81559 MiB, 00000000:3B:00.0"
    echo "1, GPU-aaaa-0002, NVIDIA H100 80GB HBM3, 81559 MiB, 00000000:D8:00.0"
    ;;
  *) exit 9 ;;
esac
"""


def two_boards():
    return make([board(0, range(2), node=0), board(1, range(2, 4), node=1)], [0, 0, 0, 0])


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "nvidia-smi"
    exe.write_text(SMI)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    sysfs = tmp_path / "sys"
    for bus, node in (("0000:3b:00.0", "0"), ("0000:d8:00.0", "1")):
        d = sysfs / "bus" / "pci" / "devices" / bus
        d.mkdir(parents=True)
        (d / "numa_node").write_text(node + "\n")
    return sysfs


def test_nvidia_smi_gpus_hang_on_the_board_of_their_numa_node(fake_smi):
    found, source = devices.discover(two_boards(), fake_smi)
    assert source == "nvidia-smi"
    assert [(d.index, d.board, d.uuid, d.pci) for d in found] == [
        (0, 0, "GPU-aaaa-0001", "0000:3b:00.0"),
        (1, 1, "GPU-aaaa-0002", "0000:d8:00.0"),
    ]
    assert found[0].model == "NVIDIA H100 80GB HBM3" and found[0].memory == 81559 * 1024 * 1024


def test_declared_devices_win_over_discovered_ones(fake_smi, tmp_path):
    m = make([board(0, range(4))], [0, 0, 0, 0], devices=[topology.Device("gpu", 7, 0)])
    got, source = devices.with_devices(m, "topo.toml", fake_smi)
    assert [d.index for d in got.devices] == [7] and source == "declared in topo.toml"


def test_amd_gpus_from_sysfs(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    sysfs = tmp_path / "sys"
    for card, vendor, node in (("card0", "0x1002", "1"), ("card1", "0x8086", "0"), ("card2", "0x1002", "-1")):
        d = sysfs / "class" / "drm" / card / "device"
        d.mkdir(parents=True)
        (d / "vendor").write_text(vendor + "\n")
        (d / "numa_node").write_text(node + "\n")
    found, source = devices.discover(two_boards(), sysfs)
    assert source == "sysfs"
    assert [(d.type, d.index, d.board) for d in found] == [("gpu", 0, 1), ("gpu", 1, 0)]


def test_no_devices_anywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    got, source = devices.with_devices(two_boards(), "", tmp_path)
    assert got.devices == () and source == "none"


def test_pci_bus_ids_are_normalised():
    assert devices.pci_sysfs_name("00000000:3B:00.0") == "0000:3b:00.0"
    assert devices.pci_sysfs_name("0000:3b:00.0") == "0000:3b:00.0"


def test_device_env_names_only_the_jobs_devices():
    devs = (topology.Device("gpu", 0, 0, uuid="GPU-1"), topology.Device("gpu", 2, 0, uuid="GPU-3"))
    env = device_env([("gpu", 2)], devs)
    assert env["CUDA_VISIBLE_DEVICES"] == "2"  # the index, as Slurm gives it
    assert device_env([("gpu", 2)], devs, uuids=True)["CUDA_VISIBLE_DEVICES"] == "GPU-3"  # [devices] visible
    assert env["ROCR_VISIBLE_DEVICES"] == env["HIP_VISIBLE_DEVICES"] == env["GS_GPUS"] == "2"
    assert env["SLURM_JOB_GPUS"] == "2" and env["SLURM_GPUS_ON_NODE"] == "1"
    no_uuid = device_env([("gpu", 0), ("gpu", 1)], (topology.Device("gpu", 1, 0),), compat=False)
    assert no_uuid["CUDA_VISIBLE_DEVICES"] == "0,1" and "SLURM_JOB_GPUS" not in no_uuid
    assert device_env([], devs) == {}


def test_device_keys_text_round_trips():
    keys = (("fpga", 0), ("gpu", 1), ("gpu", 3))
    assert format_keys(keys) == "fpga:0;gpu:1,3"
    assert parse_keys(format_keys(keys)) == keys


def test_config_share_and_exclusive():
    cfg = parse_config({"devices": {"gpu": {"share": 2, "exclusive": True}}})
    assert cfg.share("gpu") == 2 and cfg.exclusive("gpu") and cfg.share("fpga") == 1
    for bad, why in (
        ({"gpu": {"share": 0}}, "devices.gpu.share = 0"),
        ({"gpu": {"share": -3}}, "devices.gpu.share = -3"),
        ({"gpu": {"exclusive": "yes"}}, "devices.gpu.exclusive"),
        ({"gpu": {"colour": 1}}, "unknown key devices.gpu.colour"),
    ):
        with pytest.raises(ConfigError, match=why) as e:
            parse_config({"devices": bad})
        assert "\n" not in str(e.value)


def test_a_topology_file_with_devices_gets_the_configured_share(tmp_path: Path):
    topo = tmp_path / "topo.toml"
    topo.write_text('[[board]]\nid = 0\ncores = "0"\n\n[[device]]\ntype = "gpu"\nindex = 0\nboard = 0\n')
    conf = tmp_path / "gridsched.toml"
    cfg = parse_config({"machine": {"topology": str(topo)}, "devices": {"gpu": {"share": 3}}}, str(conf))
    m, source = topology.load_with_source(cfg)
    assert [d.share for d in m.devices] == [3] and source == f"declared in {topo}"


def test_a_reload_with_other_devices_says_so():
    from dataclasses import replace

    m = make([board(0, range(2))], [0, 0], devices=[topology.Device("gpu", 0, 0)])
    shared = replace(m, devices=(replace(m.devices[0], share=2),))
    assert "devices: 1 gpu, or their share" in topology.changed_map(shared, m)
