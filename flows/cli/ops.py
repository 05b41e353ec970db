"""On-call operations on the planners' published copy: restore (put back the previous one)."""

from __future__ import annotations

import argparse

from gpucast.flows.settings import Settings


def _restore(args: argparse.Namespace, settings: Settings) -> int:
    from gpucast.warehouse.publish import restore_previous

    print(f"restored the previous published copy: {restore_previous(settings.storage)}")
    return 0
