"""One handler per request kind, dispatched by an exhaustive match on the typed request.

Every handler receives a :class:`~.context.Context` (what it may see of the
daemon and ask of it), a request :func:`gridsched.protocol.requests.parse` has
checked, and the envelope it came in (its sender as the kernel says); it
returns :class:`~.context.Changed`, or refuses the request for a reason that
depends on the daemon's state by raising
:class:`gridsched.protocol.requests.Refused`.
"""

from __future__ import annotations

from typing import assert_never

from gridsched.daemon.handlers import (
    alter,
    cancel,
    drain,
    hold,
    release,
    reload,
    requeue,
    resume,
    resv_alter,
    resv_create,
    resv_delete,
    submit,
    tune,
    undrain,
)
from gridsched.daemon.handlers import yield_ as yield_handler
from gridsched.daemon.handlers.context import Actions, Changed, Context, RefusedInPart
from gridsched.protocol import requests as rq

__all__ = ["Actions", "Changed", "Context", "RefusedInPart", "handle"]


def handle(ctx: Context, rcv: rq.Received) -> Changed:
    """Serve ``rcv`` by the handler of its kind; what it changed."""
    req = rcv.request
    match req:
        case rq.Submit():
            return submit.handle(ctx, req, rcv)
        case rq.Cancel():
            return cancel.handle(ctx, req, rcv)
        case rq.Hold():
            return hold.handle(ctx, req, rcv)
        case rq.Release():
            return release.handle(ctx, req, rcv)
        case rq.Reload():
            return reload.handle(ctx, req, rcv)
        case rq.Tune():
            return tune.handle(ctx, req, rcv)
        case rq.Drain():
            return drain.handle(ctx, req, rcv)
        case rq.Undrain():
            return undrain.handle(ctx, req, rcv)
        case rq.Yield():
            return yield_handler.handle(ctx, req, rcv)
        case rq.Resume():
            return resume.handle(ctx, req, rcv)
        case rq.ResvCreate():
            return resv_create.handle(ctx, req, rcv)
        case rq.ResvDelete():
            return resv_delete.handle(ctx, req, rcv)
        case rq.ResvAlter():
            return resv_alter.handle(ctx, req, rcv)
        case rq.Alter():
            return alter.handle(ctx, req, rcv)
        case rq.Requeue():
            return requeue.handle(ctx, req, rcv)
        case _:
            assert_never(req)
