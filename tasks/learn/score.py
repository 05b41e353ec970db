"""Score pending jobs with a target's champion: P10 / P50 / P90 per job, in vectorised batches.

The champion of a target is loaded from its registry folder (`models/store.py`: code-free formats
only) together with the feature encoder fitted at training time and the interval calibration
measured on its calibration slice (`tasks/learn/intervals.py`: Mondrian conformal predictive systems per
model type and queue, pooled below a minimum group size). [P10, P90] then covers about 80% of
outcomes and P90 alone about 90%, per model type and per queue, when tomorrow's jobs look like the
ones the champion was calibrated on.

The rules of a score run live here too (`flows/score.py` only calls them): the pending jobs split once into those
with model features, which the champions forecast, and those without, which the scheduler's history forecasts
(`Pending`); a run with no champion fails when a job only a champion can forecast is pending (`NO_CHAMPION`); the
partitions a Dask cluster scored, a failed one scored again here (`champion_forecasts`); the history's forecasts
(`history_forecasts`); and one target's forecasts put together with the memory advice (`target_forecasts`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from gpucast.expectations import contract as c
from gpucast.records import catalog
from gpucast.records.outcomes import Champion
from gpucast.tasks.learn import features, intervals, llm_memory, ood, priors, traced, traced_bands
from gpucast.tasks.learn.features import FEATURE_SETS
from gpucast.tasks.learn.history import SCORED_SCHEMA, SchedulerHistory, burst_siblings, featureless
from gpucast.tasks.learn.llm_memory import LLM_MEM_GB, LLM_PRIOR
from gpucast.tasks.learn.models import registry, store
from gpucast.tasks.learn.traced import TRACED_MEM_GB, TRACED_PRIOR

DEFAULT_BATCH_ROWS = 250_000
# Memory advice. PyTorch's caching allocator reserves more than the tensors it holds
# (fragmentation, workspace of cuDNN/cuBLAS); 10% over the P90 peak, rounded up to the next
# 0.5 GB, is the headroom we add before comparing with a GPU's memory.
ALLOCATOR_HEADROOM = 0.10
REQUEST_STEP_GB = 0.5
NO_CHAMPION = "no trained champion in the warehouse: run `gpucast train` (or `gpucast nightly`) first"



def untrained_text(why: str) -> str:
    """The error of a score with no champion after a train step that fitted no target (`check_champions`)."""
    return (f"no trained champion in the warehouse, and this run's training fitted none ({why}): load more labelled "
            "COMPLETED jobs (only those before the run's --as-of count), then rerun")


@dataclass(frozen=True)
class Pending:
    """A score run's pending jobs (their staged features), read once, and which of them have no model features
    (`history.featureless`): those the scheduler's history forecasts; the others are the champions'."""

    rows: pl.DataFrame
    without: pl.Series  # True: no model features

    @classmethod
    def of(cls, rows: pl.DataFrame) -> Pending:
        return cls(rows, featureless(rows))

    @property
    def jobs(self) -> int:
        return self.rows.height

    @property
    def featureless_jobs(self) -> int:
        return int(self.without.sum())

    def known(self) -> pl.DataFrame:
        """The jobs with model features: the champions forecast them."""
        return self.rows.filter(~self.without)

    def unknown(self) -> pl.DataFrame:
        """The jobs without model features: the scheduler's history forecasts them."""
        return self.rows.filter(self.without)

    def check_champions(self, champions: Sequence[Champion], untrained: str | None = None) -> None:
        """Without any champion only the jobs without model features can be scored: a pending job with them fails
        the run (`FileNotFoundError`, exit 2: train first). `untrained`: why the run's own training left no champion
        (a nightly's), said in its place (review 85 S3-1: "run `gpucast train`" after the train step that skipped)."""
        if not champions and self.jobs > self.featureless_jobs:
            raise FileNotFoundError(NO_CHAMPION if untrained is None else untrained_text(untrained))

    def targets(self, champions: Iterable[Champion]) -> list[str]:
        """The targets forecast, in the contract's order: those with a champion; every one when jobs without model
        features are pending (the history forecasts every target)."""
        have = {ch.target for ch in champions}
        return [t for t in c.TARGETS if t in have or self.featureless_jobs]


@dataclass(frozen=True)
class ClusterScores:
    """What scoring on a Dask cluster handed back (`flows/score.py` `score_partitions`): per target the scored rows
    of each partition of the jobs with model features, in `partitions`' order, None where a partition failed there
    (`champion_forecasts` scores it again); and where scoring ran, in words. Empty when it ran in this process."""

    by_target: Mapping[str, tuple[pl.DataFrame | None, ...]] = field(default_factory=dict)
    where: str = "this process"

    def of(self, target: str) -> tuple[pl.DataFrame | None, ...] | None:
        return self.by_target.get(target)


def partitions(rows: pl.DataFrame, parts: int) -> list[pl.DataFrame]:
    """`rows` cut into `parts` consecutive slices of equal size (the last ones shorter or empty), in order:
    how the pending jobs are spread over a Dask cluster, and how a failed partition is found again."""
    size = -(-rows.height // parts)  # ceil
    return [rows.slice(k * size, size) for k in range(parts)]


class Loading:
    """The champions' scorers, loaded one after another in a background thread from the moment it is made: a score
    run makes it before it stages the pending jobs, so the loads (skops' import and each model's, ~1-3 CPU-s, mostly
    Python) overlap the staging's DuckDB read, Polars and NumPy work, which release the GIL (issue 52 item 5).
    `scorer(champion)` waits for that champion's and hands it over (kept no longer here: a run's memory peaks after
    the targets); a load that failed raises there; asked again (a retried target), or for a champion it was not
    made with, it loads the champion then. `background=False` (a run spreading its scoring over a Dask cluster,
    whose workers load their own): nothing loads ahead, each champion is loaded when asked.

    What it does not know (review 60 N1): the flow decides `background` on "a Dask address is set", not on "this
    run will score here", so a run with an address and too few pending jobs for the cluster scores here without
    loading ahead; and it loads every champion, also one whose target has no pending job with model features or a
    run that `check_champions` then stops (the scorer stays referenced until the run ends). The thread is not a
    daemon: an interpreter that exits waits for the load under way."""

    def __init__(self, champions: Iterable[Champion], load: Callable[[Champion], Scorer], background: bool = True):
        from concurrent.futures import ThreadPoolExecutor

        self._load = load
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpucast-champions")
        self._loading = {ch: pool.submit(load, ch) for ch in champions} if background else {}
        pool.shutdown(wait=False)  # the submitted loads still run; the thread ends after the last

    def scorer(self, champion: Champion) -> Scorer:
        loading = self._loading.pop(champion, None)
        return self._load(champion) if loading is None else loading.result()


def champion_forecasts(known: pl.DataFrame, batch_rows: int, scorer: Callable[[], Scorer],
                       cluster_parts: Sequence[pl.DataFrame | None] | None = None,
                       rescorer: Callable[[], Scorer] | None = None,
                       progress: Callable[[str], None] | None = None) -> pl.DataFrame | None:
    """A champion's forecasts of the jobs with model features (`known`): the partitions the cluster scored
    (`cluster_parts`), in order, each that failed there scored here by `rescorer`'s scorer (the same cut:
    `partitions`); else every one scored here by `scorer`'s (made only then); None when there are none."""
    if cluster_parts:
        again = partitions(known, len(cluster_parts))
        rescore = rescorer or scorer
        return pl.concat([part if part is not None else rescore().score(again[k], batch_rows=batch_rows)
                          for k, part in enumerate(cluster_parts)])
    if not known.height:
        return None
    return scorer().score(known, batch_rows=batch_rows, progress=progress)


def history_forecasts(target: str, unknown: pl.DataFrame, history: Callable[[], pl.DataFrame], score_run_id: str,
                      threads: int, say: Callable[[str], object] = print,
                      as_of: datetime | None = None, running_path: str | None = None) -> pl.DataFrame | None:
    """One target's forecasts of the jobs without model features (`unknown`), from the scheduler's history of similar
    jobs (`tasks/learn/history.py`, fitted on `history()`'s labelled rows, read only when there are such jobs), stamped
    with the score run as its `train_run_id`; `say` tells how many it could forecast. None when there are none.
    `as_of` and `running_path` (the RUNNING jobs staged as Parquet, `warehouse/training.py` `read_running`; None:
    none staged): what `by_history` reads of the jobs' bursts. The trees themselves are fitted on every labelled row
    `history()` gives."""
    if not unknown.height:
        return None
    labelled = history()
    model = SchedulerHistory(target, threads=threads).fit(labelled)
    # only a run time reads the bursts (`by_history`): the other targets' threads do not read the staged running jobs
    running = pl.read_parquet(running_path) if running_path and target == c.RUNTIME_HOURS else None
    made = by_history(model, unknown, labelled, running, as_of)
    say(f"{target}: {made.height:,} of {unknown.height:,} job(s) without model features forecast: {model.describe()}"
        + ("" if made.height == unknown.height else "; the others have no labelled history to learn from"))
    return made.with_columns(pl.lit(target).alias("target"), pl.lit(score_run_id).alias("train_run_id"))


def by_history(model: SchedulerHistory, unknown: pl.DataFrame, labelled: pl.DataFrame, running: pl.DataFrame | None,
               as_of: datetime | None) -> pl.DataFrame:
    """`model`'s forecasts (`SchedulerHistory.forecast`) of `unknown`; a run time's P50 (and band) moved toward each
    job's burst (`history.burst_p50`) as known at `as_of`: the labelled jobs (`labelled`: finished, their run times)
    and the jobs still running (`running`, contract columns, `updated_at` their start: their hours so far, lower
    bounds, so `burst_p50`'s survival guard engages: a burst mostly still running never lowers a P50). `as_of`: the
    forecasts' time (the run's `scored_at`: now, or a backfill's `--as-of`); a burst reads only what was known then
    (`burst_siblings`: a sibling that ended after it counts its hours so far, one not yet submitted or started is
    left out), so a backfill against a warehouse holding later days never reads a sibling's final run time from after
    it. None: every labelled job counts as finished, the running ones to the latest time the rows know of.
    The nightly's path, measured on a real trace by tests/benchmarks/bench_real_runtime.py (issue 53 item 2)."""
    siblings = burst_siblings(labelled, as_of, running) if model.target == c.RUNTIME_HOURS else None
    return model.forecast(unknown, siblings=siblings)


def target_forecasts(parts: Iterable[pl.DataFrame | None], pending: pl.DataFrame, gpu_mem_gb: float, score_run_id: str,
                     scored_at: datetime, queue_gpu_gb: Mapping[str, float] | None = None) -> pl.DataFrame:
    """One target's forecasts as they are staged: its parts (the champion's, the history's; None: none) in
    `SCORED_SCHEMA`'s columns, the memory advice judged against each pending job's GPU (`job_gpu_memory`: its queue's
    largest in `queue_gpu_gb`, then the setting's size, where unknown), stamped with the score run and its time."""
    columns = [*SCORED_SCHEMA]
    made = [p.select(columns) for p in parts if p is not None]
    scored = pl.concat(made, how="vertical_relaxed") if made else pl.DataFrame(schema=SCORED_SCHEMA)
    return memory_advice(scored, job_gpu_memory(pending, gpu_mem_gb, queue_gpu_gb)).with_columns(
        pl.lit(score_run_id).alias("score_run_id"), pl.lit(scored_at).alias("scored_at"))


def ood_forecasts(scored: pl.DataFrame) -> int:
    """How many of a target's forecasts are of jobs out of the champion's distribution (the history's included)."""
    return int(scored["ood"].sum())


def warm_up(skops: bool = True) -> None:
    """Import what loading any champion needs (the estimators' wrappers and scikit-learn; `skops`: its persistence
    too, ~0.7-0.9 CPU-s more), for a command to do it while Prefect's temporary server is starting in another
    process, instead of after it (`gpucast score`). Not crepes: scoring's intervals are its order statistics computed
    without it (`intervals._offsets`). `skops=False` where nothing starts beside it (a running server): a champion
    saved by skops imports it as it loads (`registry.skops_io`), and champions saved in their library's own format
    (LightGBM, XGBoost, CatBoost: the demo's) never pay it."""
    from gpucast.tasks.learn.models import estimators, registry  # noqa: F401

    if skops:
        registry.skops_io()  # (without torch: `registry.skops_io`)


class Scorer:
    """One target's champion, its encoder, interval calibration and out-of-distribution detector,
    ready to score frames."""

    def __init__(self, champion: Champion, device: str | None = None, threads: int | None = None):
        from gpucast.tasks.learn.models.estimators import PriorModel  # (scikit-learn: the `ml` extra)

        loaded = store.load_model(Path(champion.model_dir), champion.model, device=device, threads=threads)
        self.champion = champion
        self.calibration = intervals.Calibrated(loaded.calibration)
        self.encoder = loaded.encoder
        self.estimator = loaded.estimator
        self.detector = ood.Detector.from_json(loaded.metadata.get("ood"))  # the one reader
        feature_set = FEATURE_SETS[self.encoder.feature_set]
        prior_column = feature_set.prior_column(champion.target)
        prior_cal = loaded.metadata.get("calibration", {}).get(registry.PRIOR)
        # out-of-distribution jobs: the prior with its own calibration when there is one (see tasks/learn/ood.py)
        self.fallback = ((PriorModel.on(prior_column, len(self.encoder.names)), intervals.Calibrated(prior_cal))
                         if prior_column is not None and prior_cal and "residuals" in prior_cal else None)
        self.prior_column = prior_column
        # the estimate that measured best on held-out families (tasks/learn/ood.py `held_out_best`), when measured
        self.evidence = self.detector.fallback if self.detector else None

    def score(self, rows: pl.DataFrame, batch_rows: int = DEFAULT_BATCH_ROWS,
              progress: Callable[[str], None] | None = None) -> pl.DataFrame:
        """job_id, target, p10, p50, p90, model, train_run_id, ood, ood_reason, arch_inferred and
        arch_match_distance for every row of `rows`
        (contract columns; the derived ones are built here when the rows do not carry them yet)."""
        if not set(self.encoder.names) <= set(rows.columns):
            rows = features.build(rows)
        parts = []
        for start in range(0, rows.height, batch_rows):
            parts.append(self._score_batch(rows.slice(start, batch_rows)))
            if progress:
                progress(f"{self.champion.target}: scored {min(start + batch_rows, rows.height):,}/{rows.height:,} jobs")
        out = pl.concat(parts) if parts else pl.DataFrame(schema={c.JOB_ID: pl.String, "p10": pl.Float64,
                                                                   "p50": pl.Float64, "p90": pl.Float64, "model": pl.String,
                                                                   "ood": pl.Boolean, "ood_reason": pl.String,
                                                                   traced.ARCH_INFERRED: pl.String,
                                                                   traced.ARCH_MATCH_DISTANCE: pl.Float64})
        return out.with_columns(pl.lit(self.champion.target).alias("target"),
                                pl.lit(self.champion.train_run_id).alias("train_run_id"))

    def _score_batch(self, batch: pl.DataFrame) -> pl.DataFrame:
        # row-major: a tree walk reads one row's features at each split, and the encoder's matrix is column-major
        # (Polars' `to_numpy`): the forests' predict 0.98-1.01 -> 0.87-0.88 CPU-s per 250k jobs, the same values
        X = np.ascontiguousarray(self.encoder.transform(batch))
        groups = {g: batch[g] for g in intervals.GROUPINGS if g in batch.columns}
        pred = np.asarray(self.estimator.predict(X), dtype=np.float64)
        if self.calibration.language_model is not None:  # recurrent jobs read as language models (memory)
            groups[intervals.LM_GB] = pl.Series(intervals.LM_GB, priors.language_model_gb(batch))
        p10, p50, p90 = self.calibration.intervals(pred, groups)
        flags, reasons = ood.flag(batch, self.detector) if self.detector else (np.zeros(batch.height, bool),
                                                                             [None] * batch.height)
        model = np.full(batch.height, self.champion.model, dtype=object)
        named = self._traced_unlearned(batch)
        llm = self._llm_unlearned(batch) & ~named
        unsized = self._llm_unknown_size(batch) & ~named & ~llm
        if (flags & ~named & ~llm & ~unsized).any():
            other = flags & ~named & ~llm & ~unsized
            p10[other], p50[other], p90[other], model[other], used = self._fallback(
                X[other], pred[other], (p10[other], p50[other], p90[other]), {g: v.filter(other) for g, v in groups.items()})
            for i in np.flatnonzero(other):
                reasons[i] = f"{reasons[i]} -> {used}"
        if named.any():  # the traced prior itself, with its family's spread measured against a real GPU
            mem = batch[TRACED_MEM_GB].to_numpy()[named]
            low, high = traced_bands.bands(_arch_names(batch).filter(pl.Series(named)))
            p10[named], p50[named], p90[named], model[named], flags[named] = mem * low, mem, mem * high, TRACED_PRIOR, True
            words = f"{c.ARCH} traced, but the champion learned from {self.detector.traced_rows} traced jobs -> traced prior"
            for k, i in enumerate(np.flatnonzero(named)):
                says = f"{words} ({traced_bands.describe(low[k], high[k])})"
                reasons[i] = f"{reasons[i]}; {says}" if reasons[i] else says
        if llm.any():  # the per-GPU prior itself, x/÷ its stated factor: no correction learned on such jobs
            mem = batch[LLM_MEM_GB].to_numpy()[llm]
            factor = llm_memory.P90_FACTOR
            p10[llm], p50[llm], p90[llm], model[llm], flags[llm] = mem / factor, mem, mem * factor, LLM_PRIOR, True
            read = _llm_read_as(batch, llm)
            for i, words in zip(np.flatnonzero(llm), read, strict=True):
                reasons[i] = f"{reasons[i]} -> per-GPU prior of {words} (x/÷ {factor:g})"
        for i in np.flatnonzero(unsized):  # flagged, the champion's forecast kept: the fallbacks lean on the prior,
            reasons[i] = f"{reasons[i]} -> {model[i]}'s forecast kept"  # which read the job as a small model
        self._never_impossible(batch, X, pred, (p10, p50, p90), model, flags, reasons)
        inferred, distance, reasons = traced.with_inference(batch, reasons)
        return pl.DataFrame({c.JOB_ID: batch[c.JOB_ID], "p10": p10, "p50": p50, "p90": p90,
                             "model": pl.Series(model, dtype=pl.String), "ood": flags,
                             "ood_reason": pl.Series(reasons, dtype=pl.String),
                             traced.ARCH_INFERRED: inferred, traced.ARCH_MATCH_DISTANCE: distance})

    def _never_impossible(self, batch: pl.DataFrame, X: np.ndarray, pred: np.ndarray, bands: tuple[np.ndarray, ...],
                          model: np.ndarray, flags: np.ndarray, reasons: list[str | None]) -> None:
        """In place, for the jobs whose P50 is above what is possible (`ood.ceiling`: their kind's largest in the
        history x a measured margin; for memory the largest GPU of the catalogue): flagged out of distribution,
        the reason says which bound, and the forecast is the held-out-best estimate within it (`ood.within_ceiling`).
        Every P90 is at most the bound too, the P50's within it included: a band's top above what is possible is as
        impossible as a P50 there (the demo published a 408 GB memory P90, P50 155.8 GB x the held-out interval
        factor, above the catalogue's largest GPU, 192 GB)."""
        p10, p50, p90 = bands
        bound, words = ood.ceiling(batch, self.champion.target, self.detector.ceiling if self.detector else None)
        over = p50 > bound
        clipped = ~over & (p90 > bound)
        for i in np.flatnonzero(clipped):  # said where it happens (newcomer 26 P6: a band's words, x1.07, over P90 = P50)
            says = f"P90 {p90[i]:.4g} capped at {bound[i]:.4g}, {words(int(i))}"
            reasons[i] = f"{reasons[i]}; {says}" if reasons[i] else says
        np.minimum(p90, bound, out=p90, where=~over)  # the P50's above it get theirs from `within_ceiling`, within it
        if not over.any():
            return
        prior = np.exp(X[over][:, self.prior_column].astype(np.float64)) if self.prior_column is not None else None
        own_prior = model[over] == LLM_PRIOR  # the only estimate with support for such a job: above every GPU, it
        # fits none (the champion's within-bound forecast from single-GPU jobs would plan it on one; review 87 S1-1)
        p10[over], new50, p90[over], used = ood.within_ceiling(self.evidence, pred[over], prior, bound[over], own_prior)
        for k, i in enumerate(np.flatnonzero(over)):
            capped = used[k] == "capped"
            model[i] = model[i] if capped else self._label(used[k])
            says = (f"impossible: P50 {p50[i]:.4g} above {words(int(i))} -> "
                    + (f"capped at {new50[k]:.4g}" if capped else f"{model[i]} within it ({new50[k]:.4g})")
                    + (": no GPU holds the job's per-GPU need" if own_prior[k] else ""))
            reasons[i] = f"{reasons[i]}; {says}" if reasons[i] else says
        p50[over] = new50
        flags[over] = True

    def _llm_unknown_size(self, batch: pl.DataFrame) -> np.ndarray:
        """Memory forecasts of jobs with LLM fields whose size is unknown (`ood.llm_unknown_size`)."""
        if self.champion.target != c.PEAK_GPU_MEM_GB or not self.detector:
            return np.zeros(batch.height, dtype=bool)
        return ood.llm_unknown_size(batch)

    def _llm_unlearned(self, batch: pl.DataFrame) -> np.ndarray:
        """Memory forecasts of jobs with LLM fields the champion never learned to correct (`ood.llm_unlearned`)."""
        if self.champion.target != c.PEAK_GPU_MEM_GB or not self.detector:
            return np.zeros(batch.height, dtype=bool)
        return ood.llm_unlearned(batch, self.detector)

    def _traced_unlearned(self, batch: pl.DataFrame) -> np.ndarray:
        """Memory forecasts of jobs with a traced prior the champion never learned to correct (`ood.traced_unlearned`)."""
        if self.champion.target != c.PEAK_GPU_MEM_GB or not self.detector:
            return np.zeros(batch.height, dtype=bool)
        return ood.traced_unlearned(batch, self.detector)

    def _label(self, estimate: str) -> str:
        """The `model` column's name (and `ood_reason`'s) of a held-out-best estimate (`ood.CANDIDATES`): the
        champion's own (its extrapolation), the prior, or `<champion>+prior` for their blend."""
        return {"model": self.champion.model, "prior": registry.PRIOR}.get(estimate, f"{self.champion.model}+{registry.PRIOR}")

    def _fallback(self, X: np.ndarray, pred: np.ndarray, champion: tuple[np.ndarray, ...],
                  groups: dict[str, pl.Series]) -> tuple[np.ndarray, np.ndarray, np.ndarray, str, str]:
        """P10, P50, P90, the `model` column and the words `ood_reason` ends with, for flagged jobs: the
        held-out-best estimate when measured at training time, else the prior with its own calibration,
        else the champion's interval widened by `ood.WIDEN_FACTOR`."""
        if self.evidence:
            prior = np.exp(X[:, self.prior_column].astype(np.float64)) if self.prior_column is not None else None
            label = self._label(self.evidence.estimate)
            return (*ood.estimate(self.evidence, pred, prior), label,
                    f"held-out-best: {label} (x/÷ {self.evidence.interval_factor:.2f})")
        if self.fallback:
            prior_model, cal = self.fallback
            return (*cal.intervals(prior_model.predict(X), groups), registry.PRIOR, "prior (no held-out-family evidence)")
        p10, p50, p90 = champion
        return (p10 / ood.WIDEN_FACTOR, p50, p90 * ood.WIDEN_FACTOR, self.champion.model,
                f"{self.champion.model}, interval x/÷ {ood.WIDEN_FACTOR:g} (no held-out-family evidence)")


def _llm_read_as(batch: pl.DataFrame, at: np.ndarray) -> list[str]:
    """For the rows `at` (a mask) whose memory forecast is the per-GPU prior: which architecture it read, in words
    (`llm_memory.read_as`), worked out once per distinct name, size and depth."""
    names = [n for n in (c.ARCH, c.PARAMS_MILLION, c.NUM_LAYERS) if n in batch.columns]
    rows = batch.filter(pl.Series(at)).select(names).to_dicts()
    said: dict[tuple, str] = {}
    out = []
    for row in rows:
        key = tuple(None if isinstance(v, float) and math.isnan(v) else v for v in row.values())  # NaN != NaN
        if key not in said:
            arch = llm_memory.arch_of(row)
            said[key] = llm_memory.read_as(arch) if arch is not None else "an unknown size"
        out.append(said[key])
    return out


def _arch_names(batch: pl.DataFrame) -> pl.Series:
    """Each job's architecture name: its logged `arch`, else the one inferred from its shape."""
    names = [n for n in (c.ARCH, traced.ARCH_INFERRED) if n in batch.columns]
    if not names:
        return pl.Series([None] * batch.height, dtype=pl.String)
    return batch.select(pl.coalesce([pl.col(n).cast(pl.String) for n in names])).to_series()


def safe_request_gb(p90_gb: np.ndarray | float) -> np.ndarray:
    """P90 peak memory plus allocator headroom, rounded up to the next 0.5 GB."""
    raw = np.asarray(p90_gb, dtype=np.float64) * (1.0 + ALLOCATOR_HEADROOM)
    return np.ceil(raw / REQUEST_STEP_GB - 1e-9) * REQUEST_STEP_GB


def job_gpu_memory(rows: pl.DataFrame, default_gb: float, queue_gb: Mapping[str, float] | None = None) -> pl.DataFrame:
    """job_id and the GPU memory (GB) each job's memory advice is judged against: its logged GPU's, from
    the GPU catalogue, when known (`gpu_model`, `features.build`); else the largest GPU its queue owns (`queue_gb`:
    the inventory's, `records.inventory.largest_memory_gb`; newcomer 26 P7: an l4 job with no GPU logged was judged
    against 80 GB, no OOM risk, while the plan found no GPU of its queue to hold it); else `default_gb` (the setting)."""
    if not (default_gb > 0 and math.isfinite(default_gb)):
        raise ValueError(f"gpu_mem_gb must be a positive number of GB, got {default_gb!r}")
    memory = {name: gpu.memory_gb for name, gpu in catalog.gpus().items()}
    known = (rows[features.GPU_MODEL] if features.GPU_MODEL in rows.columns
             else pl.Series([None] * rows.height, dtype=pl.String))
    gb = known.replace_strict(memory, default=None, return_dtype=pl.Float64)
    if queue_gb and c.QUEUE in rows.columns:
        gb = gb.fill_null(rows[c.QUEUE].cast(pl.String).replace_strict(dict(queue_gb), default=None, return_dtype=pl.Float64))
    return pl.DataFrame({c.JOB_ID: rows[c.JOB_ID], "gpu_mem_gb": gb.fill_null(float(default_gb))})


def memory_advice(forecasts: pl.DataFrame, gpu_mem: pl.DataFrame | float) -> pl.DataFrame:
    """Add safe_request_gb, gpu_mem_gb and oom_risk to the peak_gpu_mem_gb rows (null elsewhere).

    `gpu_mem`: per job (`job_gpu_memory`), or one size (GB) for every job."""
    if not isinstance(gpu_mem, pl.DataFrame):
        gpu_mem = job_gpu_memory(forecasts.select(c.JOB_ID).unique(), gpu_mem)
    is_mem = pl.col("target") == c.PEAK_GPU_MEM_GB
    if not forecasts.select(is_mem.any()).item():  # another target's forecasts: no advice (no join of 1M ids)
        return forecasts.with_columns(pl.lit(None, pl.Float64).alias("safe_request_gb"),
                                      pl.lit(None, pl.Float64).alias("gpu_mem_gb"), pl.lit(None, pl.Boolean).alias("oom_risk"))
    safe = pl.col("p90").map_batches(lambda s: pl.Series(safe_request_gb(s.to_numpy())), return_dtype=pl.Float64)
    if _in_order(forecasts, gpu_mem):  # the champion's forecasts of every pending job: the join's rows, in place
        joined = pl.concat([forecasts, gpu_mem.drop(c.JOB_ID)], how="horizontal")
    else:
        joined = forecasts.join(gpu_mem, on=c.JOB_ID, how="left", maintain_order="left")
    return (joined
            .with_columns(pl.when(is_mem).then(safe).alias("safe_request_gb"),
                          pl.when(is_mem).then(pl.col("gpu_mem_gb")).alias("gpu_mem_gb"))
            .with_columns(pl.when(is_mem).then(pl.col("safe_request_gb") > pl.col("gpu_mem_gb")).alias("oom_risk")))


def _in_order(forecasts: pl.DataFrame, per_job: pl.DataFrame) -> bool:
    """Whether `forecasts` name `per_job`'s jobs row for row, `per_job`'s ids none missing and strictly increasing
    (so each once), and no column but the id in both: then a left join on the id is the two frames side by side, at
    ~15 ms instead of a 1M-string join's ~0.2 CPU-s (issue 52 item 5)."""
    ids, keys = forecasts[c.JOB_ID], per_job[c.JOB_ID]
    if len(ids) != len(keys) or keys.null_count() or set(forecasts.columns) & set(per_job.columns) != {c.JOB_ID}:
        return False
    return bool(len(keys) < 2 or (keys.slice(1) > keys.slice(0, len(keys) - 1)).all()) and ids.equals(keys, check_names=False)
