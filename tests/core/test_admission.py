"""Admission (core/admission.py): the one answer to "can this job ever run here", in one line."""

from __future__ import annotations

from gridsched.core.admission import never_runs
from gridsched.core.model import DeviceAsk, Request
from tests.core.test_devices import four_gpus

G = 1 << 30


def test_a_job_that_fits_is_admitted():
    m, _ = four_gpus()
    assert never_runs(m, 64 * G, 3600, ncpus=8, walltime=3600, mem=64 * G, devices=((DeviceAsk("gpu", 4),),)) is None


def test_each_resource_refuses_in_its_words():
    m, _ = four_gpus()
    assert never_runs(m, None, 3600, ncpus=9, walltime=60) == "asks for 9 cores, the machine has 8"
    assert never_runs(m, 16 * G, 3600, ncpus=1, walltime=60, mem=32 * G) == (
        "can never run: it asks for 32G of memory, the machine has 16G"
    )
    assert never_runs(m, None, 3600, ncpus=1, walltime=60, devices=((), (DeviceAsk("gpu", 5),))) == (
        "can never run: --gpus 5: the machine has 4 GPUs"
    )
    assert never_runs(m, None, 3600, ncpus=1, walltime=7200) == "walltime longer than the maximum"
    assert never_runs(m, None, 3600, ncpus=5, walltime=60, placement=Request(5, "board")) == (
        "can never run: --place board: no board has 5 cores (largest: 4)"
    )


def test_an_unknown_memory_refuses_no_memory_ask():
    m, _ = four_gpus()
    assert never_runs(m, None, 3600, ncpus=1, walltime=60, mem=1 << 50) is None


def test_the_first_reason_is_the_one_given():
    m, _ = four_gpus()
    assert never_runs(m, 1 * G, 60, ncpus=9, walltime=7200, mem=2 * G) == "asks for 9 cores, the machine has 8"
