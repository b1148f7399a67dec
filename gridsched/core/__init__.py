"""The pure scheduling core.

Everything in this package is a function of its arguments: it reads no clock,
file, environment variable or process.  The daemon (real clock) and the
simulator (virtual clock) build a :class:`~gridsched.core.types.Snapshot`,
call :func:`~gridsched.core.policy.schedule`, and carry out the
:class:`~gridsched.core.types.Plan` it returns.
"""
