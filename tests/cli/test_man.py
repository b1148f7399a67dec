"""The man pages in data/share/man/ are what scripts/gen_man.py makes of the current code, and render cleanly."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    "gsub.1",
    "gstat.1",
    "gdel.1",
    "ghold.1",
    "galter.1",
    "grequeue.1",
    "grls.1",
    "gacct.1",
    "gresv.1",
    "gctl.8",
    "gschedd.8",
    "gridsched.toml.5",
    "gwait.1",
    "gyield.1",
    "gresume.1",
    "gresume-tree.1",
    "grun.1",
    "gtail.1",
]


def mod_path(page: str) -> Path:
    """Where ``page`` lies in the source tree: data/share/man/manN/, as pip installs it under the prefix."""
    return ROOT / "data" / "share" / "man" / f"man{page.rsplit('.', 1)[1]}" / page


def test_pip_installs_the_pages_where_man_finds_them():
    """pyproject.toml hands data/ to the installer as external data: each page lands in PREFIX/share/man/manN,
    the directory man-db searches beside PREFIX/bin (so `man gsub` works in the environment)."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert conf["tool"]["flit"]["external-data"]["directory"] == "data"
    for page in [*PAGES, "gsim.1"]:
        assert mod_path(page).is_file(), page


def generate() -> dict[str, str]:
    spec = importlib.util.spec_from_file_location("gen_man", ROOT / "scripts" / "gen_man.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.generate()


def test_man_pages_are_up_to_date():
    pages = generate()
    assert sorted(pages) == sorted(PAGES)
    stale = [name for name, text in pages.items() if not mod_path(name).is_file() or mod_path(name).read_text() != text]
    assert not stale, f"stale man pages {stale}: run python scripts/gen_man.py"


def test_pages_document_what_they_must():
    pages = generate()
    assert "\\-\\-walltime" in pages["gsub.1"] and ".SH DIRECTIVES" in pages["gsub.1"]
    assert ".SH EXIT STATUS" in pages["gsub.1"] and "EX_TEMPFAIL" in pages["gsub.1"]
    assert "predicted_start" in pages["gstat.1"] and ".SH JSON OUTPUT" in pages["gstat.1"]
    assert ".SS gschedd status" in pages["gschedd.8"] and ".B 3\n" in pages["gschedd.8"]
    assert "max_walltime" in pages["gridsched.toml.5"]
    assert (
        ".SH SLURM AND PBS DIRECTIVES" in pages["gsub.1"] and ".B #SBATCH \\-c, \\-\\-cpus-per-task" in pages["gsub.1"]
    )
    assert ".SH DEPENDENCIES" in pages["gsub.1"] and "afternotok" in pages["gsub.1"]
    assert "only pending jobs can be held" in pages["ghold.1"]
    assert ".SH STANDARD WORKLOAD FORMAT" in pages["gacct.1"] and "MaxProcs" in pages["gacct.1"]
    assert "compat.env" in pages["gsub.1"] and "[compat]" in pages["gridsched.toml.5"]
    assert ".SH JOB TREES" in pages["gsub.1"] and "\\-\\-no-parent" in pages["gsub.1"]
    assert "\\-\\-yield" in pages["gwait.1"] and "yield_affinity" in pages["gridsched.toml.5"]


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed, pages cannot be rendered")
@pytest.mark.parametrize("page", PAGES)
def test_page_renders_without_warnings(page):
    r = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", "-z", str(mod_path(page))], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
