"""Why a job's process could not be started: its script, its interpreter or its shell, in words for its owner."""

from __future__ import annotations

import errno


def why(script: str, shell: bool, e: OSError) -> str:
    """Why the job's script (or, with ``shell``, the shell that runs it) could not be run, as the job's owner
    found it."""
    if shell:  # found out as the owner: the daemon never looks at a path the user named
        return _shell_problem(script, e)
    if e.errno == errno.ENOENT:
        interp = _interpreter(script)
        return f"interpreter {interp!r} not found" if interp else "script not found"
    if e.errno == errno.EACCES:
        return "permission denied (script or interpreter not executable)"
    if e.errno == errno.ENOEXEC:
        return "not an executable script"
    return e.strerror or str(e)


def _shell_problem(shell: str, e: OSError) -> str:
    """Why the shell that was to run a script without #! could not (as the job's owner found it)."""
    from gridsched.protocol.text import shown

    name = shown(shell)
    name = name if len(name) <= 200 else name[:197] + "..."
    if e.errno in (errno.ENOENT, errno.ENOTDIR):
        interp = _interpreter(shell)
        return f"shell {name}: its interpreter {interp!r} not found" if interp else f"shell {name} not found"
    if e.errno == errno.EACCES:
        return f"shell {name}: permission denied (not an executable file the job's owner may run)"
    if e.errno == errno.ENOEXEC:
        return f"shell {name}: not an executable file"
    return f"shell {name}: {e.strerror or e}"


def _interpreter(script: str) -> str | None:
    try:
        with open(script, "rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    if first.startswith(b"#!"):
        parts = first[2:].strip().split()
        return parts[0].decode(errors="replace") if parts else None
    return None
