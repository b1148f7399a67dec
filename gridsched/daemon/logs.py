"""The daemon's log file: one line per record, whatever a user wrote into a message."""

from __future__ import annotations

import logging

from gridsched.protocol import requests as rq
from gridsched.protocol.spool import Spool


class OneLine(logging.Formatter):
    """Each record's message on one line, whatever a user wrote into it (its traceback, if any, follows)."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = rq.safe(record.message, 4000)
        return super().formatMessage(record)


def setup(spool: Spool, level: str) -> None:
    """The daemon's log: ``spool/gschedd.log``, one line per record, at ``level``."""
    root = logging.getLogger("gschedd")
    root.setLevel(level.upper())
    if not root.handlers:
        h = logging.FileHandler(spool.log)
        h.setFormatter(OneLine("%(asctime)s %(levelname)s %(message)s"))
        root.addHandler(h)
