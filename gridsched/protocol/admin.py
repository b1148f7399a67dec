"""Who administers a spool: root, and the user who owns the spool's directory.

A personal spool is its user's, so that user is its admin; a system spool is
root's.  Admin requests (reload, drain, undrain) are refused to anyone else,
by the commands (one line, non-zero exit) and again by the daemon.  Reservations
are the admins' too, and of the users the configuration names
(``reservations.users``, :mod:`gridsched.protocol.limits`).
Standard library only: every command imports it.
"""

from __future__ import annotations

import os
from pathlib import Path


def admin_uids(spool_root: str | Path) -> frozenset[int]:
    """The uids that administer the spool at ``spool_root``: root and the owner of its directory."""
    try:
        owner = os.stat(spool_root).st_uid
    except OSError:
        owner = os.geteuid()
    return frozenset({0, owner})


def is_admin(uid: int, spool_root: str | Path) -> bool:
    return uid in admin_uids(spool_root)
