"""`gpucast`: the command line for data engineers, planners and on-call staff."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gpucast.flows  # noqa: F401  (sets Prefect defaults before Prefect is imported)
from gpucast.warehouse.settings import Settings


def _simulate(args: argparse.Namespace) -> int:
    from gpucast.tasks.simulate import SimConfig, write_logs

    cfg = SimConfig(
        days=args.days,
        jobs_per_day=args.jobs_per_day,
        pending_fraction=args.pending_fraction,
        dirty_fraction=args.dirty_fraction,
        seed=args.seed,
        fmt=args.format,
    )
    paths = write_logs(Path(args.out), cfg)
    print(f"wrote {len(paths)} file(s) to {args.out}")
    return 0


def _ingest(args: argparse.Namespace) -> int:
    from gpucast.flows.ingest import ingest_job_logs

    summary = ingest_job_logs(paths=args.paths or None, chunk_rows=args.chunk_rows)
    print(
        f"run {summary['run_id']}: {summary['files']} file(s), {summary['rows_read']:,} rows read: "
        f"{summary['rows_loaded']:,} loaded, {summary['rows_rejected']:,} rejected, "
        f"{summary['rows_duplicate']:,} duplicate; {summary['files_rejected']} file(s) rejected"
    )
    if summary["rows_rejected"] or summary["files_rejected"]:
        print("see why: gpucast sql \"SELECT source_file, source_row, reason_text FROM rejected_job_logs "
              f"WHERE ingest_run_id = '{summary['run_id']}' LIMIT 20\"")
    return 0


def _status(args: argparse.Namespace) -> int:
    from gpucast.warehouse.report import status_text

    print(status_text(Settings.from_env(), limit=args.limit))
    return 0


def _sql(args: argparse.Namespace) -> int:
    from gpucast.warehouse.report import run_query

    print(run_query(Settings.from_env(), args.query, args.format), end="")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from gpucast.flows.ingest import ingest_job_logs
    from gpucast.tasks.simulate import SimConfig, write_logs
    from gpucast.warehouse.report import status_text

    settings = Settings.from_env().ensure()
    out = settings.inbox_dir / f"demo-seed{args.seed}"
    cfg = SimConfig(days=args.days, jobs_per_day=args.jobs_per_day, dirty_fraction=args.dirty_fraction, seed=args.seed)
    paths = write_logs(out, cfg)
    print(f"[1/3] simulated {len(paths)} day(s) of job logs into {out}")
    summary = ingest_job_logs(paths=None)
    print(f"[2/3] ingested run {summary['run_id']}: {summary['rows_loaded']:,} rows loaded, "
          f"{summary['rows_rejected']:,} rejected, {summary['rows_duplicate']:,} duplicate")
    print("[3/3] status\n")
    print(status_text(settings, limit=5))
    print(f"\nwarehouse: {settings.db_path}\nlake:      {settings.lake_dir}")
    print('next: gpucast sql "SELECT status, count(*) FROM job_logs GROUP BY ALL"')
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpucast", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("simulate", help="write simulated job logs")
    s.add_argument("--out", required=True, help="folder to write into")
    s.add_argument("--days", type=int, default=7)
    s.add_argument("--jobs-per-day", type=int, default=500)
    s.add_argument("--pending-fraction", type=float, default=0.1)
    s.add_argument("--dirty-fraction", type=float, default=0.0, help="share of bad records to inject")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--format", choices=("jsonl", "csv", "parquet"), default="jsonl")
    s.set_defaults(func=_simulate)

    i = sub.add_parser("ingest", help="ingest job-log files, folders or globs (default: new inbox files)")
    i.add_argument("paths", nargs="*", help="files, folders or globs; none means $GPUCAST_HOME/inbox")
    i.add_argument("--chunk-rows", type=int, default=100_000, help="rows per chunk (bounds memory)")
    i.set_defaults(func=_ingest)

    st = sub.add_parser("status", help="recent ingest runs, their counts and failures")
    st.add_argument("--limit", type=int, default=10)
    st.set_defaults(func=_status)

    q = sub.add_parser("sql", help="run a read-only SQL query on the warehouse")
    q.add_argument("query")
    q.add_argument("--format", choices=("table", "csv", "json"), default="table")
    q.set_defaults(func=_sql)

    d = sub.add_parser("demo", help="simulate a week of logs, ingest them, show status")
    d.add_argument("--days", type=int, default=7)
    d.add_argument("--jobs-per-day", type=int, default=500)
    d.add_argument("--dirty-fraction", type=float, default=0.02)
    d.add_argument("--seed", type=int, default=0)
    d.set_defaults(func=_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"gpucast {args.command}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001  (the last line a person sees must say what failed)
        from gpucast.warehouse.db import WarehouseBusy

        if isinstance(exc, WarehouseBusy):
            print(f"gpucast {args.command}: {exc}", file=sys.stderr)
            return 3
        import duckdb

        if isinstance(exc, duckdb.Error):
            print(f"gpucast {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
