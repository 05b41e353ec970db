"""The read commands: status, sql, backtest and report look at the warehouse and print; none writes to it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpucast.flows.cli.options import _require_ml
from gpucast.flows.environment import configured_prefect_api
from gpucast.flows.settings import ReadSettings, Settings

STATUS_API_TIMEOUT_S = 5.0  # `gpucast status` waits this long per request for a configured Prefect API
SQL_MAX_ROWS = 1000  # rows `gpucast sql` prints as a table unless told otherwise


def _status(args: argparse.Namespace, settings: ReadSettings) -> int:
    from gpucast.flows.report import warehouse_status

    print(warehouse_status(settings.storage, args.limit, settings.quality.backtest_days))
    api = configured_prefect_api()
    if args.flows is None and api is None:
        print("\nPrefect flow runs: skipped (no Prefect API is configured, so runs here use a temporary server; "
              "`gpucast status --flows` starts one to read this machine's run history, about 20 s)")
    elif args.flows is not False:
        from gpucast.flows.status import flow_runs_text

        print()
        print(flow_runs_text(limit=args.limit, timeout_s=STATUS_API_TIMEOUT_S if api else None))
    return 0


def _sql(args: argparse.Namespace, settings: ReadSettings) -> int:
    from gpucast.records.rows import Rows
    from gpucast.warehouse.queries import check_table_size, run_sql

    max_rows = args.max_rows if args.format == "table" and args.max_rows > 0 else None
    storage = settings.storage
    # a table of a few rows of plain types comes as DuckDB's rows, printed without Polars (issue 52 item 4)
    df, total = run_sql(storage.query_path, args.query, settings.sql, storage.sql_temp_dir, max_rows,
                        as_rows=args.format == "table")
    if args.format == "table":
        check_table_size(df, settings.sql)
    if isinstance(df, Rows):
        from gpucast.tasks.report.sql_table import sql_table

        sys.stdout.write(sql_table(df, total))
        return 0
    from gpucast.tasks.report.render import query_result_parts

    for part in query_result_parts(df, args.format, total):  # a piece at a time: never the whole text at once
        sys.stdout.write(part)
    return 0


def _backtest(args: argparse.Namespace, settings: Settings) -> int:
    from gpucast.flows.report import backtest_text

    print(backtest_text(settings.storage, settings.quality.backtest_days))
    return 0


def _report(args: argparse.Namespace, settings: Settings) -> int:
    _require_ml()
    from gpucast.flows.report import write_train_report

    text, written = write_train_report(settings.storage, args.run, Path(args.out) if args.out else None)
    print(text)
    print("\nwrote " + ", ".join(str(p) for p in written))
    return 0
