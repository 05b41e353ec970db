"""The planners' page: CPU seconds a render, its charts written from one draw (`site._svg`) beside two
(`savefig(bbox_inches="tight")`, what the page did before), alternating in one process.

Reads the page's frames once from a published copy (`$GPUCAST_HOME/published.duckdb` of `make demo`, or any), then
renders the page `--repeat` times with each writer, alternating, and prints the CPU seconds a render of each (this
process's `time.process_time`: a loaded machine's wall clock says little) and each chart's size in points, which
the two writers must give alike.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_site.py PUBLISHED_DUCKDB [--repeat 6]
"""

from __future__ import annotations

import argparse
import io
import re
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path

from gpucast.tasks.report import site
from gpucast.warehouse import queries

SIZE = re.compile(r'<svg[^>]* width="([\d.]+)pt" height="([\d.]+)pt"')


def two_draws(fig) -> str:
    """The page's chart writer before: matplotlib's tight crop, which draws the figure to measure it, then again."""
    buf = io.StringIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
        fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg"):]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("published", type=Path, help="a published copy (published.duckdb)")
    parser.add_argument("--repeat", type=int, default=6)
    args = parser.parse_args()
    frames = queries.site_frames(args.published)
    writers = {"one draw (site._svg)": site._svg, "two draws (bbox_inches='tight')": two_draws}
    sizes, seconds = {}, dict.fromkeys(writers, 0.0)
    for name, writer in writers.items():  # warm: imports, fonts
        site._svg = writer
        sizes[name] = [tuple(float(v) for v in m) for m in SIZE.findall(site.render_site(frames, datetime.now(UTC)))]
    for _ in range(args.repeat):
        for name, writer in writers.items():
            site._svg = writer
            start = time.process_time()
            site.render_site(frames, datetime.now(UTC))
            seconds[name] += time.process_time() - start
    for name in writers:
        print(f"{name}: {seconds[name] / args.repeat:.3f} CPU-s a render ({args.repeat} renders); charts "
              + ", ".join(f"{w:.1f} x {h:.1f} pt" for w, h in sizes[name]))
    one, two = seconds.values()
    print(f"one draw / two draws: x{one / two:.2f}")


if __name__ == "__main__":
    main()
