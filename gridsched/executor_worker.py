"""``python -m gridsched.executor_worker``, as jobs queued by an earlier release still run it:
:mod:`gridsched.job.executor_worker`.
"""

import sys

from gridsched.job.executor_worker import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
