"""Control characters and markup that users wrote never reach the terminal raw.

Rows holding them are written straight into the state db of a temporary spool
(no daemon), as a hand-written request or an older version could leave them;
then the real commands run as subprocesses, piped (the plain layout) and on a
pseudo-terminal (rich's layout), and the bytes they print are checked.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from gridsched.protocol.spool import Spool
from gridsched.protocol.state import StateDB
from gridsched.protocol.text import dumps, shown
from tests.cli.conftest import job_row, write_rows

BIN = Path(sys.executable).parent

# A name that tries everything: an OSC window title, a colour, a screen clear, carriage return and
# newline, a bidirectional override, a C1 CSI, a bell, rich markup and an emoji code.
EVIL = "a\x1b]0;pwned\x07b\x1b[31mRED\x1b[2J\rc\nd\u202eZ\x9b[bold]B[/bold]:smile:"
EVIL_SHOWN = r"a\x1b]0;pwned\x07b\x1b[31mRED\x1b[2J\rc\nd\u202eZ\x9b[bold]B[/bold]:smile:"
# What must not appear in any output, as bytes.
RAW = [b"\x1b]0;pwned", b"\x1b[31mRED", b"\x1b[2J", b"\x07", "\x9b".encode(), "\u202e".encode(), b"\rc"]


def test_shown_escapes_what_repr_escapes_and_nothing_else():
    assert shown(EVIL) == EVIL_SHOWN
    assert shown("plain name-1.sh") == "plain name-1.sh"
    assert shown("tab\there\x00\x7f") == r"tab\there\x00\x7f"
    assert shown("back\\slash 'q' \"qq\" ünï 名前") == "back\\slash 'q' \"qq\" ünï 名前"
    assert shown("\udcff\u2028\xa0") == r"\udcff\u2028\xa0"  # a lone surrogate (a raw path byte), separators
    assert shown(None) == "" and shown(17) == "17"
    for c in map(chr, range(0x250)):
        out = shown(c)
        assert out.isprintable(), repr(c)
        assert out == (c if c.isprintable() else repr(c)[1:-1])


def test_dumps_is_standard_json():
    doc = {"a": float("inf"), "b": [float("-inf"), float("nan"), 1.5], "c": {"d": (float("nan"),)}, "e": EVIL}
    text = dumps(doc)
    assert "Infinity" not in text and "NaN" not in text
    assert json.loads(text) == {"a": None, "b": [None, None, 1.5], "c": {"d": [None]}, "e": EVIL}
    assert dumps({"x": 1}, indent=2) == json.dumps({"x": 1}, indent=2)


def resv_row(rid: int, **fields: Any) -> dict[str, Any]:
    now = time.time()
    row: dict[str, Any] = {
        "id": rid,
        "state": "WAITING",
        "user": "root",
        "uid": 0,
        "name": f"R{rid}",
        "ncpus": 2,
        "resources": {},
        "duration": 3600,
        "start": None,
        "create_time": now - 10,
        "activate_time": None,
        "end_time": None,
        "predicted": None,
        "cores": "",
        "users": [],
        "kill": True,
        "reason": "",
    }
    row.update(fields)
    return row


def put_resvs(spool: Spool, *rows: dict[str, Any]) -> None:
    db = StateDB(spool.db, write=True)
    try:
        db.begin()
        for r in rows:
            db.put_resv(r)
        assert db.commit()
    finally:
        db.close()


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, str]:
    """A spool whose job table, reservations, drain reason and a waiting request are full of EVIL; the env."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[daemon]\nautostart = false\n[machine]\ncores = 16\n")
    spool = Spool(tmp_path / "spool")
    now = time.time()
    spec = {
        "stdout": f"/w/{EVIL}.o",
        "stderr": "/w/e",
        "workdir": f"/w/{EVIL}",
        "args": [EVIL, "x"],
        "submit_dir": EVIL,
        "checkpoint": EVIL,
        "resources": {EVIL: 1},
    }
    write_rows(
        spool,
        job_row(
            1,
            name=EVIL,
            user=EVIL,
            reason=EVIL,
            state="RUNNING",
            start_time=now - 10,
            cores="0-1",
            ncpus=2,
            spec=spec,
            segments=[{"start": now - 10, "end": None, "cores": "0-1", "outcome": EVIL}],
        ),
        job_row(2, name=EVIL, reason=EVIL, predicted_start=now + 600),
        job_row(
            3,
            name=EVIL,
            user=EVIL,
            state="COMPLETED",
            start_time=now - 50,
            end_time=now - 20,
            elapsed=30.0,
            exit_code=0,
            reason=EVIL,
        ),
        job_row(4, name=EVIL, spec={"array_id": 4, "array_index": 0, "stdout": "/o", "stderr": "/e", "workdir": "/w"}),
        job_row(5, name=EVIL, spec={"parent": 1, "stdout": "/o", "stderr": "/e", "workdir": "/w"}),
        meta={"drained": json.dumps({"cores": "5", "reason": EVIL}), "reserved": json.dumps({EVIL: "6"})},
    )
    put_resvs(
        spool,
        resv_row(7, name=EVIL, user=EVIL, reason=EVIL),
        resv_row(8, name=f"[red]{EVIL}", state="ACTIVE", cores="6", activate_time=now - 5),
        resv_row(9, name=EVIL, state="DELETED", reason=EVIL),
    )
    # a hand-written submission not yet taken in: an array whose range is text
    job = {
        "id": 10,
        "name": EVIL,
        "user": EVIL,
        "uid": os.getuid(),
        "ncpus": 1,
        "walltime": 60,
        "submit_time": now,
        "array": f"0-3{EVIL}",
    }
    (spool.incoming / "submit-0000000010.json").write_text(json.dumps({"type": "submit", "job": job}))
    return {**os.environ, "GRIDSCHED_SPOOL": str(spool.root), "GRIDSCHED_CONFIG": str(cfg)}


VIEWS = [
    ["gstat"],
    ["gstat", "-a"],
    ["gstat", "-f", "1"],
    ["gstat", "-f", "3"],
    ["gstat", "-t"],
    ["gstat", "--gantt"],
    ["gstat", "--tree"],
    ["gstat", "-r"],
    ["gstat", "-r", "-a"],
    ["gstat", "--watch", "0.1", "--count", "2"],
    ["gresv", "list", "-a"],
    ["gacct"],
    ["gctl", "topology"],
]


def check_bytes(out: bytes, allowed: re.Pattern[bytes] | None = None) -> str:
    """``out`` decoded, after checking it holds no injected sequence and no control byte but newline
    (and what ``allowed`` matches: rich's own sequences on a terminal)."""
    for raw in RAW:
        assert raw not in out, (raw, out)
    if allowed is not None:
        out = allowed.sub(b"", out).replace(b"\r\n", b"\n")
    text = out.decode()
    for line in text.split("\n"):
        assert line.isprintable(), repr(line)
    return text


@pytest.mark.parametrize("args", VIEWS, ids=" ".join)
def test_piped_views_escape_user_text(hostile, args):
    r = subprocess.run([str(BIN / args[0]), *args[1:]], env=hostile, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stderr == b""
    text = check_bytes(r.stdout)
    assert r"\x1b]0;pwned\x07" in text  # shown, escaped
    if args[:2] in (["gstat", "-r"], ["gresv", "list"]):
        assert "[bold]B[/bold]:smile:" in text  # rich printed it: no markup, no emoji taken from it
    if args[0] == "gstat" and "-r" not in args and "--gantt" not in args:
        assert EVIL_SHOWN in text


def test_full_view_escapes_every_user_field(hostile):
    r = subprocess.run([str(BIN / "gstat"), "-f", "1"], env=hostile, capture_output=True, timeout=60)
    fields = {}
    for line in check_bytes(r.stdout).splitlines():
        key, _, value = line.partition("  ")
        fields.setdefault(key, value.strip())
    assert fields["name"] == EVIL_SHOWN and fields["reason"] == EVIL_SHOWN
    assert fields["user"] == f"{EVIL_SHOWN} (uid {os.getuid()})"
    assert fields["workdir"] == f"/w/{EVIL_SHOWN}" and fields["stdout"] == f"/w/{EVIL_SHOWN}.o"
    assert fields["args"] == f"{EVIL_SHOWN} x" and fields["submit_dir"] == EVIL_SHOWN
    assert fields["resources"] == f"{EVIL_SHOWN}=1" and fields["checkpoint"] == EVIL_SHOWN
    assert fields["segment 1"].endswith(f": {EVIL_SHOWN}")


def test_array_label_from_a_hand_written_request_is_escaped(hostile):
    r = subprocess.run([str(BIN / "gstat")], env=hostile, capture_output=True, timeout=60)
    assert f"10_[0-3{EVIL_SHOWN}]" in check_bytes(r.stdout)


def strict(text: str) -> Any:
    def refuse(const: str) -> Any:
        raise AssertionError(f"not standard JSON: {const}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "args",
    [
        ["gstat", "-a", "--json"],
        ["gstat", "-f", "1", "--json"],
        ["gstat", "--tree", "--json"],
        ["gstat", "-r", "-a", "--json"],
        ["gacct", "--json"],
        ["gctl", "topology", "--json"],
    ],
    ids=" ".join,
)
def test_json_stays_exact(hostile, args):
    r = subprocess.run([str(BIN / args[0]), *args[1:]], env=hostile, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    check_bytes(r.stdout)  # JSON escapes control characters itself
    doc = strict(r.stdout.decode())
    if "jobs" in doc:
        assert {j["name"] for j in doc["jobs"]} == {EVIL}
    if "trees" in doc:
        assert doc["trees"][0]["name"] == EVIL
    if "reservations" in doc:
        assert {x["name"] for x in doc["reservations"]} == {EVIL, f"[red]{EVIL}"}
    if "drained" in doc:
        assert doc["drained"]["reason"] == EVIL


def test_json_has_no_infinity_or_nan(tmp_path):
    """Non-finite numbers in an old or hand-written row come out as null."""
    inf, nan = float("inf"), float("nan")
    spool = Spool(tmp_path / "spool")
    now = time.time()
    write_rows(
        spool,
        job_row(
            1,
            predicted_start=inf,
            spec={
                "stdout": "/o",
                "stderr": "/e",
                "workdir": "/w",
                "reservation": nan,
                "parent": -inf,
                "array_index": inf,
            },
        ),
        job_row(2, state="COMPLETED", start_time=now - 50, end_time=now - 20, elapsed=30.0, exit_code=0, lost=inf),
    )
    put_resvs(spool, resv_row(3, predicted=inf))
    (tmp_path / "cfg.toml").write_text("[daemon]\nautostart = false\n")
    env = {**os.environ, "GRIDSCHED_SPOOL": str(spool.root), "GRIDSCHED_CONFIG": str(tmp_path / "cfg.toml")}

    def doc(*args: str) -> Any:
        r = subprocess.run([str(BIN / args[0]), *args[1:]], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return strict(r.stdout)

    jobs = {j["id"]: j for j in doc("gstat", "-a", "--json")["jobs"]}
    assert jobs[1]["predicted_start"] is None and jobs[1]["reservation"] is None
    assert jobs[1]["parent"] is None and jobs[1]["array_index"] is None
    assert doc("gstat", "--tree", "--json")["trees"][0]["parent"] is None
    assert doc("gacct", "--json")["jobs"][0]["lost"] is None
    assert doc("gstat", "-r", "--json")["reservations"][0]["predicted"] is None


# -- on a terminal ---------------------------------------------------------------------------------

# rich's own output on a terminal: SGR colours, and for --watch (rich Live) hiding and showing the
# cursor, erasing a line, moving up.
RICH = re.compile(rb"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\x1b\[[0-9]*[AK]|\r(?!\n)")


def on_pty(args: list[str], env: dict[str, str], cols: int = 1000) -> tuple[int, bytes]:
    """Run a command with its standard output on a new pseudo-terminal; its status and what it printed."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    env = {k: v for k, v in env.items() if k not in ("NO_COLOR", "COLUMNS", "LINES", "TERM", "FORCE_COLOR")}
    env["TERM"] = "xterm-256color"
    try:
        proc = subprocess.Popen(
            [str(BIN / args[0]), *args[1:]], env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE
        )
    finally:
        os.close(slave)
    out = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError as e:
                if e.errno == errno.EIO:  # the other side is closed: the command has ended
                    break
                raise
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    proc.wait(timeout=30)
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.stderr.close()
    assert err == b"", err.decode()
    return proc.returncode, out


@pytest.mark.parametrize(
    "args",
    [
        ["gstat"],
        ["gstat", "-a", "-t"],
        ["gstat", "-r", "-a"],
        ["gresv", "list"],
        ["gstat", "--watch", "0.1", "--count", "2"],
        ["gstat", "--gantt"],
        ["gctl", "topology"],
        ["gstat", "-f", "1"],
    ],
    ids=" ".join,
)
def test_rich_layout_on_a_terminal_escapes_user_text(hostile, args):
    code, out = on_pty(args, hostile)
    assert code == 0
    text = check_bytes(out, RICH)
    assert r"\x1b]0;pwned\x07" in text
    if args[:2] in (["gstat"], ["gstat", "-a"], ["gstat", "--watch"], ["gstat", "-f"]):
        assert EVIL_SHOWN in text  # whole: neither markup nor emoji codes were taken from it
    if args[:2] in (["gstat", "-r"], ["gresv", "list"]):
        assert "[bold]B[/bold]:smile:" in text and "[red]a" in text
