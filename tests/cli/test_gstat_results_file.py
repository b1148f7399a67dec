"""gstat reads a job's sub-task results file, which the job's user writes, without following links."""

from __future__ import annotations

import json
import os

from gridsched.cli.gstat_tasks import RESULTS, results


def test_a_regular_results_file_is_read(tmp_path):
    (tmp_path / "checkpoint").mkdir()
    lines = [{"task": 1, "event": "start"}, {"task": 1, "event": "done"}, {"task": 2, "event": "timeout", "try": 1}]
    (tmp_path / "checkpoint" / RESULTS).write_text("".join(json.dumps(x) + "\n" for x in lines) + "not json\n")
    assert results(tmp_path) == {1: ("done", 0), 2: ("timeout", 1)}


def test_a_fifo_or_a_link_planted_by_the_user_is_not_read(tmp_path):
    ck = tmp_path / "checkpoint"
    ck.mkdir()
    os.mkfifo(ck / RESULTS)  # opening it for reading would block an admin's gstat
    assert results(tmp_path) is None
    os.remove(ck / RESULTS)
    os.symlink(tmp_path / "elsewhere", ck / RESULTS)
    (tmp_path / "elsewhere").write_text(json.dumps({"task": 1, "event": "done"}) + "\n")
    assert results(tmp_path) is None
    other = tmp_path / "other"
    other.mkdir()
    os.remove(ck / RESULTS)
    (ck / RESULTS).write_text(json.dumps({"task": 1, "event": "done"}) + "\n")
    os.symlink(ck, other / "checkpoint")  # a linked checkpoint folder is not followed either
    assert results(other) is None
    assert results(tmp_path) == {1: ("done", 0)}
