"""``python -m gridsched.grunjob``, as jobs queued by an earlier release still run it: :mod:`gridsched.job.grun`."""

import sys

from gridsched.job.grun import main

if __name__ == "__main__":
    sys.exit(main(sys.argv))
