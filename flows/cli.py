"""`gpucast`: the command line for data engineers, planners and on-call staff."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gpucast.flows  # noqa: F401  (sets Prefect defaults before Prefect is imported)
from gpucast.warehouse.settings import Settings, env_number


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

    settings = Settings.from_env()
    if settings.query_path.exists():
        print(status_text(settings, limit=args.limit))
    else:
        print(f"no warehouse at {settings.db_path} yet")
    if not args.no_flows:
        from gpucast.flows.status import flow_runs_text

        print()
        print(flow_runs_text(limit=args.limit))
    return 0


def _sql(args: argparse.Namespace) -> int:
    from gpucast.warehouse.report import run_query

    print(run_query(Settings.from_env(), args.query, args.format), end="")
    return 0


def _csv_list(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def _train(args: argparse.Namespace) -> int:
    from gpucast.flows.train import train_models

    out = train_models(targets=_csv_list(args.target), models=_csv_list(args.models), preset=args.preset,
                       repeats=args.repeats, seed=args.seed, min_labelled=args.min_labelled, device=args.device,
                       epochs=args.epochs, max_rows=args.max_rows or None, nn_max_minutes=args.nn_max_minutes)
    print(f"train run {out['train_run_id']} on {out['device']}:")
    for t in out["targets"]:
        what = f"skipped ({t['skipped']})" if t["skipped"] else f"champion {t['champion']} ({t['rows']:,} labelled jobs)"
        print(f"  {t['target']}: {what}")
    print("see: gpucast report")
    return 0


def _report(args: argparse.Namespace) -> int:
    import polars as pl

    from gpucast.tasks.report import bar_chart, markdown, predicted_vs_actual
    from gpucast.warehouse.report import latest_train_run, train_tables

    settings = Settings.from_env()
    run_id = args.run or latest_train_run(settings)
    summary, champions = train_tables(settings, run_id)
    out = Path(args.out) if args.out else settings.reports_dir / run_id
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(markdown(run_id, summary, champions))
    written = [out / "report.md"]
    for champ in champions.filter(pl.col("skipped_reason").is_null()).iter_rows(named=True):
        written.append(bar_chart(summary, champ["target"], out / f"metrics_{champ['target']}.png"))
        preds = Path(champ["model_dir"]) / "test_predictions.parquet"
        if preds.exists():
            png = predicted_vs_actual(pl.read_parquet(preds), champ["target"], out / f"pred_vs_actual_{champ['target']}.png")
            if png:
                written.append(png)
    print(markdown(run_id, summary, champions))
    print("\nwrote " + ", ".join(str(p) for p in written))
    return 0


def _gpu_mem_default() -> float:
    from gpucast.tasks.score import DEFAULT_GPU_MEM_GB

    return env_number("GPUCAST_GPU_MEM_GB", DEFAULT_GPU_MEM_GB)


def _score(args: argparse.Namespace) -> int:
    from gpucast.flows.score import score_pending

    out = score_pending(gpu_mem_gb=args.gpu_mem_gb, batch_rows=args.batch_rows, device=args.device)
    print(f"score run {out['score_run_id']}: {out['forecasts']:,} forecasts for {out['pending_jobs']:,} pending jobs "
          f"({', '.join(f'{t}: {m}' for t, m in out['champions'].items())})")
    print('see: gpucast sql "SELECT * FROM capacity_daily ORDER BY ALL"')
    return 0


def _run_nightly(args: argparse.Namespace, paths: list[str] | None) -> dict:
    from gpucast.flows.nightly import nightly

    return nightly(paths=paths, models=_csv_list(args.models), preset=args.preset, repeats=args.repeats,
                   epochs=args.epochs, nn_max_minutes=args.nn_max_minutes, min_labelled=args.min_labelled,
                   gpu_mem_gb=args.gpu_mem_gb,
                   max_reject_fraction=args.max_reject_fraction, train=not args.no_train)


CAPACITY_SUMMARY = """
SELECT queue, sum(jobs) AS jobs, round(sum(gpu_hours_p50), 1) AS gpu_hours_p50,
       round(sum(gpu_hours_p90), 1) AS gpu_hours_p90, round(max(mem_p90_max_gb), 1) AS mem_p90_max_gb,
       sum(jobs_over_24gb) AS over_24gb, sum(jobs_over_40gb) AS over_40gb, sum(jobs_over_80gb) AS over_80gb
FROM capacity_daily GROUP BY ALL ORDER BY queue
"""


def _summary(settings: Settings) -> None:
    from gpucast.warehouse.report import run_query

    print("\nCapacity needed by the pending queue (capacity_daily, summed over days):")
    print(run_query(settings, CAPACITY_SUMMARY), end="")
    print("\nChampions (model_leaderboard):")
    print(run_query(settings, "SELECT target, model, round(validation_rmse, 3) AS validation_rmse, "
                              "round(test_mape, 1) AS test_mape, round(test_r2, 3) AS test_r2 "
                              "FROM model_leaderboard WHERE is_champion ORDER BY target"), end="")


def _nightly(args: argparse.Namespace) -> int:
    out = _run_nightly(args, args.paths or None)
    print(out["report"])
    _summary(Settings.from_env())
    return 0


def _demo(args: argparse.Namespace) -> int:
    from gpucast.tasks.simulate import SimConfig, write_logs

    settings = Settings.from_env().ensure()
    out = settings.inbox_dir / f"demo-seed{args.seed}"
    cfg = SimConfig(days=args.days, jobs_per_day=args.jobs_per_day, dirty_fraction=args.dirty_fraction,
                    pending_fraction=args.pending_fraction, seed=args.seed)
    paths = write_logs(out, cfg)
    print(f"[1/2] simulated {len(paths)} day(s) of job logs into {out}")
    print(f"[2/2] nightly flow: ingest -> validate -> features -> train ({args.repeats} repeat(s), network capped at "
          f"{args.epochs} epochs) -> score -> publish")
    result = _run_nightly(args, None)
    ing, sc = result["ingest"], result["score"]
    print(f"\ningested {ing['rows_read']:,} rows: {ing['rows_loaded']:,} loaded, {ing['rows_rejected']:,} rejected, "
          f"{ing['rows_duplicate']:,} duplicate; trained {result['train']['where']}; "
          f"{sc['forecasts']:,} forecasts for {sc['pending_jobs']:,} pending jobs")
    _summary(settings)
    print(f"""
Where to look next:
  gpucast sql "SELECT * FROM capacity_daily ORDER BY ALL"          # per day and queue
  gpucast sql "SELECT * FROM pending_forecasts WHERE oom_risk"       # jobs that will not fit
  gpucast sql "SELECT * FROM model_leaderboard ORDER BY target, rank"
  gpucast status                                                     # runs, failures, rejected rows
  gpucast report                                                     # charts of the training run
  planners' database: {settings.published_path} (read-only copy, replaced atomically each run)""")
    return 0


def _nn_budget_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nn-max-minutes", type=float, default=None,
                   help="the Transformer-BiGRU's time budget per fit, in minutes (env GPUCAST_NN_MAX_MINUTES, "
                        "default 20; 0: no limit)")


def _nightly_options(p: argparse.ArgumentParser, repeats: int, epochs: int | None) -> None:
    p.add_argument("--models", help="comma-separated registry names (default: all)")
    p.add_argument("--preset", default="paper", choices=("paper", "bigru_first", "tuned", "tiny"))
    p.add_argument("--repeats", type=int, default=repeats, help="repeated 70/30 holdouts")
    p.add_argument("--epochs", type=int, default=epochs, help="cap the Transformer-BiGRU's epochs")
    _nn_budget_option(p)
    p.add_argument("--min-labelled", type=int, default=200, help="skip a target with fewer labelled jobs")
    p.add_argument("--gpu-mem-gb", type=float, default=_gpu_mem_default(),
                   help="GPU memory oom_risk is judged against (env GPUCAST_GPU_MEM_GB, default 80)")
    p.add_argument("--max-reject-fraction", type=float, default=None,
                   help="fail the run above this share of rejected rows (env GPUCAST_MAX_REJECT_FRACTION, default 0.2)")
    p.add_argument("--no-train", action="store_true", help="score with the current champions, do not retrain")


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

    st = sub.add_parser("status", help="recent runs (ingest, flows), failures and their errors")
    st.add_argument("--limit", type=int, default=10)
    st.add_argument("--no-flows", action="store_true", help="only the warehouse (do not ask the Prefect API)")
    st.set_defaults(func=_status)

    q = sub.add_parser("sql", help="run a read-only SQL query on the warehouse")
    q.add_argument("query")
    q.add_argument("--format", choices=("table", "csv", "json"), default="table")
    q.set_defaults(func=_sql)

    t = sub.add_parser("train", help="retrain every model, compare them, pick a champion per target")
    t.add_argument("--target", help="comma-separated targets (default: all three)")
    t.add_argument("--models", help="comma-separated registry names (default: all)")
    t.add_argument("--preset", default="paper", choices=("paper", "bigru_first", "tuned", "tiny"),
                   help="Transformer-BiGRU preset")
    t.add_argument("--repeats", type=int, default=3, help="repeated 70/30 holdouts")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--min-labelled", type=int, default=200, help="skip a target with fewer labelled jobs")
    t.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    t.add_argument("--epochs", type=int, default=None, help="cap the Transformer-BiGRU's epochs")
    _nn_budget_option(t)
    t.add_argument("--max-rows", type=int, default=500_000,
                   help="train on at most this many of the most recent COMPLETED jobs (0: all)")
    t.set_defaults(func=_train)

    r = sub.add_parser("report", help="Markdown table and charts of the latest (or a given) train run")
    r.add_argument("--out", default=None, help="folder (default: $GPUCAST_HOME/reports/<run>)")
    r.add_argument("--run", default=None, help="train run id (default: the latest successful one)")
    r.set_defaults(func=_report)

    sc = sub.add_parser("score", help="forecast every PENDING job (P10/P50/P90 per target) with the champions")
    sc.add_argument("--gpu-mem-gb", type=float, default=_gpu_mem_default(),
                    help="GPU memory oom_risk is judged against (env GPUCAST_GPU_MEM_GB, default 80)")
    sc.add_argument("--batch-rows", type=int, default=250_000, help="rows per scoring batch (bounds memory)")
    sc.add_argument("--device", default=None, help="cuda or cpu for the Transformer-BiGRU")
    sc.set_defaults(func=_score)

    n = sub.add_parser("nightly", help="ingest -> validate -> features -> train -> score -> publish")
    n.add_argument("paths", nargs="*", help="files, folders or globs; none means new files in $GPUCAST_HOME/inbox")
    _nightly_options(n, repeats=3, epochs=None)
    n.set_defaults(func=_nightly)

    d = sub.add_parser("demo", help="simulate a week of logs and run the nightly flow on them (CPU, minutes)")
    d.add_argument("--days", type=int, default=7)
    d.add_argument("--jobs-per-day", type=int, default=500)
    d.add_argument("--pending-fraction", type=float, default=0.15)
    d.add_argument("--dirty-fraction", type=float, default=0.02)
    d.add_argument("--seed", type=int, default=0)
    _nightly_options(d, repeats=2, epochs=30)
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
        from gpucast.flows.nightly import ValidationFailed
        from gpucast.warehouse.db import WarehouseBusy

        if isinstance(exc, ValidationFailed):
            print(f"gpucast {args.command}: {exc}", file=sys.stderr)
            return 4
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
