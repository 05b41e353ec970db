"""On-call operations on the planners' published copy: restore (put back the previous one)."""

from __future__ import annotations

import argparse

from gpucast.flows.cli.options import settings_from


def _restore(args: argparse.Namespace) -> int:
    from gpucast.warehouse.publish import restore_previous

    print(f"restored the previous published copy: {restore_previous(settings_from(args).storage)}")
    return 0
