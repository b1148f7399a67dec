"""Slurm, PBS and SGE directives: reading ``#SBATCH`` / ``#PBS`` / ``#$`` lines, writing ``#SBATCH`` / ``#PBS``.

A script without ``#GS`` directives may carry ``#SBATCH``, ``#PBS`` or
``#$`` (Grid Engine) ones; they are found by the same header rule as ``#GS``
(:func:`scan`) and translated into gsub options (:func:`translate`), read as
each system reads them: a bare Slurm time is minutes, a bare PBS walltime
seconds, SGE memory is per slot.  What has no meaning on one machine is not
dropped silently: it becomes a warning that names the line.  The tables
:data:`SLURM`, :data:`PBS`, :data:`PBS_RESOURCES`, :data:`SGE` and
:data:`SGE_RESOURCES` drive the translation and the section "SLURM AND PBS
DIRECTIVES" of gsub(1).

The translation also says which system's script it is (``dialect``): that
chooses what the job runs under when the script has no ``#!`` on its first
line (:func:`gridsched.submission.submit.choose_shell`) and, for Slurm, the default output
file ``slurm-%j.out`` with standard error joined to it.

:func:`emit_slurm` and :func:`emit_pbs` go the other way: a script with
``#SBATCH`` or ``#PBS`` lines equivalent to the gsub options.

Standard library only: gsub imports this on every submission.  Each name is loaded from its module
when it is first used (:func:`__getattr__`), so that a script without another system's directives
costs gsub only :mod:`~gridsched.submission.compat.header`.

The modules: :mod:`~gridsched.submission.compat.rules` (the tables),
:mod:`~gridsched.submission.compat.values` (values as each system reads them),
:mod:`~gridsched.submission.compat.header` (:func:`scan`, :func:`has_foreign`),
:mod:`~gridsched.submission.compat.reader` (:func:`translate`) and
:mod:`~gridsched.submission.compat.emit` (:func:`emit_slurm`, :func:`emit_pbs`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gridsched.submission.compat.emit import (
        PATTERNS,
        emit_pbs,
        emit_slurm,
        pbs_lines,
        sbatch_lines,
        slurm_output,
        unknown_patterns,
    )
    from gridsched.submission.compat.header import has_foreign, scan
    from gridsched.submission.compat.reader import Translation, translate
    from gridsched.submission.compat.rules import (
        DIALECTS,
        GS_FLAG,
        GS_SWITCH,
        PBS,
        PBS_RESOURCES,
        PREFIXES,
        SGE,
        SGE_RESOURCES,
        SLURM,
        CompatError,
        Rule,
        manual_rows,
    )
    from gridsched.submission.compat.values import (
        Export,
        parse_begin,
        parse_export,
        parse_pbs_begin,
        pbs_time,
        sbatch_time,
        sge_time,
    )

__all__ = [
    "CompatError",
    "DIALECTS",
    "Export",
    "GS_FLAG",
    "GS_SWITCH",
    "PATTERNS",
    "PBS",
    "PBS_RESOURCES",
    "PREFIXES",
    "Rule",
    "SGE",
    "SGE_RESOURCES",
    "SLURM",
    "Translation",
    "emit_pbs",
    "emit_slurm",
    "has_foreign",
    "manual_rows",
    "parse_begin",
    "parse_export",
    "parse_pbs_begin",
    "pbs_lines",
    "pbs_time",
    "sbatch_lines",
    "sbatch_time",
    "scan",
    "sge_time",
    "slurm_output",
    "translate",
    "unknown_patterns",
]

# The module of each name above (loaded when the name is first asked for).
_MODULES = {
    "header": ("has_foreign", "scan"),
    "reader": ("Translation", "translate"),
    "emit": ("PATTERNS", "emit_pbs", "emit_slurm", "pbs_lines", "sbatch_lines", "slurm_output", "unknown_patterns"),
    "rules": (
        "CompatError",
        "DIALECTS",
        "GS_FLAG",
        "GS_SWITCH",
        "PBS",
        "PBS_RESOURCES",
        "PREFIXES",
        "Rule",
        "SGE",
        "SGE_RESOURCES",
        "SLURM",
        "manual_rows",
    ),
    "values": ("Export", "parse_begin", "parse_export", "parse_pbs_begin", "pbs_time", "sbatch_time", "sge_time"),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    """``compat.NAME``: the name from its module, imported now (and kept here)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
