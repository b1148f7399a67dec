"""The REASON codes gstat shows, one for each kind of wait the core gives.

Selecting jobs (gdel, ghold, grls -u/-n/-s and array ranges) and gstat's REASON, --start and --format for
jobs in the daemon are tested in process, on a driven clock, in test_select_driven.py.
"""

from __future__ import annotations

import time


def test_every_reason_the_daemon_words_has_its_code():
    """The REASON code gstat shows is the one the table gives for the kind the core said, for every kind."""
    from types import SimpleNamespace

    from gridsched.core import eligible
    from gridsched.core.placement import Request
    from gridsched.core.types import Wait, WaitKind
    from gridsched.daemon import reasons
    from gridsched.protocol.reason_codes import CODES, code

    t = time.time() + 3600
    rec = SimpleNamespace(place=Request(5, "board"), begin=t)
    waits = [
        Wait(WaitKind.RESOURCES),
        Wait(WaitKind.RESOURCES, resv=9),
        Wait(WaitKind.RESOURCES, what="cores", asks=4, has=8, free=2),
        Wait(WaitKind.RESOURCES, what="device:gpu:H100", asks=2, has=4, free=0),
        Wait(WaitKind.LICENSES, what="matlab", asks=1, has=2, free=0),
        Wait(WaitKind.PRIORITY),
        Wait(WaitKind.DRAINED, cores=frozenset({4, 5})),
        Wait(WaitKind.DRAINED, cores=frozenset({4, 5}), never=True),
        Wait(WaitKind.NEVER_FITS, what="cores", asks=12, has=8),
        Wait(WaitKind.NEVER_FITS, what="placement", asks=5, has=4),
        Wait(WaitKind.NEVER_FITS, what="matlab", asks=3, has=2),
        Wait(WaitKind.NEVER_FITS, what="unknown", text="nope"),
        Wait(WaitKind.BOUND_NEVER, resv=9, what="time"),
        Wait(WaitKind.BOUND_NEVER, resv=9, what="resv"),
        Wait(WaitKind.RESERVATION, resv=9),
        Wait(WaitKind.BEGIN_TIME, eligible.not_before(t)),
        Wait(WaitKind.DEPENDENCY, "waiting for dependency afterok:3: job 3 is RUNNING"),
        Wait(WaitKind.DEPENDENCY, "singleton: another job named 'x' is queued or running"),
        Wait(WaitKind.DEPENDENCY_NEVER, "dependency never satisfied: afterok:3: job 3 ended FAILED"),
        Wait(WaitKind.ARRAY_LIMIT, "array 7: 2 tasks already running (%2)"),
        Wait(
            WaitKind.CPU_LIMIT,
            "user core limit: alice's jobs hold 8 cores; 4 more would be over the 10 a user may hold",
        ),
    ]
    assert {w.kind for w in waits} == set(WaitKind) - {WaitKind.HELD}
    assert set(CODES) == {k.value for k in WaitKind}  # every kind has its row
    for w in waits:
        text = reasons.text(rec, w)  # type: ignore[arg-type]
        assert code("PENDING", text) == CODES[w.kind.value][0], text
    # a held job's reason is its hold's (gridsched.daemon.handlers.hold)
    from gridsched.daemon.handlers.hold import BY_ADMIN, BY_OWNER

    assert code("HELD", BY_OWNER) == "JobHeldUser" and code("HELD", BY_ADMIN) == "JobHeldAdmin"
