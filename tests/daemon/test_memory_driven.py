"""The machine's memory as one scheduled pool, in process: the stub executor, a driven clock.

A declared 8-core machine of 16 GiB (one board of a topology file).  Jobs
ask for their ``mem`` (gsub --mem), or for ``jobs.default_mem_per_cpu``
per core; a job starts only when its memory is free, though cores are.
"""

from __future__ import annotations

from pathlib import Path

from tests.daemon.driven import Driven

GIB = 1 << 30


def config(tmp_path: Path, policy: str = "easy", extra: str = "", reserved: str = "0") -> str:
    topo = tmp_path / "topology.toml"
    topo.write_text('[[board]]\nid = 0\ncores = "0-7"\nmemory = "16G"\nhost_cpus = "0"\n')
    return f"""
[scheduler]
policy = "{policy}"
p = 0.2
threshold = "10s"
[jobs]
kill_grace = "2s"
checkpoint_grace = "5s"
{extra}
[machine]
cores = 8
topology = "{topo}"
memory_reserved = "{reserved}"
[daemon]
autostart = false
"""


def test_two_jobs_whose_memory_exceeds_the_machine_run_one_after_the_other(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(config(tmp_path)))
    a = dr.submit(5, name="A", ncpus=2, walltime=60, mem=10 * GIB)
    b = dr.submit(5, name="B", ncpus=2, walltime=60, mem=10 * GIB)
    small = dr.submit(5, name="S", ncpus=2, walltime=60, mem=4 * GIB)
    assert dr.running(a) and dr.running(small)
    assert dr.state(b) == "PENDING"  # 4 cores are free, 2 GiB of memory
    assert dr.job(b)["reason"] == "Resources: next to start, waits for memory: asks 10G, 2G free now"
    row = next(line for line in dr.command("gstat").stdout.splitlines() if line.split()[0] == str(b))
    assert "Resources" in row.split(), row  # squeue's REASON
    dr.run_until(lambda: dr.state(b) != "PENDING", 30)
    ja, jb = dr.job(a), dr.job(b)
    assert jb["start_time"] >= ja["end_time"]


def test_a_restarted_daemon_counts_the_memory_of_the_jobs_it_finds_running(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(config(tmp_path)))
    a = dr.submit(30, name="A", ncpus=2, walltime=60, mem=10 * GIB)
    b = dr.submit(5, name="B", ncpus=2, walltime=60, mem=10 * GIB, turn=False)  # taken in by the next daemon
    assert dr.running(a)
    dr.restart(stub_daemon)
    assert dr.running(a) and dr.state(b) == "PENDING"
    assert "waits for memory: asks 10G, 6G free now" in dr.job(b)["reason"]


def test_memory_reserved_for_the_system_is_not_handed_out(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(config(tmp_path, reserved="6G")))
    a = dr.submit(5, name="A", ncpus=1, walltime=60, mem=6 * GIB)
    b = dr.submit(5, name="B", ncpus=1, walltime=60, mem=6 * GIB)
    assert dr.running(a) and dr.state(b) == "PENDING"
    assert "asks 6G, 4G free now" in dr.job(b)["reason"]
    big = dr.submit(5, name="big", ncpus=1, walltime=60, mem=12 * GIB)
    dr.run_to(1)
    # refused when it is taken in, in gsub's words (a request written without gsub: the daemon asks what gsub asks)
    assert dr.state(big) == "FAILED"
    assert dr.job(big)["reason"] == (
        "can never run: it asks for 12G of memory, the scheduler hands out 10G "
        "(the machine's 16G less machine.memory_reserved 6G)"
    )


def test_a_job_without_mem_asks_for_the_default_per_core(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(config(tmp_path, extra='default_mem_per_cpu = "3G"')))
    a = dr.submit(5, name="A", ncpus=3, walltime=60)  # 9 GiB
    b = dr.submit(5, name="B", ncpus=3, walltime=60)  # 9 GiB: 7 are free
    c = dr.submit(5, name="C", ncpus=1, walltime=60, mem=GIB)  # its own request, not the default
    assert dr.running(a) and dr.state(b) == "PENDING" and dr.running(c)
    assert "asks 9G, 6G free now" in dr.job(b)["reason"]
    dr.run_until(lambda: dr.running(b), 30)
    assert dr.job(b)["start_time"] >= dr.job(a)["end_time"]


def test_without_a_default_a_job_without_mem_asks_for_none(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(config(tmp_path)))
    a = dr.submit(5, name="A", ncpus=2, walltime=60, mem=16 * GIB)
    b = dr.submit(5, name="B", ncpus=2, walltime=60)
    assert dr.running(a) and dr.running(b)


def test_a_reload_puts_a_new_default_in_force(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(config(tmp_path)))
    a = dr.submit(50, name="A", ncpus=3, walltime=60)
    assert dr.running(a)
    cfg = Path(dr.d.config_path)
    cfg.write_text(cfg.read_text().replace("[jobs]\n", '[jobs]\ndefault_mem_per_cpu = "3G"\n'))
    dr.d.reload()
    b = dr.submit(5, name="B", ncpus=3, walltime=60)  # 9 GiB, and A's 9 GiB are counted now
    assert dr.state(b) == "PENDING"
    assert "asks 9G, 7G free now" in dr.job(b)["reason"]


def test_a_reservation_holds_memory(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(config(tmp_path)))
    rid = dr.resv_create(2, 600, resources={"mem": 12 * 1024})
    dr.run_to(0.5)
    assert dr.resv(rid)["state"] == "ACTIVE"
    a = dr.submit(5, name="A", ncpus=2, walltime=60, mem=6 * GIB)  # 4 GiB are left outside it
    assert dr.state(a) == "PENDING"
    assert "asks 6G, 4G free now" in dr.job(a)["reason"]
    inside = dr.submit(5, name="in", ncpus=2, walltime=60, mem=12 * GIB, reservation=rid)
    assert dr.running(inside)  # its memory is the reservation's
    dr.request("resv_delete", id=rid)
    dr.run_until(lambda: dr.running(a), 10)


def test_preemption_frees_memory_for_the_head(stub_daemon, tmp_path):
    """checkpoint-backfill: E is backfilled into the memory the head C waits for, and is checkpointed
    when C's turn comes (A's walltime end), so that C starts on time."""
    dr = Driven(stub_daemon(config(tmp_path, "checkpoint-backfill")))
    a = dr.submit(11, name="A", ncpus=2, walltime=12, mem=4 * GIB)
    dr.run_to(0.2)
    c = dr.submit(2, name="C", ncpus=2, walltime=60, mem=14 * GIB)
    e = dr.submit(20, name="E", ncpus=2, walltime=30, checkpoint="signal", mem=4 * GIB)
    assert dr.running(a) and dr.state(c) == "PENDING" and dr.running(e)
    assert dr.job(e)["backfilled"]
    dr.run_until(lambda: dr.state(c) in ("RUNNING", "COMPLETED"), 40)
    jc, ja = dr.job(c), dr.job(a)
    assert jc["start_time"] >= ja["end_time"] - 0.01  # A's memory was needed
    assert jc["start_time"] <= ja["start_time"] + 12 + 4  # and C did not wait for E's walltime
    je = dr.job(e)
    assert je["preemptions"] == 1
    dr.run_until(lambda: dr.state(e) == "COMPLETED", 100)
    assert dr.work[e].done == 20


def test_easy_does_not_backfill_into_the_heads_memory(stub_daemon, tmp_path):
    dr = Driven(stub_daemon(config(tmp_path, "easy")))
    a = dr.submit(11, name="A", ncpus=2, walltime=12, mem=4 * GIB)
    dr.run_to(0.2)
    c = dr.submit(2, name="C", ncpus=2, walltime=60, mem=14 * GIB)
    e = dr.submit(20, name="E", ncpus=2, walltime=30, checkpoint="signal", mem=4 * GIB)
    assert dr.running(a) and dr.state(c) == "PENDING" and dr.state(e) == "PENDING"
    assert dr.job(e)["reason"].startswith("Priority")


# The scenario of test_preemption_frees_memory_for_the_head as an SWF trace (field 10: KiB per processor)
SWF = """; MaxProcs: 8
1 0 -1 11 2 -1 -1 2 12 2097152 1 1 1 -1 -1 -1 -1 -1
2 1 -1 2 2 -1 -1 2 60 7340032 1 1 1 -1 -1 -1 -1 -1
3 1 -1 20 2 -1 -1 2 30 2097152 1 1 1 -1 -1 -1 -1 -1
"""


def test_daemon_and_gsim_agree_on_memory(stub_daemon, tmp_path):
    import csv

    from click.testing import CliRunner

    from gridsched.cli.gsim import main

    trace, out = tmp_path / "mem.swf", tmp_path / "mem.csv"
    trace.write_text(SWF)
    args = ["run", str(trace), "--policy", "checkpoint-backfill", "--p", "0.2", "--threshold", "10s"]
    args += ["--checkpoint-overhead", "0", "--memory", "--machine-memory", "16G", "--jobs-out", str(out)]
    res = CliRunner().invoke(main, args, prog_name="gsim")
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(out.open()))
    names = {"1": "A", "2": "C", "3": "E"}
    sim_order = [names[r["id"]] for r in sorted(rows, key=lambda r: (float(r["start"]), int(r["id"])))]
    sim_ckpts = {names[r["id"]]: int(r["checkpoints"]) for r in rows}

    dr = Driven(stub_daemon(config(tmp_path, "checkpoint-backfill")))
    a = dr.submit(11, name="A", ncpus=2, walltime=12, mem=4 * GIB)
    dr.run_to(0.2)
    c = dr.submit(2, name="C", ncpus=2, walltime=60, mem=14 * GIB)
    e = dr.submit(20, name="E", ncpus=2, walltime=30, checkpoint="signal", mem=4 * GIB)
    dr.run_until(lambda: dr.state(e) == "COMPLETED", 100)
    jobs = {n: dr.job(i) for n, i in (("A", a), ("C", c), ("E", e))}
    order = sorted(jobs, key=lambda n: (jobs[n]["start_time"], jobs[n]["id"]))
    assert order == sim_order == ["A", "E", "C"]
    assert {n: j["checkpoints"] for n, j in jobs.items()} == sim_ckpts == {"A": 0, "C": 0, "E": 1}


def test_a_suspended_job_keeps_its_memory(stub_daemon, tmp_path):
    """checkpoint-backfill, E in suspend mode: it is suspended for the head C, which needs its cores, and
    keeps its 10 GiB while it is stopped (its processes stay in memory, as Slurm keeps a suspended job's):
    F, asking for 8 GiB of the 16, waits until E has ended, though it has a core; E is continued when C ends."""
    dr = Driven(stub_daemon(config(tmp_path, "checkpoint-backfill")))
    a = dr.submit(11, name="A", ncpus=4, walltime=12)
    dr.run_to(0.2)
    c = dr.submit(2, name="C", ncpus=7, walltime=60)
    e = dr.submit(20, name="E", ncpus=2, walltime=30, checkpoint="suspend", mem=10 * GIB)
    assert dr.running(a) and dr.state(c) == "PENDING" and dr.running(e)
    dr.run_until(lambda: dr.state(c) == "RUNNING", 40)
    assert dr.state(e) == "SUSPENDED"
    f = dr.submit(2, name="F", ncpus=1, walltime=60, mem=8 * GIB)
    assert dr.state(f) == "PENDING", "a core is free, but 6 GiB of memory"
    dr.run_to(dr.now - dr.t0 + 1)
    assert dr.state(f) == "PENDING" and dr.state(e) == "SUSPENDED"
    dr.run_until(lambda: dr.state(e) == "RUNNING", 40)  # continued once C has ended: it needs no memory anew
    assert dr.state(c) == "COMPLETED" and dr.state(f) == "PENDING"
    dr.run_until(lambda: dr.state(f) != "PENDING", 60)
    assert dr.job(f)["start_time"] >= dr.job(e)["end_time"] - 0.01


def test_a_job_that_would_keep_its_memory_is_not_backfilled_into_the_heads_memory(stub_daemon, tmp_path):
    """Suspending E would free none of the memory the head C waits for: E is not backfilled on the promise
    of its preemption (with checkpoint signal it is: test_preemption_frees_memory_for_the_head)."""
    dr = Driven(stub_daemon(config(tmp_path, "checkpoint-backfill")))
    a = dr.submit(11, name="A", ncpus=2, walltime=12, mem=4 * GIB)
    dr.run_to(0.2)
    c = dr.submit(2, name="C", ncpus=2, walltime=60, mem=14 * GIB)
    e = dr.submit(20, name="E", ncpus=2, walltime=30, checkpoint="suspend", mem=4 * GIB)
    assert dr.running(a) and dr.state(c) == "PENDING" and dr.state(e) == "PENDING"
    dr.run_until(lambda: dr.state(c) == "RUNNING", 40)
    assert dr.job(c)["start_time"] <= dr.job(a)["end_time"] + 1
    assert dr.state(e) == "PENDING"


def two_boards(tmp_path: Path, policy: str = "easy") -> str:
    text = config(tmp_path, policy)  # (writes a one-board topology, made two here)
    (tmp_path / "topology.toml").write_text(
        '[[board]]\nid = 0\ncores = "0-3"\nmemory = "8G"\nhost_cpus = "0"\n'
        '[[board]]\nid = 1\ncores = "4-7"\nmemory = "8G"\nhost_cpus = "1"\n'
    )
    return text


def boards_of(dr: Driven, jid: int) -> set[int]:
    return {c // 4 for c in dr.d.table.jobs[jid].cores}


def test_a_job_is_placed_on_a_board_with_its_memory_free(stub_daemon, tmp_path):
    """Two boards of 4 cores and 8 GiB: A (6 GiB) is packed on one; B (6 GiB) would fit the 2 cores left
    beside it, but not in the 2 GiB left there: it goes to the other board.  C (2 cores, 4 GiB) has 2 GiB on
    each board: it gets a core on each, and 2 GiB of each.  F (1 core, 1 GiB) then finds a core on each board
    but no memory: it waits until A ends, and runs where A's memory came free."""
    dr = Driven(stub_daemon(two_boards(tmp_path)))
    a = dr.submit(10, name="A", ncpus=2, walltime=30, mem=6 * GIB)
    b = dr.submit(30, name="B", ncpus=2, walltime=60, mem=6 * GIB)
    assert dr.running(a) and dr.running(b)
    on_a = boards_of(dr, a)
    assert len(on_a) == len(boards_of(dr, b)) == 1 and on_a != boards_of(dr, b)
    c = dr.submit(30, name="C", ncpus=2, walltime=60, mem=4 * GIB)
    assert dr.running(c) and boards_of(dr, c) == {0, 1}
    f = dr.submit(5, name="F", ncpus=1, walltime=60, mem=GIB)
    dr.run_to(dr.now - dr.t0 + 1)
    assert dr.state(f) == "PENDING"
    dr.run_until(lambda: dr.state(f) != "PENDING", 40)
    assert dr.job(f)["start_time"] >= dr.job(a)["end_time"] - 0.01
    assert boards_of(dr, f) == on_a, "where A's memory came free"


def test_a_job_too_big_for_one_board_s_memory_is_spread_and_takes_each_board_s_share(stub_daemon, tmp_path):
    """D (3 cores, 12 GiB) cannot have its memory on one board of 8 GiB: it runs on both, 2 cores and 8 GiB on
    one, 1 core and 4 GiB on the other.  E (2 cores, 2 GiB) would be packed on the 2 cores left beside D's
    two, where no memory is left: it goes to the other board."""
    dr = Driven(stub_daemon(two_boards(tmp_path)))
    d = dr.submit(30, name="D", ncpus=3, walltime=60, mem=12 * GIB)
    assert dr.running(d) and boards_of(dr, d) == {0, 1}
    per_board = {b: sum(1 for c in dr.d.table.jobs[d].cores if c // 4 == b) for b in (0, 1)}
    full = next(b for b, k in per_board.items() if k == 2)
    e = dr.submit(30, name="E", ncpus=2, walltime=60, mem=2 * GIB)
    assert dr.running(e) and boards_of(dr, e) == {1 - full}
    f = dr.submit(5, name="F", ncpus=1, walltime=60, mem=3 * GIB)
    dr.run_to(dr.now - dr.t0 + 1)
    assert dr.state(f) == "PENDING", "3 cores are free, 3 GiB of the machine, but 2 and 1 on the boards"
