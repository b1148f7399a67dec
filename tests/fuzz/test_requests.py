"""Fuzz tests of the daemon's request reader: whatever lands in ``incoming/`` is read or quarantined.

The reader never raises.  A file it cannot use is moved to ``quarantine/``
with a ``.why`` beside it; a file it takes is a :class:`Request` whose type is
known, read as the file's owner.
"""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gridsched.daemon import requests
from gridsched.spool import Spool

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(st.text(max_size=8), children, max_size=5)),
    max_leaves=20,
)
spec_keys = ["id", "name", "ncpus", "walltime", "script", "args", "workdir", "stdout", "stderr", "env",
             "submit_time", "checkpoint", "hold", "uid", "gid", "user", "mem"]
near_spec = st.fixed_dictionaries(
    {},
    optional={k: st.one_of(json_values, st.integers(-(2**70), 2**70), st.sampled_from(["signal", "none", ""]))
              for k in spec_keys},
)
requests_json = st.one_of(
    json_values,
    st.fixed_dictionaries({"type": st.sampled_from([*requests.KINDS, "explode", 3, None])}, optional={
        "job": st.one_of(near_spec, json_values), "jobs": st.one_of(st.lists(st.integers()), json_values)}),
)


def fresh(tmp_path_factory) -> Spool:
    sp = Spool(tmp_path_factory.mktemp("spool"))
    sp.ensure()
    return sp


def check_outcome(sp: Spool, name: str, got: list[requests.Request]) -> None:
    taken = [r for r in got if r.name == name]
    quarantined = (sp.quarantine / (name + ".why")).exists()
    assert len(taken) + quarantined == 1, (taken, quarantined)
    if taken:
        req = taken[0]
        assert isinstance(req.data, dict) and req.data["type"] in requests.KINDS
        assert req.uid == os.getuid()
    else:
        assert (sp.quarantine / (name + ".why")).read_text().strip()
        assert not (sp.incoming / name).exists()


@FUZZ
@given(st.binary(max_size=2000))
@example(b"[" * 100_000)
@example(b'{"type": "submit", "job": ' + b"[" * 50_000 + b"}")
@example(b"\xff\xfe\x00\x00")
@example(b'{"type": "cancel", "jobs": [1, 2')
def test_random_bytes_are_read_or_quarantined(tmp_path_factory, raw):
    sp = fresh(tmp_path_factory)
    name = "submit-0000000001.json"
    (sp.incoming / name).write_bytes(raw)
    check_outcome(sp, name, requests.scan(sp))


@FUZZ
@given(requests_json)
@example({"type": "submit", "job": {"id": 2**70}})
@example({"type": "submit", "job": {"gid": 0}})
def test_random_json_is_read_or_quarantined_and_specs_are_checked(tmp_path_factory, data):
    sp = fresh(tmp_path_factory)
    name = "cancel-1-1.json"
    (sp.incoming / name).write_text(json.dumps(data))
    got = requests.scan(sp)
    check_outcome(sp, name, got)
    for req in got:
        if req.data["type"] == "submit":
            why = requests.check_spec(req.data.get("job"))  # never raises
            assert why is None or (isinstance(why, str) and why)


@FUZZ
@given(near_spec)
def test_check_spec_accepts_only_what_the_daemon_can_store(job):
    why = requests.check_spec(job)
    if why is None:
        assert 0 < job["id"] <= requests.MAX_INT and 0 < job["ncpus"] <= requests.MAX_INT
        assert job["checkpoint"] in ("none", "signal", "suspend", "requeue")
        assert all(isinstance(a, str) for a in job["args"])


def test_a_request_that_grows_after_fstat_is_refused(tmp_path_factory, monkeypatch):
    sp = fresh(tmp_path_factory)
    name = "submit-0000000002.json"
    (sp.incoming / name).write_bytes(b" " * 10)
    real_read = os.read
    calls = {"n": 0}

    def endless(fd, n):  # a writer appending as fast as it is read
        calls["n"] += 1
        return b" " * n if calls["n"] < 20 else real_read(fd, n)

    monkeypatch.setattr(requests.os, "read", endless)
    got = requests.scan(sp)
    monkeypatch.undo()
    assert got == []
    assert "too large" in (sp.quarantine / (name + ".why")).read_text()
