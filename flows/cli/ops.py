"""On-call operations on the planners' published copy: restore (put back the previous one)."""

from __future__ import annotations

import argparse
import sys

from gpucast.flows.settings import Settings


def _restore(args: argparse.Namespace, settings: Settings) -> int:
    """The previous planners' copy put back, and the page rewritten from it (review 85 S2-5: the page kept showing the
    night on-call meant to withdraw). A page that cannot be written is said; the copy stays restored."""
    from gpucast.flows.plan import write_site
    from gpucast.warehouse.publish import restore_previous

    print(f"restored the previous published copy: {restore_previous(settings.storage)}")
    try:
        print(f"the planners' page rewritten from it: {write_site(settings.storage, artifact=False)}")
    except Exception as exc:  # noqa: BLE001  (the restore stands; the page's failure is said with the fix)
        print(f"gpucast restore: the planners' page could not be rewritten ({type(exc).__name__}: {exc}); it still "
              "shows the withdrawn night: fix the cause, then `gpucast site`", file=sys.stderr)
        return 5
    return 0
