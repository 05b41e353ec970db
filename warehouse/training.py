"""Warehouse side of training: read the labelled history and the pending jobs; record metrics and
champions; say which train runs' model folders must be kept."""

from __future__ import annotations

import duckdb
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records.outcomes import PRICED_OUT_WORDS, Champion, TargetResult
from gpucast.records.results import TrainedTarget, TrainResult
from gpucast.records.times import KNOWN_AT
from gpucast.warehouse.db import transaction
from gpucast.warehouse.forecast import latest_champions

DEFAULT_MAX_TRAIN_ROWS = 500_000
# `model_champions.decision_reason` when the champion gate did not decide (no incumbent, or no backtest evidence)
NO_INCUMBENT = "no champion before"
NO_EVIDENCE = "no backtest evidence: chosen on validation"


def read_training_jobs(con: duckdb.DuckDBPyConnection, max_rows: int | None = DEFAULT_MAX_TRAIN_ROWS) -> pl.DataFrame:
    """The contract columns of the COMPLETED jobs of `job_logs`, the `max_rows` most recent ones.

    Only COMPLETED jobs carry labels, and a cap on the most recent ones bounds memory and training
    time however long the history grows (recent jobs also best resemble tomorrow's). The result is
    ordered by job_id: splits are permutations of row positions, so the same warehouse must give
    the same rows in the same order for a seeded run to be reproducible.
    """
    limit = "" if max_rows is None else f"ORDER BY {c.SUBMITTED_AT} DESC, {c.JOB_ID} LIMIT {int(max_rows)}"
    return con.sql(f"SELECT * FROM (SELECT {', '.join(c.COLUMNS)} FROM job_logs WHERE {c.STATUS} = 'COMPLETED' "
                   f"{limit}) ORDER BY {c.JOB_ID}").pl()


def read_pending(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The contract columns of every job whose latest record is PENDING, ordered by job_id."""
    return con.sql(f"SELECT {', '.join(c.COLUMNS)} FROM job_logs WHERE {c.STATUS} = 'PENDING' ORDER BY {c.JOB_ID}").pl()


def read_running(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The contract columns of every job whose latest record is RUNNING, `updated_at` its start: its first RUNNING
    record's `updated_at` (as `job_demand` reads a running job's start; a job with no such time is left out), and
    `known_at`, the warehouse's clock (the `warehouse_clock` view, `job_demand`'s too: the latest `submitted_at` /
    `updated_at` of any job, the time they were last known to run); ordered by job_id. What a job's burst reads of the jobs still running
    (`tasks/learn/history.py` `burst_siblings`: their hours so far, lower bounds of their run times)."""
    columns = ", ".join(f"s.started_at AS {col}" if col == c.UPDATED_AT else f"j.{col}" for col in c.COLUMNS)
    return con.sql(f"SELECT {columns}, (SELECT {KNOWN_AT} FROM warehouse_clock) AS {KNOWN_AT} FROM job_logs j JOIN ("
                   f"SELECT job_id, min({c.UPDATED_AT}) AS started_at FROM job_log_records "
                   f"WHERE {c.STATUS} = 'RUNNING' AND {c.UPDATED_AT} IS NOT NULL "
                   f"AND job_id IN (SELECT job_id FROM job_logs WHERE {c.STATUS} = 'RUNNING') GROUP BY job_id"
                   f") s USING (job_id) WHERE j.{c.STATUS} = 'RUNNING' ORDER BY j.{c.JOB_ID}").pl()


def count_pending(con: duckdb.DuckDBPyConnection) -> int:
    """How many jobs wait to be scored (latest record PENDING)."""
    return con.execute(f"SELECT count(*) FROM job_logs WHERE {c.STATUS} = 'PENDING'").fetchone()[0]


def champion_cost(con: duckdb.DuckDBPyConnection, target: str, train_run_id: str, model: str) -> float | None:
    """A champion's counted scoring cost (CPU seconds per 1M jobs, `model_metrics.score_seconds_per_million`, the mean
    over its fits' held-out folds in the run that chose it: `TargetResult.champion_cost`); None where it was not
    counted (runs before it was)."""
    return con.execute("SELECT avg(score_seconds_per_million) FROM model_metrics WHERE target = ? AND train_run_id = ? "
                       "AND model = ? AND split = 'test'", [target, train_run_id, model]).fetchone()[0]


# Per target and model: the mean counted cost over the held-out rows of the latest succeeded train run (by the night it
# trained for: its `as_of`, else its start, as `CHAMPIONS_AS_OF` orders runs) that counted it with the same feature set
# (runs before `features` was recorded count as any); a network's of the same preset only (its size, so its cost,
# follows the preset; the other models have none).
LAST_COSTS = """
SELECT m.target, m.model, avg(m.score_seconds_per_million)
FROM model_metrics m JOIN train_runs r USING (train_run_id)
WHERE r.status = 'succeeded' AND m.split = 'test' AND m.score_seconds_per_million IS NOT NULL
  AND (m.preset IS NULL OR m.preset = ?) AND (m.features IS NULL OR m.features = ?)
GROUP BY m.target, m.model, m.train_run_id, r.as_of, r.started_at
QUALIFY row_number() OVER (PARTITION BY m.target, m.model
                           ORDER BY coalesce(r.as_of, r.started_at) DESC, r.started_at DESC) = 1
"""


def last_costs(con: duckdb.DuckDBPyConnection, preset: str, features: str) -> dict[str, dict[str, float]]:
    """Target -> model -> its last counted scoring cost (CPU-s per 1M jobs, `LAST_COSTS`) for a run of this network
    `preset` and feature set: what tonight's train run judges a model by before fitting it (`champion.priced_out`).
    Models never counted are absent."""
    out: dict[str, dict[str, float]] = {}
    for target, model, cost in con.execute(LAST_COSTS, [preset, features]).fetchall():
        out.setdefault(target, {})[model] = cost
    return out


def runs_to_keep(con: duckdb.DuckDBPyConnection, keep: int) -> set[str]:
    """Train runs whose model folders must stay: the `keep` most recent successful ones, any run
    still `running` (another process may be writing it) and any run a current champion lives in
    (scoring loads it). The model registry (`tasks/learn/models/store.py`) removes the others."""
    ids = {r for (r,) in con.execute(
        "SELECT train_run_id FROM train_runs WHERE status = 'succeeded' ORDER BY started_at DESC LIMIT ?",
        [max(keep, 1)]).fetchall()}
    ids |= {r for (r,) in con.execute("SELECT train_run_id FROM train_runs WHERE status = 'running'").fetchall()}
    return ids | {ch.train_run_id for ch in latest_champions(con)}


def record_target(con: duckdb.DuckDBPyConnection, run_id: str, result: TargetResult, features: str,
                  decision=None, incumbent: Champion | None = None) -> None:
    """Replace this run's rows for the target (a retried step writes the same rows once).

    `decision` (`tasks/learn/gate.py`'s, duck-typed: `promote`, `reason`) against the `incumbent` champion:
    when it keeps the incumbent, this run's champion row names the incumbent's model, folder and run."""
    with transaction(con):
        for table in ("model_metrics", "model_champions", "skipped_fits"):
            con.execute(f"DELETE FROM {table} WHERE train_run_id = ? AND target = ?", [run_id, result.target])
        if result.skipped_fits:
            con.executemany("INSERT INTO skipped_fits VALUES (?, ?, ?, ?, ?)",
                            [[run_id, result.target, f.model, f.repeat, f.reason] for f in result.skipped_fits])
        if result.metrics:
            _insert_metrics(con, run_id, result)
        con.execute("INSERT INTO model_champions (train_run_id, target, model, preset, labelled_rows, validation_rmse, "
                    "test_rmse_mean, test_mape_mean, model_dir, skipped_reason, features, refit_rows, calibration_rows, "
                    "challenger, decision, decision_reason, champion_run_id, most_accurate_model, choice_reason) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    _champion_row(run_id, result, features, decision, incumbent))


def _insert_metrics(con: duckdb.DuckDBPyConnection, run_id: str, result: TargetResult) -> None:
    m = pl.DataFrame(result.metrics).select(
        pl.lit(run_id).alias("train_run_id"), pl.lit(result.target).alias("target"), "model", "preset", "features",
        "repeat", "seed", "split", "mse", "rmse", "mae", "mape", "r2", "rows_train",
        pl.col("rows_eval").alias("rows_test"), "train_seconds", "device", pl.col("epochs").cast(pl.Int64),
        pl.col("score_seconds_per_million").cast(pl.Float64), pl.col("planner_loss").cast(pl.Float64),
    )
    con.register("new_metrics", m)
    con.execute("INSERT INTO model_metrics BY NAME SELECT * FROM new_metrics")
    con.unregister("new_metrics")


def _champion_row(run_id: str, result: TargetResult, features: str, decision, incumbent: Champion | None) -> list:
    """The `model_champions` row's values: tonight's champion, or the incumbent the gate kept."""
    champ = result.champion
    stats = (None, None, None)
    if champ and result.metrics:
        df = pl.DataFrame(result.metrics).filter(pl.col("model") == champ)
        stats = (df.filter(pl.col("split") == "validation")["rmse"].mean(),
                 df.filter(pl.col("split") == "test")["rmse"].mean(),
                 df.filter(pl.col("split") == "test")["mape"].mean())
    preset = next((m.preset for m in result.metrics if m.model == champ), None)
    model, model_dir, champion_run = champ, result.model_dir, run_id if champ else None
    verdict = "first" if incumbent is None else "promoted"
    reason = decision.reason if decision is not None else (NO_INCUMBENT if incumbent is None else NO_EVIDENCE)
    if decision is not None and not decision.promote:
        model, model_dir, champion_run, verdict = incumbent.model, incumbent.model_dir, incumbent.train_run_id, "kept"
    refit = (result.refit.rows, result.refit.calibration_rows) if champ else (None, None)
    return [run_id, result.target, model, preset, result.rows, *stats, model_dir, result.skipped, features, *refit,
            champ, verdict if champ else None, reason if champ else None, champion_run, result.most_accurate,
            result.choice_reason]


TRAIN_RESULT = """
SELECT r.train_run_id, r.device, r.fits_on, c.target, c.challenger, c.skipped_reason, c.labelled_rows, c.decision,
       c.decision_reason, (SELECT count(*) FROM skipped_fits f WHERE f.train_run_id = r.train_run_id AND f.target = c.target
                           AND NOT starts_with(f.reason, ?)),
       c.choice_reason,
       (SELECT list(DISTINCT f.model ORDER BY f.model) FROM skipped_fits f WHERE f.train_run_id = r.train_run_id
        AND f.target = c.target AND starts_with(f.reason, ?))
FROM train_runs r JOIN model_champions c USING (train_run_id)
WHERE r.train_run_id = (SELECT train_run_id FROM train_runs WHERE flow_run_id = ? AND status = 'succeeded'
                        ORDER BY started_at DESC LIMIT 1)
"""


def train_result(con: duckdb.DuckDBPyConnection, flow_run_id: str, where: str, targets: tuple[str, ...]) -> TrainResult | None:
    """The `TrainResult` of the succeeded train run the Prefect flow run `flow_run_id` recorded (the GPU pool's),
    as `train_models` returns it in-process, its `targets` in the order given; None when there is none.
    The gate's decision is "promoted" or "kept" only where the gate decided (`decision_reason` not
    `NO_INCUMBENT` / `NO_EVIDENCE`), as in-process. What the warehouse does not keep stays None
    (`fit_seconds`; `note`, which the run's `message` carries)."""
    rows = con.execute(TRAIN_RESULT, [PRICED_OUT_WORDS, PRICED_OUT_WORDS, flow_run_id]).fetchall()
    if not rows:
        return None
    by_target = {
        target: TrainedTarget(target=target, champion=champion, skipped=skipped, rows=labelled or 0, skipped_fits=cut,
                              decision=decision if decision in ("promoted", "kept") and reason not in (NO_INCUMBENT, NO_EVIDENCE)
                              else None, choice_reason=why, priced_out=tuple(priced or ()))
        for _, _, _, target, champion, skipped, labelled, decision, reason, cut, why, priced in rows}
    run_id, device, fits_on = rows[0][:3]
    ordered = [t for t in targets if t in by_target] + sorted(t for t in by_target if t not in targets)
    return TrainResult(train_run_id=run_id, targets=tuple(by_target[t] for t in ordered), where=where, device=device,
                       fits_on=fits_on, flow_run_id=flow_run_id)
