"""Fuzz tests of the trust boundary: whatever lands in ``incoming/`` is parsed into a typed request or refused.

Reading never raises; a refused file comes back with its reason; a parsed one
is one of the request dataclasses, read as the file's owner, and every field
holds a value of its type within its range.  For every field of a valid
request, any JSON value is accepted or refused with one line, never a crash.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gridsched.daemon import intake
from gridsched.protocol import requests as rq
from gridsched.protocol.spool import Spool

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(-(2**70), 2**70),
        st.floats(),
        st.text(max_size=20),
        st.sampled_from(["", "x\n* * * * * root sh", "\x1b[2J", "nowhere", "/etc/x"]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=20,
)
SENDER = rq.Sender(os.getuid(), "me", frozenset({os.getgid()}), admin=False)


def valid_job(jid: int = 1) -> dict:
    return {
        "id": jid,
        "name": "j",
        "user": "me",
        "uid": os.getuid(),
        "gid": os.getgid(),
        "ncpus": 1,
        "walltime": 60,
        "mem": None,
        "checkpoint": "none",
        "hold": False,
        "depend": "",
        "script": "#!/bin/sh\ntrue\n",
        "args": [],
        "workdir": "/tmp",
        "stdout": "/tmp/o",
        "stderr": "/tmp/e",
        "env": {"A": "b"},
        "submit_time": 1.0,
        "submit_dir": "/tmp",
        "umask": 0o022,
    }


VALID = {
    rq.id_name(1): {"type": "submit", "job": valid_job()},
    "cancel-1-1.json": {"type": "cancel", "jobs": [1, 2], "arrays": [3]},
    "hold-1-1.json": {"type": "hold", "jobs": [1]},
    "yield-1-1.json": {"type": "yield", "job": 4, "until": [5]},
    "resume-1-1.json": {"type": "resume", "job": 4},
    rq.id_name(2): {
        "type": "resv_create",
        "resv": {"id": 2, "uid": os.getuid(), "ncpus": 2, "duration": 60, "start": None, "kill": True},
    },
    "resv_delete-1-1.json": {"type": "resv_delete", "id": 2, "release": True},
}
FIELDS = [
    (name, path)
    for name, req in VALID.items()
    for path in (
        [("job", k) for k in req["job"]]
        if "job" in req and isinstance(req["job"], dict)
        else [("resv", k) for k in req["resv"]]
        if "resv" in req
        else [(k,) for k in req if k != "type"]
    )
]


def fresh(tmp_path_factory) -> Spool:
    sp = Spool(tmp_path_factory.mktemp("spool"))
    sp.ensure()
    return sp


def scan_one(sp: Spool, name: str):
    got, refused = intake.scan(sp, intake.Senders([0]))
    assert len(got) + len(refused) <= 1
    return got[0] if got else refused[0] if refused else None


@FUZZ
@given(st.binary(max_size=2000))
@example(b"[" * 100_000)
@example(b'{"type": "submit", "job": ' + b"[" * 50_000 + b"}")
@example(b"\xff\xfe\x00\x00")
@example(b'{"type": "cancel", "jobs": [1, 2')
@example(b'{"type": "submit", "job": {"id": NaN}}')
def test_random_bytes_are_parsed_or_refused(tmp_path_factory, raw):
    sp = fresh(tmp_path_factory)
    name = rq.id_name(1)
    (sp.incoming / name).write_bytes(raw)
    out = scan_one(sp, name)
    if not raw and os.geteuid() == os.getuid():
        assert out is None  # an empty file of the daemon's own user named for an id: an id it claims
        return
    assert isinstance(out, (rq.Received, intake.Refusal))
    if isinstance(out, intake.Refusal):
        assert out.reason and "\n" not in out.reason


@FUZZ
@given(st.sampled_from(FIELDS), json_values)
@example(("submit-0000000001.json", ("job", "uid")), 1)  # another uid: root's to claim, nobody else's
def test_any_value_in_any_field_is_accepted_or_refused(field, value):
    name, path = field
    data = json.loads(json.dumps(VALID[name]))
    target = data
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = value
    try:
        req = rq.parse(data, name, SENDER)
    except rq.Refused as e:
        assert str(e) and "\n" not in str(e)
        return
    check_typed(req)


@FUZZ
@given(st.sampled_from(list(VALID)), st.text(min_size=1, max_size=10), json_values)
def test_unknown_fields_are_refused(name, key, value):
    data = json.loads(json.dumps(VALID[name]))
    if key in data or _optional_field(data, name, key):
        return
    data[key] = value
    with pytest.raises(rq.Refused, match="unknown field"):
        rq.parse(data, name, SENDER)


def _optional_field(data: dict, name: str, key: str) -> bool:
    """Whether ``key`` is a field of the request that ``data`` leaves out (hypothesis draws the names it finds
    in the code, such as ``arrays``): a value no field takes is then refused for itself, not as unknown."""
    try:
        rq.parse({**data, key: {"\0": None}}, name, SENDER)
    except rq.Refused as e:
        return "unknown field" not in str(e)
    return True


def user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def check_typed(req: rq.Request) -> None:
    """Every field of a parsed request has its type and lies in its range."""
    if isinstance(req, rq.Submit):
        j = req.job
        assert 0 < j.id <= rq.MAX_ID and 0 < j.ncpus <= rq.MAX_COUNT and 0 < j.walltime <= rq.MAX_SECONDS
        if j.uid == SENDER.uid:
            assert j.user == SENDER.user
        else:  # only root acts for another uid, under that uid's name in the password database
            assert SENDER.uid == 0 and j.user == user_name(j.uid), (j.uid, j.user)
        assert j.checkpoint in rq.CHECKPOINT_MODES and j.place in (None, *rq.PLACES) and 0 <= j.threads_per_core <= 2
        assert all(isinstance(a, str) and "\0" not in a for a in j.args)
        assert all(isinstance(k, str) and "=" not in k and "\0" not in k + v for k, v in j.env)
        for p in (j.workdir, j.stdout, j.stderr, j.submit_dir):
            assert p.startswith("/") and all(len(c.encode()) <= 255 for c in p.split("/"))
        assert not any(ord(c) < 32 for c in j.name)
        assert j.mem is None or 0 < j.mem <= rq.MAX_BYTES
        json.dumps(j.to_spec(), allow_nan=False).encode("utf-8")  # storable as it is
    elif isinstance(req, rq.ResvCreate):
        r = req.resv
        assert 0 < r.ncpus <= rq.MAX_COUNT and 0 < r.duration <= rq.MAX_SECONDS
        assert r.start is None or 0 <= r.start <= rq.MAX_TIME
        json.dumps(r.to_dict(), allow_nan=False)
    elif isinstance(req, (rq.Cancel, rq.Hold, rq.Release)):
        assert all(0 < i <= rq.MAX_ID for i in req.jobs + req.arrays)
    elif isinstance(req, (rq.Yield, rq.Resume, rq.ResvDelete)):
        assert 0 < (req.job if not isinstance(req, rq.ResvDelete) else req.id) <= rq.MAX_ID


@pytest.mark.parametrize(
    "name, why",
    [
        ("submit-1.json", "must be named"),  # an id spelled otherwise than its canonical name
        ("submit-00000000001.json", "must be named"),
        ("x.json", "must be named"),
    ],
)
def test_a_new_id_comes_only_from_its_canonical_name(name, why):
    with pytest.raises(rq.Refused, match=why):
        rq.parse({"type": "submit", "job": valid_job()}, name, SENDER)


def test_the_id_in_the_request_must_be_the_one_in_its_name():
    with pytest.raises(rq.Refused, match="named for id 1"):
        rq.parse({"type": "submit", "job": valid_job(7)}, rq.id_name(1), SENDER)


@pytest.mark.parametrize("kind", ["reload", "tune", "drain", "undrain"])
def test_admin_requests_are_refused_to_others(kind):
    data = {"type": kind, **({"cores": "0-1"} if kind in ("drain", "undrain") else {})}
    with pytest.raises(rq.Refused, match="only root or the spool's owner"):
        rq.parse(data, f"{kind}-1-1.json", SENDER)
    rq.parse(data, f"{kind}-1-1.json", rq.Sender(0, "root", frozenset({0}), admin=True))


def test_a_request_that_grows_after_fstat_is_refused(tmp_path_factory, monkeypatch):
    sp = fresh(tmp_path_factory)
    name = rq.id_name(2)
    (sp.incoming / name).write_bytes(b" " * 10)
    real_read = os.read
    calls = {"n": 0}

    def endless(fd, n):  # a writer appending as fast as it is read
        calls["n"] += 1
        return b" " * n if calls["n"] < 20 else real_read(fd, n)

    monkeypatch.setattr(intake.os, "read", endless)
    out = scan_one(sp, name)
    monkeypatch.undo()
    assert isinstance(out, intake.Refusal) and "too large" in out.reason
