"""The refusal of a submission (:class:`SubmitError`, one line, with the exit status gsub gives) and the
exit status of a bad option value (:data:`USAGE`).  Importable from :mod:`gridsched.submission.submit` too."""

from __future__ import annotations

USAGE = 2  # exit status of a bad option value (as ExitCode.USAGE)


class SubmitError(Exception):
    """A submission that is refused; ``code`` is the exit status gsub gives."""

    def __init__(self, msg: str, code: int = 1) -> None:
        super().__init__(msg)
        self.code = code


class ScriptError(SubmitError):
    """A script that cannot be submitted; the message names it."""
