"""Regenerate the golden nights' fingerprint (tests/data/golden/demo_nights.json; tests/golden/nights.py).

Regenerate ONLY for an intended behaviour change (a new plan rule, a changed forecast quantile, a page
section added), and name that change in the commit that updates the golden file; a difference you did
not intend is a regression to fix, not a golden file to update. `git diff tests/data/golden` then shows
the rows that changed, for the reviewer.

    .venv/bin/python -m tests.golden.regenerate            # the nights from the committed trace cache
    .venv/bin/python -m tests.golden.regenerate --retrace  # trace afresh first (the zoo or tracing changed)

One OpenMP thread, as the test runs it (LightGBM and torch are bit-stable with one thread here).
"""

from __future__ import annotations

import os
import tempfile

os.environ["OMP_NUM_THREADS"] = "1"  # before numpy, LightGBM or torch are imported
# Prefect's home (and its defaults: no telemetry) in a temporary folder, as the tests' session has it; the
# nights' own data directories are temporary folders too (`nights.fingerprint_of_fresh_nights`)
os.environ["GPUCAST_HOME"] = tempfile.mkdtemp(prefix="gpucast-golden-prefect-")

from gpucast.flows.environment import configure  # noqa: E402

configure()


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    from prefect.testing.utilities import prefect_test_harness

    from tests.golden import nights

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--retrace", action="store_true", help=f"trace afresh and rewrite {nights.TRACES.name} first")
    args = parser.parse_args(argv)
    with prefect_test_harness(server_startup_timeout=90):
        if args.retrace or not nights.TRACES.exists():
            nights.retrace()
            print(f"wrote {nights.TRACES}")
        got = nights.fingerprint_of_fresh_nights()
    nights.GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    nights.GOLDEN.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {nights.GOLDEN}: " + ", ".join(f"{k} {len(v) - (k != 'page')} rows" for k, v in got.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
