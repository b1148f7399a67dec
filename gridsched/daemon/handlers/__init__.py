"""One handler per request kind, dispatched by an exhaustive match on the typed request.

Every handler receives a request :func:`gridsched.protocol.requests.parse` has
checked, with its sender as the kernel says; it may refuse it for a reason
that depends on the daemon's state by raising
:class:`gridsched.protocol.requests.Refused`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

from gridsched.daemon.handlers import (
    alter,
    cancel,
    drain,
    hold,
    release,
    reload,
    requeue,
    resume,
    resv_create,
    resv_delete,
    submit,
    tune,
    undrain,
)
from gridsched.daemon.handlers import yield_ as yield_handler
from gridsched.protocol import requests as rq

if TYPE_CHECKING:
    from gridsched.daemon.loop import Daemon


def handle(d: Daemon, rcv: rq.Received) -> None:
    req = rcv.request
    match req:
        case rq.Submit():
            submit.handle(d, rcv, req)
        case rq.Cancel():
            cancel.handle(d, rcv, req)
        case rq.Hold():
            hold.handle(d, rcv, req)
        case rq.Release():
            release.handle(d, rcv, req)
        case rq.Reload():
            reload.handle(d, rcv, req)
        case rq.Tune():
            tune.handle(d, rcv, req)
        case rq.Drain():
            drain.handle(d, rcv, req)
        case rq.Undrain():
            undrain.handle(d, rcv, req)
        case rq.Yield():
            yield_handler.handle(d, rcv, req)
        case rq.Resume():
            resume.handle(d, rcv, req)
        case rq.ResvCreate():
            resv_create.handle(d, rcv, req)
        case rq.ResvDelete():
            resv_delete.handle(d, rcv, req)
        case rq.Alter():
            alter.handle(d, rcv, req)
        case rq.Requeue():
            requeue.handle(d, rcv, req)
        case _:
            assert_never(req)
