"""Warehouse side of scoring: the current champions and the one-transaction publish of a run's forecasts."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl

from gpucast.records.files import temp_beside
from gpucast.records.outcomes import Champion
from gpucast.warehouse.db import forecast_file_stem, transaction
from gpucast.warehouse.housekeeping import failpoint
from gpucast.warehouse.runs import finish

FORECAST_COLUMNS = ("job_id", "target", "p10", "p50", "p90", "model", "train_run_id", "score_run_id", "scored_at",
                    "safe_request_gb", "gpu_mem_gb", "oom_risk", "ood", "ood_reason", "arch_inferred", "arch_match_distance")

# DuckDB's row group (rows): a run's staged parts are written in row groups of this size, so that `publish`'s insert
# fills whole row groups of `forecasts`. Parquet row groups of another size (Polars' default splits a frame's chunks:
# ~125,000 rows for the 250,000-job batches `Scorer.score` makes) left the insert partly filled row groups, which the
# writer's close (DuckDB's checkpoint) then rewrote: 2.8-3.2 CPU-s and +330-410 MiB at 1M pending jobs x 3 targets,
# the peak of `gpucast score` (review 57 S4), against 0.1 CPU-s and nothing (issue 52 item 5, docs/benchmarks.md).
STAGED_ROW_GROUP_ROWS = 122_880


def write_staged(scored: pl.DataFrame, path: Path) -> None:
    """Stage one target's forecasts of a run (`FORECAST_COLUMNS` of `scored`) as the Parquet part `publish` inserts
    and the planners' copy keeps (zstd), in row groups of DuckDB's size (`STAGED_ROW_GROUP_ROWS`)."""
    scored.select(FORECAST_COLUMNS).write_parquet(path, row_group_size=STAGED_ROW_GROUP_ROWS)


# The same rule as the `model_leaderboard` view's `latest` CTE (schema.sql), which reads this view.
LATEST_CHAMPIONS = "SELECT target, model, train_run_id, model_dir FROM current_champions ORDER BY target"


def latest_champions(con: duckdb.DuckDBPyConnection) -> list[Champion]:
    """Per target, the champion of the latest successful train run that trained it."""
    return [Champion(*row) for row in con.execute(LATEST_CHAMPIONS).fetchall()]


# The champions in place at a night's clock (a backfill's `as_of`): the `current_champions` view's rule (schema.sql)
# over the succeeded train runs of earlier nights only. A run's night is its `as_of` (the clock it trained for), or
# its start for a live run; strictly earlier, so an earlier attempt at the same night is not its own champion.
# `tests/warehouse/test_backtest.py` checks that it picks what the view picks when every run is earlier, a backfill
# run after the latest night included (the view orders by the night too: review 64 S1-1).
CHAMPIONS_AS_OF = """
SELECT c.target, c.model, coalesce(c.champion_run_id, c.train_run_id) AS train_run_id, c.model_dir
FROM model_champions c JOIN train_runs r USING (train_run_id)
WHERE r.status = 'succeeded' AND c.model IS NOT NULL AND coalesce(r.as_of, r.started_at) < ?
QUALIFY row_number() OVER (PARTITION BY c.target ORDER BY coalesce(r.as_of, r.started_at) DESC, r.started_at DESC) = 1
"""


def champions_as_of(con: duckdb.DuckDBPyConnection, as_of: datetime | None) -> list[Champion]:
    """Per target, the champion in place on the night `as_of` (`CHAMPIONS_AS_OF`); a live night's (None): the latest
    (`latest_champions`)."""
    if as_of is None:
        return latest_champions(con)
    return [Champion(*row) for row in con.execute(f"{CHAMPIONS_AS_OF} ORDER BY target", [as_of]).fetchall()]


def publish(con: duckdb.DuckDBPyConnection, score_run_id: str, parts: list[Path], pending_jobs: int,
            targets: list[str], gpu_mem_gb: float, keep_days: int, keep_in: Path | None = None) -> tuple[int, int]:
    """Insert a run's staged forecasts, mark it published and prune old runs' forecasts, in one
    transaction: all or nothing. Returns (forecasts published, score runs pruned).

    Idempotent: a run already published (an earlier attempt committed, then failed after its commit and was
    retried) is not inserted again; its count is returned. Before, such a retry inserted the run a second time,
    failed the duplicate check ("staged twice ... nothing was published") and marked the committed run failed.

    `keep_in` (the planners' forecast files folder, `db.forecast_files_dir`): once committed, the staged Parquet
    parts also get a name there (a hard link: no bytes copied), so the next publish of the planners' copy takes
    them as the run's files instead of writing the run's forecasts again (warehouse/publish.py). Call it under the
    writer lock (`db.writer`), which the publish of the copy holds too."""
    with transaction(con):
        done = con.execute("SELECT forecasts FROM score_runs WHERE score_run_id = ? AND status = 'published'",
                           [score_run_id]).fetchall()
        if done:
            return done[0][0], 0
        if parts:
            files = [str(p) for p in parts]
            con.execute(f"INSERT INTO forecasts ({', '.join(FORECAST_COLUMNS)}) "
                        f"SELECT {', '.join(FORECAST_COLUMNS)} FROM read_parquet(?)", [files])
        n, n_ood, forecasts_at = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE ood), max(scored_at) FROM forecasts WHERE score_run_id = ?",
            [score_run_id]).fetchall()[0]
        check_once_each(con, score_run_id, n)
        finish(con, "score", score_run_id, "published", pending_jobs=pending_jobs, forecasts=n, targets=targets,
               gpu_mem_gb=gpu_mem_gb, ood_forecasts=n_ood, forecasts_at=forecasts_at)
        pruned = prune(con, score_run_id, keep_days)
        failpoint("score:before-commit")
    if keep_in is not None:
        keep_staged(keep_in, score_run_id, parts)
    return n, pruned


# Distinct (job, target) pairs of a run, counted on a 64-bit hash of each pair: where the hashes are all distinct, so
# are the pairs, and only a run whose hashes collide (or that staged a pair twice) is counted exactly (`check_once_each`).
DISTINCT_HASHED = "SELECT count(DISTINCT hash(job_id, target)) FROM forecasts WHERE score_run_id = ?"
DISTINCT_PAIRS = "SELECT count(DISTINCT (job_id, target)) FROM forecasts WHERE score_run_id = ?"


def check_once_each(con: duckdb.DuckDBPyConnection, score_run_id: str, n: int) -> None:
    """Refuse a run whose `n` inserted forecasts name a (job, target) twice (what the table's key used to refuse,
    schema.sql): `ValueError`, and nothing is published. Counted on the pairs' hashes first (`DISTINCT_HASHED`)."""
    if con.execute(DISTINCT_HASHED, [score_run_id]).fetchall()[0][0] == n:
        return
    distinct = con.execute(DISTINCT_PAIRS, [score_run_id]).fetchall()[0][0]
    if distinct != n:
        raise ValueError(f"score run {score_run_id} staged {n - distinct:,} forecast(s) twice for the same job and "
                         "target; nothing was published")


STAGED = "staged"  # the middle of a kept part's name: `<run>.staged.<i>.parquet`


def keep_staged(folder: Path, score_run_id: str, parts: list[Path]) -> None:
    """Give each of a published run's staged parts a second name in `folder` (see `publish`). Where a hard link is
    not possible (another file system, or `folder` a file: the copy's publish names it), nothing is kept and nothing
    is raised: the run is committed, and the copy's publish writes the run's file itself."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    for i, part in enumerate(parts):
        name = folder / f"{forecast_file_stem(score_run_id)}.{STAGED}.{i}.parquet"
        tmp = temp_beside(name)  # a second name by a hard link, not a write: `records.files.replacing` does not fit
        try:
            tmp.unlink(missing_ok=True)
            os.link(part, tmp)
        except OSError:
            return
        os.replace(tmp, name)


# Score runs whose forecasts are older than the retention, by forecast time (`scored_at`, which a
# backfill or the demo sets in the past) relative to the run just published; never that run itself. Each run's
# forecast time is kept in `score_runs.forecasts_at` when it is published (`publish`; runs published before the column
# get it once, warehouse/schema.py `backfill_forecasts_at`), so the rule reads the runs, not every kept run's
# forecasts (which cost 0.36-0.48 CPU-s at 30M kept forecasts before, 0.002 now: issue 52 item 5, session 9); a run
# without forecasts is as old as its start.
OLD_SCORE_RUNS = """
SELECT r.score_run_id FROM score_runs r, (SELECT forecasts_at FROM score_runs WHERE score_run_id = ?) AS this
WHERE r.pruned_at IS NULL AND r.score_run_id <> ?
  AND this.forecasts_at - to_days(?) > coalesce(r.forecasts_at, r.started_at)
"""


def prune(con: duckdb.DuckDBPyConnection, score_run_id: str, keep_days: int) -> int:
    """Delete the forecasts of score runs more than `keep_days` older than `score_run_id` (published: its
    `forecasts_at` set); mark them pruned."""
    old = [r for (r,) in con.execute(OLD_SCORE_RUNS, [score_run_id, score_run_id, keep_days]).fetchall()]
    if old:
        con.execute("DELETE FROM forecasts WHERE score_run_id IN (SELECT unnest(?))", [old])
        con.execute("UPDATE score_runs SET pruned_at = now() WHERE score_run_id IN (SELECT unnest(?))", [old])
    return len(old)
