"""Why pending jobs wait: the daemon's words for each reason the core gives.

gstat showing them for jobs in the daemon is tested in process, on a driven clock, in test_reasons_driven.py.
"""

from __future__ import annotations


def test_the_daemon_words_each_reason_the_core_gives():
    from types import SimpleNamespace

    from gridsched.core.placement import Request
    from gridsched.core.types import Wait, WaitKind
    from gridsched.daemon import reasons

    rec = SimpleNamespace(place=Request(5, "board"), begin=None)
    words = {
        Wait(WaitKind.NEVER_FITS, what="cores", asks=12, has=8): (
            "can never start with the cores of this machine: it asks for 12, 8 are in service (see gctl topology)"
        ),
        Wait(WaitKind.NEVER_FITS, what="placement", asks=5, has=4): (
            "can never start with the cores of this machine: it asks for 5 cores with --place board, "
            "and no board has more than 4 in service (see gctl topology)"
        ),
        Wait(WaitKind.NEVER_FITS, what="matlab", asks=3, has=2): (
            "can never start: it asks for matlab=3, the machine has matlab=2"
        ),
        Wait(WaitKind.NEVER_FITS, what="unknown", text="nope"): "can never start: the machine has no resource nope",
        Wait(WaitKind.DRAINED, cores=frozenset({4, 5, 6, 7})): (
            "waiting for cores, while cores 4-7 are drained (see gctl topology)"
        ),
        Wait(WaitKind.RESERVATION, resv=9): "Reservation: waiting for reservation 9 to be activated",
        Wait(WaitKind.RESOURCES, resv=9): "Resources: waiting for room in reservation 9",
        Wait(WaitKind.DEPENDENCY, "waiting for dependency afterok:3: job 3 is RUNNING"): (
            "waiting for dependency afterok:3: job 3 is RUNNING"
        ),
    }
    for wait, text in words.items():
        assert reasons.text(rec, wait) == text  # type: ignore[arg-type]
    from gridsched.core.devices import DeviceAsk

    gpu = SimpleNamespace(place=None, begin=None, dev_asks=(DeviceAsk("gpu", 3, "H100"),))
    for wait in (
        Wait(WaitKind.NEVER_FITS, what="device:gpu:H100", asks=3, has=2),
        Wait(WaitKind.NEVER_FITS, what="unknown", text="device:gpu:H100"),
    ):
        assert reasons.text(gpu, wait) == (  # type: ignore[arg-type]
            "can never start: --gpus H100:3: the machine does not have these devices (gctl topology)"
        )


LICENCE = """
[scheduler]
policy = "easy"
[jobs]
kill_grace = "1s"
[machine]
cores = 4
[resources.floating]
matlab = 2
[daemon]
autostart = false
"""
