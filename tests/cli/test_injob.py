"""The pieces of the in-job commands (gridsched.cli.injob) that need no daemon: Slurm's host lists and
elapsed times, squeue's format fields, how sbatch's and qsub's options are told from the script."""

from __future__ import annotations

import pytest

from gridsched.cli import injob


@pytest.mark.parametrize(
    "text, names",
    [
        ("node1", ["node1"]),
        ("node[1-3]", ["node1", "node2", "node3"]),
        ("gpu[08-10,2],login", ["gpu08", "gpu09", "gpu10", "gpu2", "login"]),
        ("a[1-2]-ib", ["a1-ib", "a2-ib"]),
    ],
)
def test_host_lists_expand_as_scontrol_show_hostnames(text, names):
    assert injob.expand_hostlist(text) == names


def test_a_bad_host_list_is_refused():
    with pytest.raises(injob.Refused, match="not a host list"):
        injob.expand_hostlist("node[a-b]")


@pytest.mark.parametrize("secs, text", [(0, "0:00"), (65, "1:05"), (3600, "1:00:00"), (90061, "1-01:01:01")])
def test_elapsed_times_in_slurms_form(secs, text):
    assert injob.clock(secs) == text


@pytest.mark.parametrize("secs, text", [(0, "00:00:00"), (600, "00:10:00"), (90061, "1-01:01:01")])
def test_scontrol_times(secs, text):
    assert injob.hms(secs) == text


def test_squeue_fields_and_widths():
    row = {"i": "12", "j": "train", "t": "R"}.__getitem__
    assert injob.squeue_line("%.5i %6j|%t", row) == "   12 train |R"
    assert injob.squeue_line("%.3i", lambda k: "12345") == "123"
    with pytest.raises(injob.Refused, match="%Z is not a field"):
        injob.squeue_line("%Z", row)


def test_sbatch_options_are_told_from_the_script_and_its_arguments():
    opts, rest = injob.split_options(
        ["-J", "x", "--time=5", "-n4", "--parsable", "--wrap", "echo hi"], "#SBATCH", ("--parsable", "--wrap")
    )
    assert opts == [["-J", "x"], ["--time=5"], ["-n4"], ["--parsable"], ["--wrap", "echo hi"]] and rest == []
    opts, rest = injob.split_options(["-c", "2", "run.sh", "-n", "3"], "#SBATCH")
    assert opts == [["-c", "2"]] and rest == ["run.sh", "-n", "3"]
    with pytest.raises(injob.Refused, match="--bogus: not an option"):
        injob.split_options(["--bogus", "run.sh"], "#SBATCH")
    with pytest.raises(injob.Refused, match="-J needs a value"):
        injob.split_options(["-J"], "#SBATCH")


def test_options_become_gsub_tokens():
    """As the same #SBATCH and #PBS words: a bare Slurm time is minutes, -n with -c is tasks of cores."""
    got = injob.gsub_tokens("sbatch", "#SBATCH", [["-J", "x"], ["--time=5"], ["-n", "2"], ["-c", "3"]])
    assert got == ["-N", "x", "-t", "300s", "--ntasks", "2", "-n", "6", "--cpus-per-task", "3"]
    assert injob.gsub_tokens("qsub", "#PBS", [["-l", "walltime=00:05:00"]]) == ["-t", "300s"]


def test_unknown_commands_say_what_is_carried_out(capsys):
    assert injob.run("scontrol", ["show", "partition"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("scontrol: error: show partition: not carried out")


def test_sbatch_wrap_makes_a_slurm_script():
    """The options become #SBATCH lines after the default name, so that -J wins and gsub reads a Slurm
    script (named wrap, slurm-%j.out, Slurm's environment)."""
    text = injob.wrapped("echo 'a b'", [["-J", "x y"], ["-c", "2"]])
    assert text.splitlines()[:4] == ["#!/bin/sh", "#SBATCH --job-name=wrap", "#SBATCH -J 'x y'", "#SBATCH -c 2"]
    assert text.splitlines()[-1] == "echo 'a b'"
    from gridsched.submission import compat

    tr = compat.translate(text, "stdin")
    assert tr.dialect == "slurm" and tr.params()["-N"] == "x y"
