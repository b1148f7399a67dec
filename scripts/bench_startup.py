#!/usr/bin/env python3
"""Start-up cost of the commands as whole processes, side by side with ``python -c pass``.

Starts two personal daemons on temporary spools (``GRIDSCHED_SPOOL``, ``GRIDSCHED_CONFIG``), one
that ``gsub`` submits one-line jobs to and one holding a short queue of held jobs for ``gstat``,
then times, alternating the commands, N runs each (wall clock, and the CPU time of the process,
which other load on the machine disturbs less):

- ``python -c pass`` (this interpreter), the baseline;
- ``python -c "import click"``: the floor of any command written with click (gsub's and gstat's CPU time
  and instructions are also given as ratios over it: their target is at most 1.5 times);
- ``gsub --wrap true`` (a real submission to the running daemon);
- ``gstat`` on the short queue;
- ``gstat --help``.

The commands are the console scripts beside this interpreter (those of its virtual environment).
``--against DIR`` times the same commands of another installation too (the ``bin`` directory of
its virtual environment, such as one of the previous release), alternated with these in the same
run, against the same daemons.  ``--instructions`` also counts the instructions of one run of each
under valgrind (callgrind): a measure that other load on the machine does not change, to compare
two versions on a busy machine.  Each runs once before timing.  ``PYTHONDONTWRITEBYTECODE`` is taken
out of the children's environment, so they read and write ``.pyc`` files as an installed command does.

``--imports "MOD[,MOD...]" ...`` (with ``--instructions``) also counts ``python -c "import MOD, ..."`` for each
group given: what loading those modules costs this interpreter, to tell where a command's instructions go.

    python scripts/bench_startup.py [-n 9] [--queue 10] [--against OTHER_VENV/bin] [--instructions]
        [--imports "dataclasses" "pathlib,json" ...]

Run it with the python of the installation to measure: that of a plain ``pip install .`` measures the
commands as users get them; an editable install adds its import finder to every process,
``python -c pass`` included.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
TARGET_RATIO = 3.0
CLICK_RATIO = 1.5  # gsub's and gstat's CPU (and instructions) at most this times those of ``import click``
CONFIG = """
[scheduler]
policy = "fcfs"
[machine]
cores = 2
[daemon]
autostart = false
"""


def instructions(argv: list[str], env: dict[str, str], cwd: Path) -> int:
    """The instructions one run of ``argv`` executes in user space, as valgrind's callgrind counts them."""
    vg = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    r = subprocess.run(vg + argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    counts = [line.split("refs:")[1] for line in r.stderr.splitlines() if "I   refs:" in line]
    if r.returncode != 0 or not counts:
        sys.exit(f"valgrind {' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return int(counts[0].replace(",", ""))


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """The wall-clock and CPU (user + system) milliseconds of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.decode(errors='replace').strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return dt * 1000.0, cpu * 1000.0


class Daemon:
    """``gschedd run`` on its own spool, stopped with SIGTERM."""

    def __init__(self, root: Path) -> None:
        root.mkdir()
        self.spool = root / "spool"
        cfg = root / "gridsched.toml"
        cfg.write_text(CONFIG)
        self.env = {**os.environ, "GRIDSCHED_SPOOL": str(self.spool), "GRIDSCHED_CONFIG": str(cfg)}
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.root = root
        log = open(root / "daemon.out", "ab")
        self.proc = subprocess.Popen(
            [str(BIN / "gschedd"), "run"], env=self.env, stdout=log, stderr=log, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + 30
        while not self._up():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                sys.exit(f"the daemon did not start: {(root / 'daemon.out').read_text()[-2000:]}")
            time.sleep(0.05)

    def _up(self) -> bool:
        try:
            meta = json.loads((self.spool / "gschedd.pid").read_text())
        except (OSError, ValueError):
            return False
        return meta.get("pid") == self.proc.pid and (self.spool / "gschedd.sock").exists()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=9, help="runs per command (default 9)")
    ap.add_argument("--queue", type=int, default=10, help="held jobs in gstat's queue (default 10)")
    ap.add_argument("--against", type=Path, metavar="DIR", help="also time the commands in DIR (another venv's bin)")
    ap.add_argument("--instructions", action="store_true", help="also count instructions under valgrind")
    ap.add_argument(
        "--imports", nargs="*", default=[], metavar="MODS", help="with --instructions: count 'import MODS' too"
    )
    args = ap.parse_args()
    if args.imports and not args.instructions:
        sys.exit("--imports goes with --instructions")
    if args.instructions and shutil.which("valgrind") is None:
        sys.exit("--instructions needs valgrind")
    if args.against is not None and not (args.against / "gsub").is_file():
        sys.exit(f"{args.against}: no gsub there")
    tmp = Path(tempfile.mkdtemp(prefix="gs-bench-"))
    daemons: list[Daemon] = []
    try:
        sub = Daemon(tmp / "sub")
        daemons.append(sub)
        stat = Daemon(tmp / "stat")
        daemons.append(stat)
        for i in range(args.queue):
            timed([str(BIN / "gsub"), "--hold", "--name", f"q{i}", "--wrap", "true"], stat.env, stat.root)
        base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cases: dict[str, tuple[list[str], dict[str, str], Path]] = {}
        tags = [""] + ([" (against)"] if args.against is not None else [])
        for tag, bin_dir in (("", BIN), (" (against)", args.against)):
            if bin_dir is None:
                continue
            py = str(bin_dir / "python")
            cases.update(
                {
                    f"python -c pass{tag}": ([py, "-c", "pass"], base_env, tmp),
                    f"import click{tag}": ([py, "-c", "import click"], base_env, tmp),
                    f"gsub --wrap true{tag}": ([str(bin_dir / "gsub"), "--wrap", "true"], sub.env, sub.root),
                    f"gstat ({args.queue} jobs){tag}": ([str(bin_dir / "gstat")], stat.env, stat.root),
                    f"gstat --help{tag}": ([str(bin_dir / "gstat"), "--help"], stat.env, stat.root),
                }
            )
        for argv, env, cwd in cases.values():  # the page cache and the .pyc files
            timed(argv, env, cwd)
        wall: dict[str, list[float]] = {k: [] for k in cases}
        cpu: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.runs):  # alternated, so a burst of load hits every command alike
            for name, (argv, env, cwd) in cases.items():
                w, c = timed(argv, env, cwd)
                wall[name].append(w)
                cpu[name].append(c)
        print(
            f"{platform.node()}: {os.cpu_count()} CPUs, {platform.machine()}, python {platform.python_version()} "
            f"({sys.executable}); {args.runs} runs each, alternated, after one untimed run each; "
            "PYTHONDONTWRITEBYTECODE unset in the children (.pyc files used); load average "
            + " ".join(f"{x:.1f}" for x in os.getloadavg())
            + (f"; (against): {args.against}, its ratios also over this python -c pass" if args.against else "")
        )
        base = statistics.median(wall["python -c pass"])
        base_cpu = statistics.median(cpu["python -c pass"])
        worst = 0.0
        for name, ts in wall.items():
            med = statistics.median(ts)
            ratio = med / base
            if name.startswith(("gsub", "gstat")) and not name.endswith("(against)"):
                worst = max(worst, ratio)
            med_cpu = statistics.median(cpu[name])
            print(
                f"  {name:<30} median {med:6.1f} ms  min {min(ts):6.1f}  max {max(ts):6.1f}  x{ratio:4.1f}"
                f"   cpu median {med_cpu:6.1f} ms  x{med_cpu / base_cpu:4.1f}"
            )
        click_cpu = {tag: statistics.median(cpu[f"import click{tag}"]) for tag in tags}
        for name in cpu:
            if name.startswith(("gsub", "gstat")):
                tag = " (against)" if name.endswith("(against)") else ""
                ratio = statistics.median(cpu[name]) / click_cpu[tag]
                print(f"  {name:<30} cpu x{ratio:4.2f} of import click{tag} (target: at most x{CLICK_RATIO})")
        if args.instructions:
            counts = {name: instructions(*case) for name, case in cases.items()}
            print("instructions (valgrind, one run each):")
            for name, n in counts.items():
                tag = " (against)" if name.endswith("(against)") else ""
                over_click = (
                    f"  x{n / counts[f'import click{tag}']:4.2f} of import click{tag}"
                    if name.startswith(("gsub", "gstat"))
                    else ""
                )
                print(f"  {name:<30} {n / 1e6:8.1f} M  x{n / counts['python -c pass']:4.1f}{over_click}")
            for mods in args.imports:
                code = "import " + ", ".join(m.strip() for m in mods.split(","))
                n = instructions([str(BIN / "python"), "-c", code], base_env, tmp)
                print(
                    f"  {code:<30} {n / 1e6:8.1f} M  {(n - counts['python -c pass']) / 1e6:+8.1f} M over python -c pass"
                )
        verdict = "within" if worst <= TARGET_RATIO else "over"
        print(
            f"slowest command x{worst:.1f} of python -c pass (wall clock): {verdict} the target of x{TARGET_RATIO:.0f}"
        )
        return 0
    finally:
        for d in daemons:
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
