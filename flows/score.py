"""Prefect flow `score-pending`: every PENDING job gets P10/P50/P90 per target from its champion.

Scoring runs in the flow's process, except when a Dask cluster is given (`GPUCAST_DASK_ADDRESS`)
and at least `PARTITION_MIN_JOBS` jobs are pending: then the pending jobs are cut into partitions and
each (target, partition) is a Prefect task run on that cluster, like training's fits. Workers load
the champion from its folder (so they must see `$GPUCAST_HOME/models`: a shared volume) and return
the scored rows; this process applies the memory advice, stages and publishes. A partition that
fails on the cluster (a worker lost, the models folder not visible there) is scored here instead.

Jobs without model features (contract v4: `model_type` unknown and nothing else logged) are not the
champions': each target's are forecast in this process from the scheduler's history of similar jobs
(`tasks/learn/history.py`), fitted here on the labelled history, and published with the champions'.

The targets are scored at once, as threads of this process (the flow's thread pool: see `score_pending`).

The pending jobs are read once per run (`tasks/learn/score.py` `Pending`) and handed to each step; the rules
(which jobs each forecast covers, the no-champion failure, the memory advice) are `tasks/learn/score.py`'s.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import datetime
from functools import lru_cache, partial
from pathlib import Path

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import wait

from gpucast.flows import runners
from gpucast.flows.errors import no_retry_on_environment
from gpucast.flows.settings import Cluster, Planning, Quality, Settings, Storage, Tracing
from gpucast.flows.stage import stage_pending
from gpucast.records.inventory import largest_memory_gb, read_inventory
from gpucast.records.outcomes import Champion
from gpucast.records.results import ScoreResult
from gpucast.tasks.learn import score
from gpucast.tasks.learn.score import ClusterScores, Loading, Pending, Scorer
from gpucast.warehouse import db, forecast, runs, training
from gpucast.warehouse.housekeeping import failpoint
from gpucast.warehouse.publish import check_paths, publish_if


@task(name="read-champions")
def read_champions(storage: Storage) -> list[Champion]:
    """The current champions; none is an error only when a pending job has model features (`score_pending`)."""
    with db.writer(storage) as con:
        return forecast.latest_champions(con)


@task(name="stage-scheduler-history")
def stage_scheduler_history(storage: Storage, folder: Path) -> str:
    """The labelled history the scheduler-history forecasts learn from (`tasks/learn/history.py`), as Parquet."""
    with db.writer(storage) as con:
        rows = training.read_training_jobs(con)
    path = folder / "scheduler_history.parquet"
    rows.write_parquet(path)
    return str(path)


@task(name="stage-running-jobs")
def stage_running_jobs(storage: Storage, folder: Path) -> str:
    """The jobs running now, `updated_at` their start (`training.read_running`), as Parquet: a run time's burst reads
    their hours so far (`tasks/learn/score.py` `by_history`)."""
    with db.writer(storage) as con:
        rows = training.read_running(con)
    path = folder / "running_jobs.parquet"
    rows.write_parquet(path)
    return str(path)


PARTITION_MIN_JOBS = 200_000  # pending jobs from which scoring is spread over a given Dask cluster


def _load(champion: Champion, device: str | None) -> Scorer:
    """A champion loaded for scoring in this process."""
    return Scorer(champion, device=device, threads=runners.threads_here())


@lru_cache(maxsize=8)
def _scorer(champion: Champion, device: str | None) -> Scorer:
    """One loaded champion per process (a Dask worker scores several partitions with it)."""
    return _load(champion, device)


@task(name="score-partition", task_run_name="score {champion.target} part {part}", cache_policy=NO_CACHE, retries=1,
      retry_delay_seconds=5,
      retry_condition_fn=no_retry_on_environment)
def score_partition(champion: Champion, rows: pl.DataFrame, part: int, batch_rows: int, device: str | None) -> pl.DataFrame:
    return _scorer(champion, device).score(rows, batch_rows=batch_rows)


@flow(name="score-partitions", log_prints=True)
def score_partitions(champions: list[Champion], pending: pl.DataFrame, parts: int, batch_rows: int,
                     device: str | None) -> ClusterScores:
    """Every (target, partition) as a task run on this flow's task runner (the cluster); per target the
    scored partitions in order, None where a partition failed (the caller scores it itself)."""
    futures = {ch.target: [score_partition.submit(ch, rows, k, batch_rows, device)
                           for k, rows in enumerate(score.partitions(pending, parts))]
               for ch in champions}
    return ClusterScores({target: tuple(_scored(target, k, fut) for k, fut in enumerate(futs))
                          for target, futs in futures.items()})


def _scored(target: str, k: int, future) -> pl.DataFrame | None:
    """A partition's scored rows, or None when it failed on the cluster (said; scored again in this process)."""
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001  (rescored in the flow's process, see the module doc)
        print(f"{target} partition {k} failed on the cluster ({type(exc).__name__}: {str(exc)[:200]}): "
              "scoring it in this process")
        return None


def scoring_runner(cluster: Cluster, pending_jobs: int, min_jobs: int) -> runners.RunnerChoice:
    """A runner on the Dask cluster GPUCAST_DASK_ADDRESS names when `min_jobs` or more jobs are pending;
    else this process (`runner` None; `note` says why when a cluster was given)."""
    if cluster.dask_address and pending_jobs < min_jobs:
        return runners.RunnerChoice(None, f"{pending_jobs:,} pending jobs, fewer than {min_jobs:,}: scored in-process")
    return runners.choose_runner(cluster, local_cluster=False)


@task(name="score-target", task_run_name="score {target}", retries=1, retry_delay_seconds=10, cache_policy=NO_CACHE,
      retry_condition_fn=no_retry_on_environment)
def score_target(champion: Champion | None, target: str, pending: Pending, out: str, score_run_id: str,
                 scored_at: datetime, gpu_mem_gb: float, batch_rows: int, device: str | None,
                 cluster_parts: tuple[pl.DataFrame | None, ...] | None = None, history_path: str | None = None,
                 running_path: str | None = None, loading: Loading | None = None,
                 queue_gpu_gb: dict[str, float] | None = None) -> int:
    """Score the pending jobs of one target: those with model features with its champion (or take the
    partitions the cluster scored, scoring here any that failed there), those without from the
    scheduler's history (`history_path`, `tasks/learn/history.py`; a run time's burst reads the running jobs too,
    `running_path`); stage the forecasts as Parquet; return
    how many jobs were out of the champion's distribution (the scheduler-history ones included). `loading`: the
    champions loading since the run began (`Loading`; None: loaded here when asked). `queue_gpu_gb`: each queue's
    largest GPU memory in the inventory, what a job that logs no GPU type is judged against (`job_gpu_memory`)."""
    by_champion = None
    if champion is not None:  # a target without one has only the history's forecasts
        by_champion = score.champion_forecasts(
            pending.known(), batch_rows, lambda: (loading or Loading((), partial(_load, device=device))).scorer(champion),
            cluster_parts, rescorer=lambda: _scorer(champion, device), progress=get_run_logger().info)
    by_history = score.history_forecasts(target, pending.unknown(), lambda: pl.read_parquet(history_path), score_run_id,
                                         threads=runners.threads_here(), as_of=scored_at, running_path=running_path)
    scored = score.target_forecasts([by_champion, by_history], pending.rows, gpu_mem_gb, score_run_id, scored_at,
                                    queue_gpu_gb)
    forecast.write_staged(scored, Path(out))
    return score.ood_forecasts(scored)


@task(name="publish-forecasts", retries=2, retry_delay_seconds=5, retry_condition_fn=no_retry_on_environment)
def publish_forecasts(score_run_id: str, parts: list[str], pending_jobs: int, targets: list[str], gpu_mem_gb: float,
                      storage: Storage, backtest_days: int) -> int:
    """Publish the run's forecasts; prune runs past GPUCAST_KEEP_FORECAST_DAYS (never within the backtest window)."""
    keep_days = max(storage.keep_forecast_days, backtest_days)
    with db.writer(storage) as con:
        n, pruned = forecast.publish(con, score_run_id, [Path(p) for p in parts], pending_jobs, targets, gpu_mem_gb,
                                     keep_days, keep_in=db.forecast_files_dir(storage.published_path))
    if pruned:
        print(f"pruned the forecasts of {pruned} score run(s) older than {keep_days} days (GPUCAST_KEEP_FORECAST_DAYS)")
    return n


@flow(name="score-pending", log_prints=True)
def score_pending(batch_rows: int = score.DEFAULT_BATCH_ROWS, device: str | None = None, pending_path: str | None = None,
                  publish: bool = True, as_of: datetime | None = None, partition_min_jobs: int = PARTITION_MIN_JOBS,
                  history_path: str | None = None, storage: Storage | None = None, planning: Planning | None = None,
                  cluster: Cluster | None = None, quality: Quality | None = None,
                  tracing: Tracing | None = None, untrained: str | None = None) -> ScoreResult:
    """Forecast every PENDING job with each target's champion; publish all forecasts at once.

    `planning.oom_gpu_mem_gb` is the GPU size `oom_risk` is judged against where a job's GPU is unknown; `storage`, `planning`, `cluster`
    (where large runs are spread), `quality` (the backtest window) and `tracing` default to the environment's
    (GPUCAST_OOM_GPU_MEM_GB, ...). `pending_path`: the pending jobs already staged by the caller (the nightly's features
    step); else they are read here. `publish` refreshes the planners' copy after a successful run
    (the nightly flow publishes once, itself). `as_of`: the time the forecasts are stamped with
    (default: now), for a backfill or a demo replaying past days; the backtest compares it with the
    jobs' start times. `partition_min_jobs`: from how many pending jobs scoring is spread over the
    cluster GPUCAST_DASK_ADDRESS names (see the module doc). `history_path`: the labelled history already
    staged by the caller (the nightly's features step), which jobs without model features are forecast from
    (`tasks/learn/history.py`); else it is read here when such jobs are pending. Without any champion, only
    such jobs can be scored: a pending job with model features then fails the run (train first; `untrained`: why
    the caller's own train step fitted no target, said instead: the nightly's).
    """
    settings = Settings.given(storage=storage, planning=planning, cluster=cluster, quality=quality, tracing=tracing).ensure()
    storage, gpu_mem_gb = settings.storage, settings.planning.oom_gpu_mem_gb
    queue_gpu_gb = largest_memory_gb(read_inventory(settings.inventory_path))  # a job with no GPU type logged: its queue's
    if publish:  # a path the publish cannot write (a file where its folder goes): said now, before anything is scored
        check_paths(storage.published_path)
    with runs.lifecycle(storage, "score") as run:
        champions = read_champions(storage)
        # scoring in this process (no cluster to spread it over): the champions load while the jobs are staged
        loading = Loading(champions, partial(_load, device=device), background=not settings.cluster.dask_address)
        # read once, for every step of the run: the caller's staged file, else staged here, in memory
        pending = Pending.of(pl.read_parquet(pending_path) if pending_path else stage_pending(storage, settings.tracing))
        pending.check_champions(champions, untrained)  # jobs only a champion can forecast, and none: the run fails
        without = pending.featureless_jobs
        if without and not history_path:  # the history those jobs are forecast from: staged here
            history_path = stage_scheduler_history(storage, run.staging)
        # ... and the jobs running now, whose hours so far a run time's burst reads (issue 53 item 2)
        running_path = stage_running_jobs(storage, run.staging) if without else None
        by_target = {ch.target: ch for ch in champions}
        targets = pending.targets(champions)
        print(f"{run.run_id}: {pending.jobs:,} pending job(s) x {len(targets)} target(s): "
              + ", ".join(f"{ch.target} by {ch.model} ({ch.train_run_id})" for ch in champions)
              + (f"; {without:,} without model features: from the scheduler's history" if without else ""))
        scored = _on_cluster(settings.cluster, champions, pending, partition_min_jobs, batch_rows, device)
        print(f"{run.run_id}: scoring on {scored.where}")
        # The targets at once, as task runs on the flow's thread pool: their predicts (and Polars' and NumPy's work)
        # release the GIL, so one target's Python work overlaps another's predict on the second core (issue 52 item 5).
        # Shared process-global state: the jobs without model features are forecast by `SchedulerHistory`, whose fit,
        # predict and intervals enter threadpoolctl's `threadpool_limits` (tasks/learn/history.py): it sets the
        # OpenMP/BLAS libraries' one global thread limit and restores the value it saw on exit, so threads that
        # interleave restore each other's values out of order. Safe because every target passes the same value
        # (`runners.threads_here()`): an interleaving can at worst leave the process at that limit after the run,
        # never one target at another's share. A per-target share would need the limit taken once, around `wait`.
        # The champions' predicts set their threads per model (`n_jobs`, the compiled trees' `nthread`), not globally.
        parts = [str(run.staging / f"{target}.parquet") for target in targets]
        futures = [score_target.submit(by_target.get(target), target, pending, out, run.run_id, as_of or run.started_at,
                                       gpu_mem_gb, batch_rows, device, scored.of(target), history_path, running_path,
                                       loading, queue_gpu_gb)
                   for target, out in zip(targets, parts, strict=True)]
        wait(futures)  # all of them ended (a failed target fails the run only once none is still writing its part)
        ood = {target: future.result() for target, future in zip(targets, futures, strict=True)}
        failpoint("score:after-staging")
        n = publish_forecasts(run.run_id, parts, pending.jobs, targets, gpu_mem_gb, storage,
                              settings.quality.backtest_days)
    publish_if(publish, storage, on_failure=lambda exc: _unpublished(storage, run.run_id, n, exc))
    print(f"{run.run_id}: published {n:,} forecasts for {pending.jobs:,} pending job(s)")
    return ScoreResult(score_run_id=run.run_id, pending_jobs=pending.jobs, forecasts=n, scored_on=scored.where,
                       ood_forecasts=sum(ood.values()), ood_by_target=ood, featureless_jobs=without,
                       champions={ch.target: ch.model for ch in champions})


def _unpublished(storage: Storage, score_run_id: str, forecasts: int, exc: Exception) -> None:
    """The planners' copy was not published after score run `score_run_id` committed its `forecasts` (the publish
    is not a retried task: the run is committed, and a failure here is the copy's alone). Noted on the run, which
    stays `published` (its forecasts are in the warehouse) and says that planners get them at the next successful
    publish; the publish's error is raised after (`publish_if`)."""
    note = (f"its {forecasts:,} forecasts are in the warehouse, but the planners' copy was not refreshed "
            f"({runs.describe(exc)}); they reach planners at the next successful publish")
    print(f"{score_run_id}: {note}")
    with contextlib.suppress(Exception):  # the publish's own error is the one to raise (a busy lock, a full disk)
        with db.writer(storage, timeout_s=min(storage.lock_timeout_s, 10.0)) as con:
            runs.add_note(con, "score", score_run_id, note)


def _on_cluster(cluster: Cluster, champions: list[Champion], pending: Pending, min_jobs: int, batch_rows: int,
                device: str | None) -> ClusterScores:
    """Per target the partitions scored on the Dask cluster, and in words where scoring ran: nothing is
    scored there when scoring stays in this process."""
    if not champions:
        return ClusterScores(where="this process (no champion: jobs without model features only)")
    choice = scoring_runner(cluster, pending.jobs, min_jobs)
    if choice.runner is None:
        return ClusterScores(where="this process" + (f" ({choice.note})" if choice.note else ""))
    workers = _workers(cluster.dask_address)
    parts = 2 * workers  # two partitions a worker keep them all busy
    scored = score_partitions.with_options(task_runner=choice.runner)(champions, pending.known(), parts, batch_rows,
                                                                      device)
    return replace(scored, where=f"Dask at {cluster.dask_address}: {parts} partitions on {workers} worker(s)")


def _workers(address: str) -> int:
    """How many workers the scheduler at `address` has (it answered `choose_runner` a moment ago)."""
    from distributed import Client

    with Client(address, timeout=f"{runners.DASK_CONNECT_TIMEOUT_S}s") as client:
        return max(len(client.scheduler_info()["workers"]), 1)
