"""Benchmark: peak RSS of reading CSV rows that are cheap to write and costly to hold (review 79 S1-3, review 80).

    python tests/benchmarks/bench_csv_long_fields.py [--rows 400 800 2000] [--width 1] [--workdir DIR]
    python tests/benchmarks/bench_csv_long_fields.py --empty-columns 2000 --rows 20000 40000 100000
    python tests/benchmarks/bench_csv_long_fields.py --emoji --rows 100      # 4-byte text
    python tests/benchmarks/bench_csv_long_fields.py --width 300 --rows 1    # one record of 300 long fields

Each case is a gzip CSV of `--rows` rows, each with `--width` fields of MAX_CSV_FIELD_CHARS - 10 characters (the
longest a row may hold without rejecting its file), or with `--empty-columns` empty columns the contract does not
know, read through `read_chunks` in a fresh process, as staging reads it: printed are the file's size, the rows read,
the process's peak RSS and the seconds. The baseline is the reader before chunks were bounded
(`git show 20fd141:tasks/ingest/readers.py`): 400 rows of one long field peaked at 0.98 GB and 800 at 1.80 GB, growing
~2.1 MB a row; 40,000 rows of 2,000 empty columns 0.80 GB (review 80); 100 rows of emoji 0.92 GB and one record of 300
long fields 0.74 GB (review 81, against `git show 5701321:...`). The goal is a peak that does not grow with the rows.
"""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
import tempfile
from pathlib import Path


def write_case(path: Path, rows: int, width: int, chars: int, empty_columns: int, emoji: bool) -> None:
    if empty_columns:
        header = "job_id,status,submitted_at," + ",".join(f"extra{k}" for k in range(empty_columns))
        row = ",FAILED,2026-01-01T00:00:00Z" + "," * empty_columns
    else:
        header = "job_id,status,submitted_at,failure_reason" + "".join(f",extra{k}" for k in range(1, width))
        row = ",FAILED,2026-01-01T00:00:00Z" + f",{('😀' if emoji else 'x') * chars}" * width
    with gzip.open(path, "wt") as f:
        f.write(header + "\n")
        for i in range(rows):
            f.write(f"j{i}{row}\n")


READ = """
import resource, sys, time
from pathlib import Path
from gpucast.tasks.ingest.readers import FileInfo, read_chunks
p = Path(sys.argv[1])
t = time.perf_counter()
try:
    rows = sum(chunk.height for chunk in read_chunks(p, FileInfo(p)))
except Exception as exc:  # a file rejected whole: its peak is what was held before the rejection
    print(type(exc).__name__, str(exc)[:120].replace(" ", "_"))
    rows = 0
print(rows, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, time.perf_counter() - t)
"""


def main() -> None:
    from gpucast.tasks.ingest.readers import MAX_CSV_FIELD_CHARS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[400, 800, 2000])
    parser.add_argument("--width", type=int, default=1, help="long fields a row (the first is failure_reason)")
    parser.add_argument("--emoji", action="store_true", help="long fields of a 4-byte character")
    parser.add_argument("--empty-columns", type=int, default=0, help="rows of this many empty columns instead")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-csv-"))
    workdir.mkdir(parents=True, exist_ok=True)
    shape = (f"{args.empty_columns:,} empty columns" if args.empty_columns else
             f"{args.width} field(s) of {MAX_CSV_FIELD_CHARS - 10:,} {'emoji' if args.emoji else 'characters'}")
    print(f"rows of {shape}, read by read_chunks in a fresh process")
    for rows in args.rows:
        path = workdir / (f"wide-{rows}x{args.empty_columns}.csv.gz" if args.empty_columns else
                          f"long-{rows}x{args.width}{'-emoji' if args.emoji else ''}.csv.gz")
        if not path.exists():
            write_case(path, rows, args.width, MAX_CSV_FIELD_CHARS - 10, args.empty_columns, args.emoji)
        out = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True, text=True, check=True).stdout
        *rejected, last = out.splitlines()
        read, rss_gb, seconds = last.split()
        said = f" ({rejected[0].replace('_', ' ')})" if rejected else ""
        print(f"{rows:>6,} rows: gzip {path.stat().st_size / 1e6:.1f} MB, {int(read):,} rows read{said}, peak RSS "
              f"{float(rss_gb):.2f} GB, {float(seconds):.1f} s")


if __name__ == "__main__":
    main()
