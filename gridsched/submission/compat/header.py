"""Finding directive lines at the top of a script (:func:`scan`) and whether it has another system's
(:func:`has_foreign`): what every submission asks, so this module loads nothing else of :mod:`..compat`."""

from __future__ import annotations

import re

# The prefixes of other systems' directive lines (the keys of :data:`.rules.PREFIXES`).
FOREIGN = ("#SBATCH", "#PBS", "#$")

_SGE_LINE = re.compile(r"#\$[ \t]*(-|$)")  # #$ in the first column, then an option (or nothing)


def scan(text: str, prefix: str) -> list[tuple[int, str]]:
    """``(line number, option text)`` of each ``prefix`` line of ``text``.

    ``#SBATCH`` and ``#PBS`` lines are read at the top of the script: scanning
    skips the shebang, blank lines and comments and stops at the first other
    line, as Slurm and PBS do.  Grid Engine reads every line that starts with
    ``#$`` in its first column, anywhere in the script, the options following
    with or without a space (``#$-l h_rt=1:00:00``): so does :func:`scan`
    (seen with Grid Engine 8.1.9's qsub: ``#$-cwd`` and ``#$-l`` honoured, a
    ``#$ -N`` below the first command too, an indented ``#$`` line not).  A
    ``#$`` line whose text is no option (``#$HOME is ...``) is taken for a
    comment, so that such a line in a script of another kind does not make
    it a Grid Engine script.
    """
    if prefix == "#$":
        lines = enumerate(text.splitlines(), start=1)
        return [(n, line[2:].strip()) for n, line in lines if _SGE_LINE.match(line)]
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if n == 1 and s.startswith("#!"):
            continue
        if s and not s.startswith("#"):
            break
        if s == prefix or s.startswith((prefix + " ", prefix + "\t")):
            out.append((n, s[len(prefix) :].strip()))
    return out


def has_foreign(text: str) -> bool:
    """Whether ``text`` has ``#SBATCH``, ``#PBS`` or ``#$`` directives (:func:`scan`)."""
    return any(scan(text, prefix) for prefix in FOREIGN)
