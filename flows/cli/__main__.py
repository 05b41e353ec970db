"""`python -m gpucast.flows.cli ARGS`: the same as the console script `gpucast ARGS`."""

import sys

from gpucast.flows.cli import main

if __name__ == "__main__":
    sys.exit(main())
