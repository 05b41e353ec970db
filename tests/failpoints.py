"""Run the `gpucast` CLI with a failpoint armed: `python -m tests.failpoints POINT MARKER -- ARGS...`.

At the failpoint named POINT (`warehouse/housekeeping.py` `failpoint`) the process writes the top-level
packages it has imported so far to `imported(MARKER)` (one line, space-separated), then its pid to MARKER, and
waits there to be killed, so a crash test kills it at a known place, never after a race with how fast this
machine runs. Production code has no way to arm one.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from gpucast.flows.cli import main
from gpucast.warehouse.housekeeping import install_failpoint_hook


def imported(marker: Path) -> Path:
    """Where the stopped process lists the top-level packages it had imported when it stopped."""
    return marker.with_name(marker.name + ".imported")


def stop_at(point: str, marker: Path):
    def hook(name: str) -> None:
        if name == point:
            imported(marker).write_text(" ".join(sorted({m.split(".")[0] for m in sys.modules})))
            marker.write_text(str(os.getpid()))
            while True:
                time.sleep(60)

    return hook


def command(point: str, marker: Path, *args: str) -> list[str]:
    """The subprocess command line that runs `gpucast ARGS` stopping at `point`."""
    return [sys.executable, "-m", "tests.failpoints", point, str(marker), "--", *args]


if __name__ == "__main__":
    point, marker, sep, *rest = sys.argv[1:]
    assert sep == "--", "usage: python -m tests.failpoints POINT MARKER -- ARGS..."
    install_failpoint_hook(stop_at(point, Path(marker)))
    sys.exit(main(rest))
