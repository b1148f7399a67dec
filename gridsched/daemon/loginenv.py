"""The owner's login environment, for a job submitted with --get-user-env (as sbatch's).

Slurm reads it by running ``su - USER -c env``; here the job's shepherd,
already running as the job's owner in the job's working directory, runs the
owner's login shell from the password database as ``SHELL -l -c 'env -0'``
(``S`` mode: without ``-l``) in ``HOME``, with a login's few variables, its
standard input empty and its errors discarded, in a session of its own that
is killed whole when the timeout passes.  The job's own environment (what it
was submitted with, and what gridsched sets) goes over what the shell
printed.  On a failure or timeout the caller keeps the submitting
environment and says so in one line on the job's standard error.
"""

from __future__ import annotations

import os
import pwd
import signal
import subprocess

DROPPED = frozenset({"_", "SHLVL", "PWD", "OLDPWD"})  # the shell's own, not the login's
MAX_OUTPUT = 4 << 20


class LoginEnvError(Exception):
    pass


def login_env(timeout: float, login: bool = True) -> dict[str, str]:
    """The environment the current user's login shell sets up; raises :class:`LoginEnvError` saying why not."""
    pw = pwd.getpwuid(os.getuid())
    shell = pw.pw_shell or "/bin/sh"
    home = pw.pw_dir or "/"
    env = {
        "HOME": home,
        "USER": pw.pw_name,
        "LOGNAME": pw.pw_name,
        "SHELL": shell,
        "PATH": "/usr/local/bin:/usr/bin:/bin",
    }
    argv = [shell, "-l", "-c", "env -0"] if login else [shell, "-c", "env -0"]
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=home if os.path.isdir(home) else "/",
            env=env,
            close_fds=True,
            start_new_session=True,
        )
    except OSError as e:
        raise LoginEnvError(f"cannot run the login shell {shell}: {e.strerror}") from None
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise LoginEnvError(f"the login shell {shell} took longer than {timeout:g} s") from None
    _kill(proc)  # what it left running
    if proc.returncode != 0:
        raise LoginEnvError(f"the login shell {shell} exited {proc.returncode}")
    if len(out) > MAX_OUTPUT:
        raise LoginEnvError(f"the login shell {shell} printed more than {MAX_OUTPUT} bytes")
    got: dict[str, str] = {}
    for item in out.split(b"\0"):
        name, eq, value = item.partition(b"=")
        if eq and name and name.decode(errors="replace") not in DROPPED:
            got[os.fsdecode(name)] = os.fsdecode(value)
    if not got:
        raise LoginEnvError(f"the login shell {shell} printed no environment")
    return got


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.wait(1.0)
    except subprocess.TimeoutExpired:
        pass


def with_login_env(job_id: int, user_env: tuple[int, bool, str], own: dict[str, str]) -> dict[str, str]:
    """--get-user-env (``user_env``: the timeout, whether a login shell, a PATH prefix): the owner's login
    environment with the job's own (``own``) over it; on failure the job's own alone, said in one line on the
    job's standard error (its descriptor 2)."""
    timeout, login, path_prefix = user_env
    try:
        got = login_env(timeout, login)
        env = {**got, **own}
        if path_prefix and got.get("PATH"):
            env["PATH"] = path_prefix + got["PATH"]
        return env
    except (LoginEnvError, OSError, KeyError) as e:
        msg = f"gridsched: job {job_id}: --get-user-env: {e}: the job runs with the submitting environment\n"
        try:
            os.write(2, msg.encode(errors="replace"))
        except OSError:
            pass
        return own
