"""A job's private directory (its TMPDIR) in a directory every user may write, as /tmp.

The root daemon makes it for each start of a job, hands it to the job's owner
and removes it at the job's end.  Whatever B plants in that directory, and
whatever A's own job turns its private directory into (a link to root's files,
to B's, a link in place of its ``tmp``), root must not create, chown or remove
anything through it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tests.conftest import wait_for
from tests.security.conftest import Targets, check_intact, spawn_as


def test_links_in_and_for_the_private_directory_are_not_followed(fresh, env):
    base = Path(tempfile.mkdtemp(prefix="jobtmp-", dir=env.base))
    os.chmod(base, 0o1777)
    system = fresh({"jobs": {"tmpdir": str(base)}})
    a, b = system.a, system.b
    targets = Targets(system.base, a).snapshot()
    first = system.next_id()
    bdir = b.home / "mine"

    def plant() -> int:
        bdir.mkdir(exist_ok=True)
        (bdir / "keep").write_text("B's file\n")
        n = 0
        for jid in range(first, first + 6):
            for name in (f"gridsched.{jid}", f"gridsched.{jid}.0", f"gridsched.{jid}.tmp"):
                os.symlink(str(targets.dir), str(base / name))
                n += 1
        return n

    r = spawn_as(b, plant).result()
    assert r.get("ok") == 18, r
    swaps = {
        "root": f'mv "$P" "$P.moved" && ln -s {targets.dir} "$P"',
        "b": f'mv "$P" "$P.moved" && ln -s {bdir} "$P"',
        "tmp": f'rm -rf "$TMPDIR" && ln -s {targets.dir} "$TMPDIR"',
        "nodefile": f'rm -f "$PBS_NODEFILE" && ln -s {targets.shadow} "$PBS_NODEFILE"',
        "locked": 'mkdir -p "$TMPDIR/a/b" && touch "$TMPDIR/a/b/f" && chmod 000 "$TMPDIR/a/b" "$TMPDIR/a"',
    }
    jobs = {"srun": system.gsub(a, "--ntasks", "2", "--wrap", f"srun sh -c 'echo $SLURM_PROCID' > {a.home}/srun.out")}
    for what, swap in swaps.items():
        out = a.home / f"seen.{what}"
        jobs[what] = system.gsub(
            a,
            "--wrap",
            f'P=$(dirname "$TMPDIR"); stat -c "%U %a" "$P" "$TMPDIR" "$PBS_NODEFILE" > {out}; {swap}',
        )
    for jid in jobs.values():
        system.wait_state(jid, "COMPLETED", "FAILED")
    for what in swaps:
        seen = (a.home / f"seen.{what}").read_text().split("\n")
        # the job's own, private, while it ran
        assert seen[:3] == [f"{a.name} 700", f"{a.name} 700", f"{a.name} 644"], (what, seen)
    assert sorted((a.home / "srun.out").read_text().split()) == ["0", "1"]  # srun runs as A, for A
    assert (bdir / "keep").read_text() == "B's file\n"
    # what root made is gone; what A moved aside is A's own, and is left to A
    wait_for(lambda: all(p.is_symlink() or p.name.endswith(".moved") for p in base.iterdir()), 10, "removal")
    for p in base.iterdir():
        st = os.lstat(p)
        assert p.is_symlink() or st.st_uid == a.uid, p
    check_intact(system, targets)
    shutil.rmtree(base, ignore_errors=True)
