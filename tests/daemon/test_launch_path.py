"""The per-job path: the shepherds' starter (its messages, a real daemon whose starter dies) and the private
directory's commands."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import threading
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from gridsched.daemon import jobtmp, launch, procs, starter
from gridsched.daemon.spawn import Processes
from tests.conftest import wait_for
from tests.daemon.launches import job_launch, spawn_now


def test_a_message_larger_than_the_socket_buffer_arrives_whole_with_its_descriptor():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    r, w = os.pipe()
    data = os.urandom(1 << 20)  # beyond the socket's buffer: sent in pieces, the descriptor with the first
    got: list[tuple[bytes, list[int]]] = []
    t = threading.Thread(target=lambda: got.append(starter.recv_message(b)))
    t.start()
    try:
        starter.send_message(a, data, [w])
        t.join(30)
        assert not t.is_alive()
        body, fds = got[0]
        assert body == data
        assert len(fds) == 1
        os.write(fds[0], b"x")  # the same pipe, through the descriptor that came with the message
        assert os.read(r, 1) == b"x"
        os.close(fds[0])
    finally:
        for fd in (r, w):
            os.close(fd)
        a.close()
        b.close()


def test_the_end_of_the_socket_is_an_end_and_a_huge_length_is_refused():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        a.sendall(starter.HEADER.pack(starter.MAX_REQUEST + 1))
        with pytest.raises(ValueError):
            starter.recv_message(b)
        a.close()
        with pytest.raises(EOFError):
            starter.recv_message(b)
    finally:
        a.close()
        b.close()


def _starter_of(gs) -> psutil.Process:
    def find() -> psutil.Process | None:
        for p in psutil.Process(gs.proc.pid).children():
            try:
                if "gridsched.daemon.starter" in " ".join(p.cmdline()):
                    return p
            except psutil.Error:
                continue
        return None

    return wait_for(find, 15, "the daemon's shepherds' starter")


def test_a_killed_starter_leaves_its_running_job_alone_and_is_started_again(gs):
    """The job's shepherd, armed, outlives its starter; the daemon still collects how the job ended, starts the
    next job with a new starter, and the starter ends with the daemon."""
    go = gs.work / "go"
    a = gs.gsub("--wrap", f"i=0; while [ ! -e {go} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; exit 3")
    gs.wait_state(a, "RUNNING")
    first = _starter_of(gs)
    # the job's shepherd is the starter's child, not the daemon's (RUNNING is shown from the decision to start)
    wait_for(first.children, 10, "the job's shepherd under the starter")
    pid_file = gs.spool / "jobs" / str(a) / "seg-1.pid"  # armed until it has written it: then it outlives the starter
    wait_for(lambda: pid_file.exists() and json.loads(pid_file.read_text()).get("job"), 10, "the job under way")
    first.send_signal(signal.SIGKILL)
    go.touch()
    assert gs.wait_state(a, "FAILED")["exit_code"] == 3
    wait_for(lambda: not first.is_running(), 15, "the dead starter to be collected by the daemon")
    b = gs.gsub("--wrap", "exit 4")
    assert gs.wait_state(b, "FAILED")["exit_code"] == 4
    second = _starter_of(gs)
    assert second.pid != first.pid
    gs.kill9()
    second.wait(10)  # PR_SET_PDEATHSIG: it does not outlive the daemon
    assert not second.is_running()


class _Died:
    """A starter that died while it forked the shepherd."""

    sock = None
    waiting: tuple = ()

    def send(self, spec, meanwhile=None):
        raise ConnectionError("the shepherds' starter failed: gone")

    def reap(self) -> None:
        pass


def _launch(job_dir) -> launch.Launch:
    return launch.Launch(
        job_id=7, segment=2, job_dir=str(job_dir), script="/bin/true", args=(), workdir=str(job_dir),
        stdout="/dev/null", stderr="/dev/null", append=False, env={}, cpus=frozenset({0}),
        uid=os.getuid(), gid=os.getgid(), user="u",
    )  # fmt: skip


def test_a_shepherd_armed_before_its_starter_died_is_adopted_else_the_start_fails(tmp_path):
    ex = Processes(selectors.DefaultSelector())
    ex.starter = _Died()  # type: ignore[assignment]
    spec = _launch(tmp_path)
    with pytest.raises(ConnectionError):
        spawn_now(ex, spec)  # no pid file: it never ran (a shepherd not armed dies with its starter)
    me = os.getpid()  # stands for the shepherd: a live process with its start time
    launch.pid_file(tmp_path, 2).write_text(json.dumps({"pid": me, "ticks": procs.start_ticks(me)}))
    assert spawn_now(ex, spec) == (me, procs.start_ticks(me))


def test_a_private_directory_has_each_command_under_its_name_and_mpi_s_can_be_taken_out(tmp_path):
    """The commands of a job's bin/ are one file under all their names (links: one inode a job): each name runs
    its own module, and taking mpirun and mpiexec out (an installed MPI is on the job's PATH) leaves the others."""
    priv = jobtmp.create(str(tmp_path), 9, os.getuid(), os.getgid(), "h", 2, 2)
    assert len({os.stat(Path(priv.root) / name).st_ino for name in jobtmp.BIN_NAMES}) == 1
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GS_", "GRIDSCHED_", "SLURM_", "PBS_"))}
    env["GRIDSCHED_SPOOL"] = str(tmp_path / "no-spool")
    names = [name.removeprefix("bin/") for name in jobtmp.BIN_NAMES]
    for name in names:
        path = Path(priv.bin) / name
        assert os.access(path, os.X_OK)
        r = subprocess.run([str(path), "--version"], capture_output=True, text=True, env=env, timeout=60)
        # what srun, mpirun and mpiexec say outside a job; the in-job commands answer otherwise
        if name in jobtmp.IN_JOB_NAMES:
            assert "not inside a job" not in r.stderr, (name, r.stderr)
        else:
            assert r.stderr.startswith(f"{name}: error: not inside a job"), (name, r.stderr)
    assert {"srun", *jobtmp.MPI_NAMES, *jobtmp.IN_JOB_NAMES} == set(names)
    mpi = tmp_path / "mpi"
    mpi.mkdir()
    (mpi / "mpirun").write_text("#!/bin/sh\n")
    (mpi / "mpirun").chmod(0o755)
    assert jobtmp.use_installed_mpi(priv.root, str(mpi))
    left = sorted(os.listdir(priv.bin))
    assert left == sorted(n for n in names if n not in jobtmp.MPI_NAMES)
    assert "gridsched.job.launcher" in (Path(priv.bin) / "srun").read_text()
    jobtmp.remove(priv.root, os.getuid())
    assert not os.path.exists(priv.root)


JOB = """#!/bin/sh
{ echo "$$ $(cut -d' ' -f5 /proc/$$/stat)"
  # read by the shell itself (builtins: a command's grep of the shell's status may find it mid-fork, signals
  # blocked for the fork)
  while read -r k v; do case $k in SigIgn:|SigBlk:|Cpus_allowed_list:) printf '%s\t%s\n' "$k" "$v";; esac
  done < /proc/$$/status; umask; pwd
  grep -m1 -oE '(bind|default|prefer|interleave)[^ ]*' /proc/$$/numa_maps || echo none
} > seen.txt
while [ ! -e go ]; do sleep 0.01; done
exit 5
"""


@pytest.mark.parametrize("direct", [True, False], ids=["spawned", "forked"])
def test_the_job_s_process_is_prepared_alike_spawned_or_forked_by_its_shepherd(tmp_path, monkeypatch, direct):
    """Whether the job's process is spawned from the shepherd (it inherits what it needs) or is a fork of it
    (it prepares itself): it leads its own process group, every signal is at its default and none blocked
    (the shepherd ignores several), it runs on its cores with its memory bound to its boards' NUMA nodes and
    its umask in its directory, the pid file names it, it is in each of the job's cgroups and the shepherd in
    none, and its status is collected."""
    if not direct:
        monkeypatch.setattr(launch, "_direct", lambda spec, cg: False)
    cpu = sorted(os.sched_getaffinity(0))[-1]
    numa = os.path.exists("/sys/devices/system/node/node0")
    spec = job_launch(tmp_path, JOB, job_id=7, cpus=frozenset({cpu}), umask=0o027, mem_nodes=(0,) if numa else ())
    work = Path(spec.workdir)
    shepherd = launch.spawn(spec)
    try:
        seen = wait_for(lambda: _lines(work / "seen.txt", 7), 20, "the job to report").splitlines()
        info = wait_for(lambda: _naming_the_job(launch.pid_file(tmp_path, 1)), 20, "the pid file to name the job")
        job, group = (int(x) for x in seen[0].split())
        assert info["pid"] == shepherd and info["job"] == job == group
        fields = dict(line.split(":\t") for line in seen[1:4])
        assert int(fields["SigIgn"], 16) & ((1 << 31) - 1) == 0, fields  # glibc may keep its own two above
        assert int(fields["SigBlk"], 16) == 0, fields
        assert fields["Cpus_allowed_list"] == str(cpu)
        assert seen[4:6] == ["0027", str(work)]
        assert seen[6] == ("bind:0" if numa else "none"), seen
        for path in info.get("cgroups", []):
            members = Path(path, "cgroup.procs").read_text().split()
            assert str(job) in members and str(shepherd) not in members, path
    finally:
        (work / "go").touch()
        _, status = os.waitpid(shepherd, 0)
    assert os.WEXITSTATUS(status) == 0
    assert json.loads(launch.exit_file(tmp_path, 1).read_text())["exit_code"] == 5


def test_a_job_ended_before_its_pid_was_written_leaves_the_pid_file_naming_its_shepherd(tmp_path, monkeypatch):
    """A short job (spawned from the shepherd) has ended before its pid would be written into the pid file: the
    pid file, written once before the job ran, keeps naming the shepherd alone, and the job's status is the
    one collected."""
    spawn_job = launch._spawn_job

    def ended_at_once(spec, notes):
        child, status, why = spawn_job(spec, notes)
        if child:
            os.waitid(os.P_PID, child, os.WEXITED | os.WNOWAIT)  # until it has ended, left to be reaped
        return child, status, why

    monkeypatch.setattr(launch, "_spawn_job", ended_at_once)
    spec = job_launch(tmp_path, "#!/bin/sh\nexit 3\n")
    shepherd = launch.spawn(spec)
    _, status = os.waitpid(shepherd, 0)
    assert os.WEXITSTATUS(status) == 0
    info = json.loads(launch.pid_file(tmp_path, 1).read_text())
    assert info["pid"] == shepherd and "job" not in info, info
    assert json.loads(launch.exit_file(tmp_path, 1).read_text())["exit_code"] == 3


def _naming_the_job(path: Path) -> dict | None:
    info = json.loads(path.read_text())
    return info if "job" in info else None


def _lines(path: Path, n: int) -> str | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return text if text.count("\n") >= n else None


def test_a_job_inherits_no_descriptor_of_the_daemon_its_starter_or_its_shepherd(gs):
    """The job's open files are its standard ones and its script: none of the pipes and sockets on which the
    daemon, the starter and the shepherds talk (the pipe on which shepherds tell of their jobs' ends)."""
    jid = gs.gsub("--wrap", "for f in /proc/$$/fd/*; do readlink $f; done > fds.out; true")
    assert gs.wait_state(jid, "COMPLETED", "FAILED")["state"] == "COMPLETED", gs.log()
    fds = (gs.work / "fds.out").read_text().split()
    assert fds and not [f for f in fds if f.startswith(("pipe:", "socket:", "anon_inode:"))], fds


def test_an_installed_mpi_is_an_executable_file_on_the_path_relative_entries_from_the_working_directory(
    tmp_path, monkeypatch
):
    """What ``shutil.which`` finds: a name on one of PATH's directories that the owner may execute and that is
    not a directory; a relative entry is looked up from the working directory."""
    plain, folder, mpi, rel = (tmp_path / n for n in ("plain", "folder", "mpi", "rel"))
    for d in (plain, folder, mpi, rel / "bin"):
        d.mkdir(parents=True)
    (plain / "mpirun").write_text("#!/bin/sh\n")  # not executable
    (folder / "mpiexec").mkdir(mode=0o755)  # a directory, however executable
    assert not jobtmp.has_mpi(f"{plain}:{folder}::{plain}")
    assert not jobtmp.has_mpi("")
    (mpi / "mpiexec").write_text("#!/bin/sh\n")
    (mpi / "mpiexec").chmod(0o755)
    assert jobtmp.has_mpi(f"{plain}:{folder}:{mpi}")
    (rel / "bin" / "mpirun").write_text("#!/bin/sh\n")
    (rel / "bin" / "mpirun").chmod(0o755)
    monkeypatch.chdir(rel)
    assert jobtmp.has_mpi(f"{plain}:bin")
    monkeypatch.chdir(tmp_path)
    assert not jobtmp.has_mpi(f"{plain}:bin")


def _job_in(job_dir: Path, job_id: int) -> launch.Launch:
    job_dir.mkdir()
    (job_dir / "job.sh").write_text("#!/bin/sh\necho ran >> ran\n")
    (job_dir / "job.sh").chmod(0o755)
    return replace(
        _launch(job_dir), job_id=job_id, segment=1, script=str(job_dir / "job.sh"), env={"PATH": "/usr/bin:/bin"}
    )


def test_launches_are_answered_later_in_the_order_sent_and_the_answer_wakes_the_loop(tmp_path):
    """The daemon sends its starts without waiting for the starter: each answer (the shepherd's pid) comes later,
    oldest first, and the starter's socket in the loop's selector says when one is there."""
    sel = selectors.DefaultSelector()
    ex = Processes(sel)
    ex.start()
    try:
        specs = [_job_in(tmp_path / str(i), i) for i in (1, 2)]
        assert [ex.begin(spec) for spec in specs] == [None, None]  # sent, not waited for
        assert ("started", None) in [key.data for key, _ in sel.select(10)]
        got = ex.replies(block=True)
        assert [spec for spec, _ in got] == specs
        for spec, answer in got:
            assert not isinstance(answer, OSError)
            pid, ticks = answer
            wait_for(launch.exit_file(spec.job_dir, 1).exists, 15, "the job to end")
            assert json.loads(launch.pid_file(spec.job_dir, 1).read_text())["pid"] == pid
            assert (Path(spec.job_dir) / "ran").read_text() == "ran\n"
            assert ticks is not None
        assert ex.replies() == [] and ex.replies(block=True) == []  # none owed
    finally:
        assert ex.starter is not None
        ex.starter.stop()


def test_a_starter_killed_with_answers_owed_fails_each_of_those_starts(tmp_path):
    """Launches sent to a starter that dies before it reads them: each start fails (no shepherd was armed), its job
    ran nothing, and the next launch gets a new starter."""
    ex = Processes(selectors.DefaultSelector())
    ex.start()
    assert ex.starter is not None and ex.starter.proc is not None
    first = ex.starter.proc
    try:
        os.kill(first.pid, signal.SIGSTOP)  # it reads nothing more
        specs = [_job_in(tmp_path / str(i), i) for i in (1, 2)]
        assert [ex.begin(spec) for spec in specs] == [None, None]
        os.kill(first.pid, signal.SIGKILL)
        got = ex.replies(block=True)
        assert [spec for spec, _ in got] == specs
        assert all(isinstance(answer, ConnectionError) for _, answer in got)
        for spec in specs:
            assert not (Path(spec.job_dir) / "ran").exists()
            assert not launch.pid_file(spec.job_dir, 1).exists()
        again = _job_in(tmp_path / "3", 3)
        pid, _ticks = spawn_now(ex, again)
        assert ex.starter.proc is not None and ex.starter.proc.pid != first.pid
        wait_for(launch.exit_file(again.job_dir, 1).exists, 15, "the next job to end")
    finally:
        ex.starter.stop()


def test_a_daemon_killed_while_a_start_is_unanswered_runs_the_job_once_after_its_restart(gs):
    """The start is committed and sent, the starter has not answered (it is stopped): the daemon is killed.  The
    starter dies with it, the restarted daemon finds no shepherd and starts the job again: it runs once, and
    its private directories are gone."""
    trace = gs.root / "trace"
    gs.env["GRIDSCHED_TRACE"] = str(trace)
    gs.stop()
    gs.start(fork=False)  # a process of its own: it reads GRIDSCHED_TRACE as it starts
    first = gs.gsub("--wrap", "true")
    gs.wait_state(first, "COMPLETED")  # the starter is under way: it has started a shepherd
    st = _starter_of(gs)
    st.send_signal(signal.SIGSTOP)
    ledger = gs.work / "ledger"
    jid = gs.gsub("--wrap", f"echo ran >> {ledger}")

    def sent() -> bool:
        marks = trace.read_text().split("\n") if trace.exists() else []
        return any(m.split()[1:3] == ["d_private_made", str(jid)] for m in marks if len(m.split()) == 4)

    wait_for(sent, 15, "the start to be sent and the job's private directory made")
    gs.kill9()

    def starter_gone() -> bool:  # PR_SET_PDEATHSIG: a stopped starter is killed with the daemon
        try:
            return st.status() == psutil.STATUS_ZOMBIE  # left for its new parent to reap
        except psutil.NoSuchProcess:
            return True

    wait_for(starter_gone, 10, "the starter to die with the daemon")
    assert not ledger.exists()
    gs.start(fork=False)
    assert gs.wait_state(jid, "COMPLETED")["exit_code"] == 0
    assert ledger.read_text() == "ran\n"
    wait_for(lambda: not any(gs.tmp.glob(f"{jobtmp.PREFIX}*")), 15, "the job's private directories to go")


def test_another_job_s_end_is_recorded_while_a_start_waits_for_the_starter(gs):
    """A start's launch is sent without waiting for the starter's answer: while it is owed (the starter is stopped),
    the end of the job in the other slot is recorded; the start is taken up once the starter answers."""
    first = gs.gsub("--wrap", "true")
    gs.wait_state(first, "COMPLETED")  # the starter is under way: it has started a shepherd
    go = gs.work / "go"
    a = gs.gsub("--wrap", f"i=0; while [ ! -e {go} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done")
    gs.wait_state(a, "RUNNING")
    wait_for((gs.spool / "jobs" / str(a) / "seg-1.pid").exists, 15, "the first job's shepherd armed")
    st = _starter_of(gs)
    st.send_signal(signal.SIGSTOP)
    try:
        b = gs.gsub("--wrap", "true")
        gs.wait_state(b, "RUNNING")  # its start committed, its launch sent: the starter reads nothing
        go.touch()
        assert gs.wait_state(a, "COMPLETED")["exit_code"] == 0
        assert gs.job(b)["state"] == "RUNNING"
        assert not (gs.spool / "jobs" / str(b) / "seg-1.pid").exists()  # no shepherd armed yet
    finally:
        st.send_signal(signal.SIGCONT)
    assert gs.wait_state(b, "COMPLETED")["exit_code"] == 0


def test_a_starter_killed_while_no_start_is_owed_is_collected_at_once(gs):
    """Its end wakes the daemon's loop (its socket is one of the loop's): the daemon collects it then, without waiting
    for a job's end or the next start, and starts the next job with a new starter."""
    first = gs.gsub("--wrap", "true")
    gs.wait_state(first, "COMPLETED")
    st = _starter_of(gs)
    st.send_signal(signal.SIGKILL)

    def collected() -> bool:
        try:
            return st.status() != psutil.STATUS_ZOMBIE and not st.is_running()
        except psutil.NoSuchProcess:
            return True

    wait_for(collected, 10, "the daemon to collect its dead starter")
    b = gs.gsub("--wrap", "exit 5")
    assert gs.wait_state(b, "FAILED")["exit_code"] == 5
    assert _starter_of(gs).pid != st.pid
