"""``python -m gridsched.subtasks``, as jobs queued by an earlier release still run it:
:mod:`gridsched.job.subtasks`.
"""

import sys

from gridsched.job.subtasks import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
