-- gpucast warehouse, schema v1. Applied on every writer connection; every statement is idempotent.
-- The placeholder CONTRACT_COLUMNS (between @ signs, below) is replaced by the contract's columns
-- (expectations/contract.py), with SQL types and NOT NULL for required fields: see warehouse/schema.py.
SET TimeZone = 'UTC';

-- Every distinct record version ever loaded (history); the Parquet lake mirrors this table.
CREATE TABLE IF NOT EXISTS job_log_records (
    @CONTRACT_COLUMNS@,
    record_hash VARCHAR NOT NULL,      -- md5 of the contract columns: identical records share it
    arrival BIGINT NOT NULL,           -- global arrival order (ties on updated_at are broken by it)
    source_file VARCHAR NOT NULL,
    source_row BIGINT NOT NULL,        -- line (JSONL, CSV) or row (Parquet) in source_file
    ingest_run_id VARCHAR NOT NULL,
    loaded_at TIMESTAMPTZ NOT NULL
);

-- One row per job: the key of its latest record by updated_at (else submitted_at), then by arrival (warehouse/load.py
-- keeps it). `latest_at` is that record's coalesce(updated_at, submitted_at), so a load compares a job's fresh records
-- with its latest without reading the history. Until session 15 `job_logs` was a table holding a second copy of these
-- rows, every column (2.2-2.4 CPU-s a million jobs to write, issue 52); a warehouse of an older gpucast has it turned
-- into this table by `schema.latest_keys`, before this DDL.
CREATE TABLE IF NOT EXISTS job_logs_latest (
    job_id VARCHAR NOT NULL,
    arrival BIGINT NOT NULL,
    latest_at TIMESTAMPTZ NOT NULL
);
-- Warehouses made under an older contract gain its newer columns (the placeholder below).
@CONTRACT_MIGRATIONS@

-- Every job's latest record: the rows of `job_log_records` whose arrival `job_logs_latest` holds, with its columns in
-- its order (the columns `job_logs` had as a table). Planners, the score, training and the plan read it by this name.
-- An inner join, the same rows as a semi join (`arrival` is unique on both sides): DuckDB may build its hash table on
-- either side (the planners' copy has the same view over its own arrivals, warehouse/publish.py).
CREATE OR REPLACE VIEW job_logs AS
SELECT r.* FROM job_logs_latest k JOIN job_log_records r ON r.arrival = k.arrival;

-- Rows that broke a rule, with every rule they broke. Keyed by file content and row, so
-- ingesting the same file again replaces its rejections instead of adding them twice.
CREATE TABLE IF NOT EXISTS rejected_job_logs (
    source_file VARCHAR NOT NULL,
    source_sha256 VARCHAR NOT NULL,
    source_row BIGINT NOT NULL,
    job_id VARCHAR,
    raw_record VARCHAR,
    reasons VARCHAR[] NOT NULL,
    reason_text VARCHAR NOT NULL,
    ingest_run_id VARCHAR NOT NULL,
    rejected_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (source_sha256, source_row)
);

-- Files that could not be read at all.
CREATE TABLE IF NOT EXISTS rejected_files (
    source_file VARCHAR NOT NULL,
    source_sha256 VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,
    ingest_run_id VARCHAR NOT NULL,
    rejected_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (source_sha256, source_file)
);

-- Per run and file: what was read and where every row went.
CREATE TABLE IF NOT EXISTS ingest_files (
    ingest_run_id VARCHAR NOT NULL,
    source_file VARCHAR NOT NULL,
    source_sha256 VARCHAR NOT NULL,
    format VARCHAR,
    rows_read BIGINT NOT NULL,
    rows_loaded BIGINT NOT NULL,
    rows_rejected BIGINT NOT NULL,
    rows_duplicate BIGINT NOT NULL,
    status VARCHAR NOT NULL,           -- loaded | rejected (whole file) | empty | gone (deleted before read)
    reason VARCHAR,
    ignored_columns VARCHAR[],
    PRIMARY KEY (ingest_run_id, source_file)
);

CREATE TABLE IF NOT EXISTS ingest_runs (
    run_id VARCHAR PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ,
    files BIGINT NOT NULL,
    files_rejected BIGINT NOT NULL,
    rows_read BIGINT NOT NULL,
    rows_loaded BIGINT NOT NULL,
    rows_rejected BIGINT NOT NULL,
    rows_duplicate BIGINT NOT NULL,
    status VARCHAR NOT NULL,           -- running | succeeded | failed | crashed
    message VARCHAR,
    pid BIGINT,                        -- the process running it, and its host: a run left 'running'
    host VARCHAR                       -- by a dead process is marked 'crashed' by the next run
);
ALTER TABLE ingest_runs ADD COLUMN IF NOT EXISTS pid BIGINT;
ALTER TABLE ingest_runs ADD COLUMN IF NOT EXISTS host VARCHAR;
-- where the records came from: 'files' as they are, 'slurm' (`gpucast import slurm`), 'mlflow' (`gpucast import mlflow`),
-- 'sources' (a sources.yaml the nightly could not read: a failed run naming it), or 'mapping' (`gpucast ingest --mapping FILE`: the
-- mapping file's absolute path and the sha256 of the version used)
ALTER TABLE ingest_runs ADD COLUMN IF NOT EXISTS source VARCHAR DEFAULT 'files';
ALTER TABLE ingest_runs ADD COLUMN IF NOT EXISTS mapping_path VARCHAR;
ALTER TABLE ingest_runs ADD COLUMN IF NOT EXISTS mapping_sha256 VARCHAR;

-- How far an incremental source has been read (`gpucast import mlflow`, warehouse/watermarks.py): per
-- tracking URI and experiment id, the latest run start or end time an import saw (ms since the epoch, as
-- MLflow records it). The next import re-reads from an hour before it (docs/sources.md).
CREATE TABLE IF NOT EXISTS source_watermarks (
    source VARCHAR NOT NULL,           -- 'mlflow'
    location VARCHAR NOT NULL,         -- the tracking URI, its password, token and fragment masked (warehouse/errors.py
                                       -- `redact`; those an older gpucast stored as given: warehouse/schema.py `redact_stored`)
    scope VARCHAR NOT NULL,            -- the experiment id
    watermark_ms BIGINT NOT NULL,
    ingest_run_id VARCHAR NOT NULL,    -- the ingest run that loaded what it read
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (source, location, scope)
);

-- What the Parquet lake holds per day, as of its last rewrite: a day whose records differ (or whose
-- folder is gone) is stale, and the next ingest rewrites it (warehouse/load.py, refresh_lake).
CREATE TABLE IF NOT EXISTS lake_partitions (
    submitted_date DATE PRIMARY KEY,
    records BIGINT NOT NULL,
    max_arrival BIGINT NOT NULL,
    written_at TIMESTAMPTZ NOT NULL
);

-- Great Expectations results per run, file and expectation: readable offline with SQL.
CREATE TABLE IF NOT EXISTS validation_results (
    ingest_run_id VARCHAR NOT NULL,
    source_file VARCHAR NOT NULL,
    suite VARCHAR NOT NULL,
    expectation VARCHAR NOT NULL,
    column_name VARCHAR,
    rule VARCHAR NOT NULL,
    success BOOLEAN NOT NULL,
    unexpected_count BIGINT NOT NULL,
    error VARCHAR
);

-- Training runs (issue 3): one row per run, per target, per model x repeat x split.
CREATE TABLE IF NOT EXISTS train_runs (
    train_run_id VARCHAR PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ,
    status VARCHAR NOT NULL,           -- running | succeeded | failed
    models VARCHAR[],
    preset VARCHAR,
    repeats BIGINT,
    device VARCHAR,
    message VARCHAR,
    pid BIGINT,                        -- the process running it, and its host: a run left 'running'
    host VARCHAR                       -- by a dead process is marked 'crashed' by the next run
);
ALTER TABLE train_runs ADD COLUMN IF NOT EXISTS pid BIGINT;
ALTER TABLE train_runs ADD COLUMN IF NOT EXISTS host VARCHAR;
-- what the run was asked to do, as it received it (the GPU pool's run included): the night budget,
-- where its fits were to run, and where they ran
ALTER TABLE train_runs ADD COLUMN IF NOT EXISTS night_budget_minutes DOUBLE;
ALTER TABLE train_runs ADD COLUMN IF NOT EXISTS train_runner VARCHAR;
ALTER TABLE train_runs ADD COLUMN IF NOT EXISTS dask_address VARCHAR;
ALTER TABLE train_runs ADD COLUMN IF NOT EXISTS fits_on VARCHAR;
ALTER TABLE train_runs ADD COLUMN IF NOT EXISTS flow_run_id VARCHAR;  -- the Prefect flow run that trained (the GPU pool's caller reads its results by it)
-- the night's clock the run trained for (a backfill's --as-of); NULL: a live night, its clock is started_at.
-- A backfill's champion gate judges the champion of the latest earlier night (warehouse/forecast.py CHAMPIONS_AS_OF).
ALTER TABLE train_runs ADD COLUMN IF NOT EXISTS as_of TIMESTAMPTZ;
-- the scoring budget the run's champions were chosen by (GPUCAST_SCORE_BUDGET_S, CPU-s a target; 0: none) and the pending
-- jobs it was judged at (tasks/learn/champion.py `ScoreBudget`)
ALTER TABLE train_runs ADD COLUMN IF NOT EXISTS score_budget_s DOUBLE;
ALTER TABLE train_runs ADD COLUMN IF NOT EXISTS pending_jobs BIGINT;

CREATE TABLE IF NOT EXISTS model_metrics (
    train_run_id VARCHAR NOT NULL,
    target VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    preset VARCHAR,                    -- the Transformer-BiGRU preset; null for baselines
    repeat BIGINT NOT NULL,
    seed BIGINT NOT NULL,
    split VARCHAR NOT NULL,            -- since issue 50 one fit is one fold of a repeated 3-fold: validation and test are both its held-out fold (rows it never saw); backtest (the latest week) or holdout (whole model families): the generalisation holdout, never fitted on (tasks/learn/train.py)
    mse DOUBLE, rmse DOUBLE, mae DOUBLE, mape DOUBLE, r2 DOUBLE,
    rows_train BIGINT NOT NULL,
    rows_test BIGINT NOT NULL,         -- rows of the evaluated split
    train_seconds DOUBLE NOT NULL,
    device VARCHAR NOT NULL,
    epochs BIGINT                      -- epochs the Transformer-BiGRU ran (early stop, time budget); null for baselines
);
-- warehouses created before the columns existed
ALTER TABLE model_metrics ADD COLUMN IF NOT EXISTS epochs BIGINT;
ALTER TABLE model_metrics ADD COLUMN IF NOT EXISTS features VARCHAR;  -- the feature set (tasks/learn/features.py)
-- its predict's CPU seconds per 1M jobs on one core, counted from the fitted model (tasks/learn/champion.py `score_cost`):
-- the champion rule's tie-break and its scoring budget (GPUCAST_SCORE_BUDGET_S)
ALTER TABLE model_metrics ADD COLUMN IF NOT EXISTS score_seconds_per_million DOUBLE;
-- the planner loss (issue 50): sqrt(mean(w err²)) in the target's units, w = 3 on under-forecasts (tasks/learn/champion.py)
ALTER TABLE model_metrics ADD COLUMN IF NOT EXISTS planner_loss DOUBLE;

-- Per train run: the fits (target x model x repeat) it did not finish, and why: the night budget
-- ran out (GPUCAST_NIGHT_BUDGET_MINUTES), or a worker was lost twice; or the fits it did not run because their
-- model's last counted scoring cost is far over tonight's scoring budget (reason 'not fitted: ...',
-- GPUCAST_SCORE_BUDGET_S; every repeat but the first). The champion was chosen among the fits that finished.
CREATE TABLE IF NOT EXISTS skipped_fits (
    train_run_id VARCHAR NOT NULL,
    target VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    repeat BIGINT NOT NULL,
    reason VARCHAR NOT NULL
);

-- Per train run and target: the champion (chosen on validation rows), or why the target was skipped.
CREATE TABLE IF NOT EXISTS model_champions (
    train_run_id VARCHAR NOT NULL,
    target VARCHAR NOT NULL,
    model VARCHAR,
    preset VARCHAR,
    labelled_rows BIGINT NOT NULL,
    validation_rmse DOUBLE,
    test_rmse_mean DOUBLE,
    test_mape_mean DOUBLE,
    model_dir VARCHAR,
    skipped_reason VARCHAR,
    PRIMARY KEY (train_run_id, target)
);
ALTER TABLE model_champions ADD COLUMN IF NOT EXISTS features VARCHAR;          -- the feature set it learned from
ALTER TABLE model_champions ADD COLUMN IF NOT EXISTS refit_rows BIGINT;         -- labelled jobs the saved model was refitted on
ALTER TABLE model_champions ADD COLUMN IF NOT EXISTS calibration_rows BIGINT;   -- ... and held out to calibrate its intervals
-- The champion/challenger gate (tasks/learn/gate.py): tonight's best on validation (`challenger`) replaces the
-- current champion only if it is not worse on the backtest window beyond noise; otherwise the current
-- champion stays: `model`/`model_dir` are then its own, and `champion_run_id` the run that trained it.
ALTER TABLE model_champions ADD COLUMN IF NOT EXISTS challenger VARCHAR;
ALTER TABLE model_champions ADD COLUMN IF NOT EXISTS decision VARCHAR;          -- first | promoted | kept
ALTER TABLE model_champions ADD COLUMN IF NOT EXISTS decision_reason VARCHAR;
ALTER TABLE model_champions ADD COLUMN IF NOT EXISTS champion_run_id VARCHAR;
-- tonight's choice (`challenger`): the most accurate model on validation, and why the challenger was chosen
-- (the cheapest to score of the models tied with the most accurate within noise: tasks/learn/train.py CHAMPION_RULE)
ALTER TABLE model_champions ADD COLUMN IF NOT EXISTS most_accurate_model VARCHAR;
ALTER TABLE model_champions ADD COLUMN IF NOT EXISTS choice_reason VARCHAR;

-- Forecasts (issue 4) ----------------------------------------------------------------------------
-- One row per scoring run. Its forecasts are inserted in the same transaction that marks it
-- `published`, so a reader sees all of a run's forecasts or none.
CREATE TABLE IF NOT EXISTS score_runs (
    score_run_id VARCHAR PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ,
    status VARCHAR NOT NULL,           -- published | failed
    pending_jobs BIGINT,
    forecasts BIGINT,
    targets VARCHAR[],
    gpu_mem_gb DOUBLE,                 -- the GPU size `oom_risk` was judged against
    message VARCHAR,
    pid BIGINT,                        -- the process running it, and its host: a run left 'running'
    host VARCHAR                       -- by a dead process is marked 'crashed' by the next run
);
ALTER TABLE score_runs ADD COLUMN IF NOT EXISTS pid BIGINT;
ALTER TABLE score_runs ADD COLUMN IF NOT EXISTS host VARCHAR;
ALTER TABLE score_runs ADD COLUMN IF NOT EXISTS ood_forecasts BIGINT;  -- forecasts of out-of-distribution jobs
ALTER TABLE score_runs ADD COLUMN IF NOT EXISTS pruned_at TIMESTAMPTZ;  -- its forecasts deleted (GPUCAST_KEEP_FORECAST_DAYS)
-- the time its forecasts are stamped with (their `scored_at`; the retention compares it: warehouse/forecast.py `prune`)
ALTER TABLE score_runs ADD COLUMN IF NOT EXISTS forecasts_at TIMESTAMPTZ;

-- Per pending job and target: the champion's P10 / P50 / P90 (split-conformal, see README).
CREATE TABLE IF NOT EXISTS forecasts (
    job_id VARCHAR NOT NULL,
    target VARCHAR NOT NULL,
    p10 DOUBLE NOT NULL,
    p50 DOUBLE NOT NULL,
    p90 DOUBLE NOT NULL,
    model VARCHAR NOT NULL,
    train_run_id VARCHAR NOT NULL,
    score_run_id VARCHAR NOT NULL,
    scored_at TIMESTAMPTZ NOT NULL,
    safe_request_gb DOUBLE,            -- peak_gpu_mem_gb only: P90 plus allocator headroom
    gpu_mem_gb DOUBLE,                 -- peak_gpu_mem_gb only: the GPU size judged against
    oom_risk BOOLEAN                   -- peak_gpu_mem_gb only: safe_request_gb > gpu_mem_gb
);
-- No primary key: (score_run_id, job_id, target) is unique by construction (one row per pending job and
-- target per run) and checked for the run at publish (warehouse/forecast.py); the key's index cost 2.8 of
-- 3.6 s per 3M-row publish. A warehouse made with the key loses it once (warehouse/db.py `migrate`).
ALTER TABLE forecasts ADD COLUMN IF NOT EXISTS ood BOOLEAN;         -- unlike the champion's training jobs (tasks/learn/ood.py)
ALTER TABLE forecasts ADD COLUMN IF NOT EXISTS ood_reason VARCHAR;  -- what made it so, in words
-- a job that logs no `arch`: the zoo architecture its shape matched, and how closely (tasks/learn/zoo.py match_shape);
-- a bare family name ('efficientnet'): the member traced (distance null for the family's default member)
ALTER TABLE forecasts ADD COLUMN IF NOT EXISTS arch_inferred VARCHAR;
ALTER TABLE forecasts ADD COLUMN IF NOT EXISTS arch_match_distance DOUBLE;

-- Planner views --------------------------------------------------------------------------------
-- The latest published forecast of every job that is still PENDING, per target.
-- Defined again after the plan's tables, with each job's expected start (issue 53): keep the two alike.
CREATE OR REPLACE VIEW pending_forecasts AS
SELECT f.job_id, f.target, f.p10, f.p50, f.p90, f.safe_request_gb, f.gpu_mem_gb, f.oom_risk, f.ood, f.ood_reason,
       f.model, f.train_run_id, f.score_run_id, f.scored_at,
       j.queue, j.team, j.model_type, j.submitted_at
FROM forecasts f
JOIN job_logs j ON j.job_id = f.job_id AND j.status = 'PENDING'
-- only the latest published run: it scored every pending job, so older runs are never read
WHERE f.score_run_id = (SELECT score_run_id FROM score_runs WHERE status = 'published'
                        ORDER BY started_at DESC, score_run_id DESC LIMIT 1);

-- Per submission day and queue. runtime_hours is a job's wall time on its GPUs, so its GPU-hours are runtime x
-- gpu_count (missing: 1; the contract's rule, as job_demand counts them; session 25: they were summed as one-GPU
-- hours); summed P90s are a conservative bound (not the P90 of the sum). A job with LLM fields whose size is unknown
-- (tasks/learn/ood.py check 7: its reason holds the words @UNKNOWN_LLM_SIZE@) is counted in `jobs_unknown_size`, not
-- in `jobs_over_*gb` nor `mem_p90_max_gb`: its memory forecast leans on nothing, and the plan reads it as unknown too
-- (review 65b S3-3, 66a S3-6). Days are UTC days whatever the reader's TimeZone (newcomer 27 P4: a client in
-- another zone moved jobs between days).
CREATE OR REPLACE VIEW capacity_daily AS
SELECT CAST(timezone('UTC', submitted_at) AS DATE) AS submitted_day,
       queue,
       count(DISTINCT job_id) AS jobs,
       sum(p50 * gpus) FILTER (WHERE target = 'runtime_hours') AS gpu_hours_p50,
       sum(p90 * gpus) FILTER (WHERE target = 'runtime_hours') AS gpu_hours_p90,
       sum(p50) FILTER (WHERE target = 'gpu_demand_gflops') AS gflops_p50,
       sum(p90) FILTER (WHERE target = 'gpu_demand_gflops') AS gflops_p90,
       max(p90) FILTER (WHERE target = 'peak_gpu_mem_gb' AND NOT size_unknown) AS mem_p90_max_gb,
       count(*) FILTER (WHERE target = 'peak_gpu_mem_gb' AND safe_request_gb > 24 AND NOT size_unknown) AS jobs_over_24gb,
       count(*) FILTER (WHERE target = 'peak_gpu_mem_gb' AND safe_request_gb > 40 AND NOT size_unknown) AS jobs_over_40gb,
       count(*) FILTER (WHERE target = 'peak_gpu_mem_gb' AND safe_request_gb > 80 AND NOT size_unknown) AS jobs_over_80gb,
       count(*) FILTER (WHERE target = 'peak_gpu_mem_gb' AND size_unknown) AS jobs_unknown_size
FROM (SELECT f.*, coalesce(j.gpu_count, 1) AS gpus,
             coalesce(strpos(f.ood_reason, @UNKNOWN_LLM_SIZE@) > 0, false) AS size_unknown
      FROM pending_forecasts f JOIN job_logs j USING (job_id))
GROUP BY ALL;

-- Per target, the champion of the latest successful train run that trained it: the model that
-- scores (warehouse/forecast.py reads this view; the leaderboard below is built on it). Latest by the
-- night a run trained for (its `as_of`; a live run's start), then by start: a backfill of a past night,
-- run today, does not replace the live champion (review 64 S1-1). `CHAMPIONS_AS_OF` orders the same way.
CREATE OR REPLACE VIEW current_champions AS
SELECT c.target, c.model, c.preset, coalesce(c.champion_run_id, c.train_run_id) AS train_run_id, c.model_dir,
       c.train_run_id AS decided_by_run_id, c.decision, c.decision_reason, r.started_at AS decided_at
FROM model_champions c JOIN train_runs r USING (train_run_id)
WHERE r.status = 'succeeded' AND c.model IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY c.target ORDER BY coalesce(r.as_of, r.started_at) DESC, r.started_at DESC) = 1;

-- Per train run, target and model: the metrics averaged over the repeats (validation chooses).
CREATE OR REPLACE VIEW run_model_summary AS
SELECT train_run_id, target, model, any_value(preset) AS preset, any_value(features) AS features,
       avg(rmse) FILTER (WHERE split = 'validation') AS validation_rmse,
       avg(mse) FILTER (WHERE split = 'test') AS test_mse,
       avg(rmse) FILTER (WHERE split = 'test') AS test_rmse,
       avg(mae) FILTER (WHERE split = 'test') AS test_mae,
       avg(mape) FILTER (WHERE split = 'test') AS test_mape,
       avg(r2) FILTER (WHERE split = 'test') AS test_r2,
       count(DISTINCT repeat) AS repeats,
       avg(train_seconds) AS train_seconds,
       any_value(device) AS device,
       max(epochs) AS epochs,
       avg(rmse) FILTER (WHERE split = 'backtest') AS backtest_rmse,  -- the latest week's completed jobs (null: no backtest)
       avg(mape) FILTER (WHERE split = 'backtest') AS backtest_mape,
       avg(planner_loss) FILTER (WHERE split = 'test') AS planner_loss,  -- out of fold (the champion rule pools the rows)
       avg(planner_loss) FILTER (WHERE split IN ('backtest', 'holdout')) AS holdout_planner_loss
FROM model_metrics
GROUP BY train_run_id, target, model;

-- Per target and model: mean metrics of the latest successful train run that trained the target.
CREATE OR REPLACE VIEW model_leaderboard AS
SELECT s.target, s.model, s.preset, s.features, s.train_run_id,
       rank() OVER (PARTITION BY s.target ORDER BY s.planner_loss NULLS LAST, s.validation_rmse) AS rank,  -- runs before issue 50: no planner loss
       s.model = l.model AND l.train_run_id = s.train_run_id AS is_champion,
       s.validation_rmse, s.test_mse, s.test_rmse, s.test_mae, s.test_mape, s.test_r2, s.repeats,
       s.train_seconds, s.device, s.epochs, s.backtest_rmse, s.backtest_mape, s.planner_loss, s.holdout_planner_loss
FROM run_model_summary s JOIN current_champions l ON l.target = s.target AND l.decided_by_run_id = s.train_run_id;

-- The seed paper's comparison: the 11 raw features only, from the latest successful train run that
-- used them (`gpucast train --features contract`; runs before the rename recorded 'paper'); empty until such a run.
CREATE OR REPLACE VIEW paper_leaderboard AS
WITH latest AS (
    SELECT DISTINCT ON (s.target) s.target, s.train_run_id
    FROM run_model_summary s JOIN train_runs r USING (train_run_id)
    WHERE r.status = 'succeeded' AND s.features IN ('contract', 'paper')
    ORDER BY s.target, r.started_at DESC
)
SELECT s.target, s.model, s.preset, s.train_run_id,
       rank() OVER (PARTITION BY s.target ORDER BY s.validation_rmse) AS rank,
       s.validation_rmse, s.test_mse, s.test_rmse, s.test_mae, s.test_mape, s.test_r2, s.repeats, s.train_seconds
FROM run_model_summary s JOIN latest l USING (target, train_run_id);

-- The nightly backtest (warehouse/backtest.py): per completed job and target, the last forecast
-- published before the job started (before it completed, when no start was logged) and what it measured.
CREATE TABLE IF NOT EXISTS forecast_backtest (
    job_id VARCHAR NOT NULL,
    target VARCHAR NOT NULL,
    score_run_id VARCHAR,              -- null: completed with no earlier forecast ("not forecast")
    scored_at TIMESTAMPTZ,
    model VARCHAR,
    train_run_id VARCHAR,
    model_type VARCHAR,
    queue VARCHAR,
    started_at TIMESTAMPTZ,            -- its first RUNNING record (null: not logged)
    completed_at TIMESTAMPTZ NOT NULL,
    start_known BOOLEAN,
    p10 DOUBLE, p50 DOUBLE, p90 DOUBLE, safe_request_gb DOUBLE,
    actual DOUBLE NOT NULL,
    ape DOUBLE,                        -- |p50 - actual| / actual
    in_p10_p90 BOOLEAN,
    within_p90 BOOLEAN,
    under_provisioned BOOLEAN,         -- peak_gpu_mem_gb only: safe_request_gb < actual
    ood BOOLEAN,
    backtested_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (job_id, target)
);

-- How the intervals held, per target, model type and queue, on the jobs that came next (every
-- back-tested job that had a forecast): the per-group coverage the Mondrian calibration aims at.
CREATE OR REPLACE VIEW interval_coverage AS
SELECT target, model_type, queue, count(*) AS jobs,
       round(avg(in_p10_p90::INT), 4) AS p10_p90_coverage, round(avg(within_p90::INT), 4) AS p90_coverage,
       round(avg(under_provisioned::INT), 4) AS under_provisioned,
       count(*) >= 50 AS enough_jobs                 -- the goal (P90 85-95%) is judged on groups of 50+
FROM forecast_backtest WHERE p50 IS NOT NULL
GROUP BY ALL ORDER BY target, model_type, queue;

-- The GPU catalogue shipped with gpucast (expectations/reference/gpu_catalog.csv), refreshed at each
-- publish: memory and peak dense throughput per GPU type, with the vendor page each row came from.
CREATE TABLE IF NOT EXISTS gpu_catalog (
    gpu_type VARCHAR PRIMARY KEY,
    vendor VARCHAR,
    memory_gb DOUBLE,
    fp64_tflops DOUBLE, fp32_tflops DOUBLE, tf32_tflops DOUBLE, fp16_tflops DOUBLE, bf16_tflops DOUBLE,
    memory_bandwidth_gbs DOUBLE,
    source VARCHAR
);

-- Capacity plans (`gpucast plan`, the nightly's plan step; tasks/plan/capacity.py explains the packing) ---
CREATE TABLE IF NOT EXISTS plan_runs (
    plan_run_id VARCHAR PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ,
    status VARCHAR NOT NULL,           -- running | succeeded | failed | crashed
    start_day DATE,                    -- the plan's first day (the latest forecasts' day)
    days INTEGER,
    gpu_types VARCHAR[],               -- `--gpu-types`, when the plan was narrowed to them
    inventory VARCHAR,                 -- the inventory file read (NULL: none; GPUs owned unknown)
    score_run_id VARCHAR,              -- the forecasts planned from
    jobs BIGINT,                       -- pending jobs planned (unknown size included)
    unknown_size_jobs BIGINT,          -- planned without a memory forecast (never scored, or an LLM of unknown size:
                                       -- capacity_daily.jobs_unknown_size counts those alone): a whole GPU for a day
    unplaceable_jobs BIGINT,           -- larger than every GPU of their queue: listed, not packed
    message VARCHAR,
    pid BIGINT,
    host VARCHAR
);

-- Per plan run, day, queue and GPU type: GPUs needed at P50 and P90 run times (memory always at
-- the P90 request), the lower bounds (lower_bound: exclusive GPU-hours / 24, rounded up; shared_bound:
-- with GPUs shared, memory x time), owned and shortfall.
CREATE TABLE IF NOT EXISTS capacity_plan (
    plan_run_id VARCHAR NOT NULL,
    day DATE NOT NULL,
    queue VARCHAR NOT NULL,
    gpu_type VARCHAR NOT NULL,
    gpu_memory_gb DOUBLE,
    jobs BIGINT,
    unknown_size_jobs BIGINT,
    gpu_hours_p50 DOUBLE,
    gpu_hours_p90 DOUBLE,
    lower_bound_p50 BIGINT,
    lower_bound_p90 BIGINT,
    shared_bound_p50 BIGINT,           -- memory x time / (GPU memory x 24 h), rounded up: no sharing plan needs fewer
    shared_bound_p90 BIGINT,
    gpus_needed_p50 BIGINT,
    gpus_needed_p90 BIGINT,
    gpus_owned BIGINT,                 -- NULL: no inventory lists this queue
    shortfall_p50 BIGINT,              -- max(0, needed - owned)
    shortfall_p90 BIGINT,
    PRIMARY KEY (plan_run_id, day, queue, gpu_type)
);
-- Issue 30: the jobs not queued yet, from the demand forecast (tasks/plan/arrivals.py; docs/planners.md,
-- "The 14-day plan"). gpus_needed_p50/p90 above stay the queued ("known") jobs; the totals add the expected.
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS expected_gpu_hours_p50 DOUBLE;   -- the forecast's GPU-hours that day
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS expected_gpu_hours_p90 DOUBLE;
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS packing_efficiency DOUBLE;       -- GPU-hours per GPU-hour packed, recent days
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS gpus_needed_expected_p50 BIGINT; -- ceil(expected GPU-hours / 24 / efficiency)
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS gpus_needed_expected_p90 BIGINT;
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS gpus_total_p50 BIGINT;           -- gpus_needed_p50 + gpus_needed_expected_p50
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS gpus_total_p90 BIGINT;
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS shortfall_total_p50 BIGINT;      -- max(0, total - owned)
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS shortfall_total_p90 BIGINT;
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS gpus_needed_known BIGINT;        -- = gpus_needed_p50: the queued jobs at P50
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS gpus_needed_expected BIGINT;     -- = gpus_needed_expected_p50: the expected arrivals at P50
-- Issue 53 item 3: the row's part of the site's P90 total (summed over a day's rows: the P90 of the total, not the
-- rows' P90s summed): its share of the total arrivals' P90 (demand_forecast.gpu_hours_p90_of_total), and the GPUs
-- = gpus_needed_p90 + ceil(that / 24 / efficiency)
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS expected_gpu_hours_p90_of_total DOUBLE;
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS gpus_total_p90_of_total BIGINT;
-- Session 14: the pair at P50, the row's part of the site's P50 total (the total's own P50, split as its P90 is;
-- demand_forecast.gpu_hours_p50_of_total) and its GPUs = gpus_needed_p50 + ceil(that / 24 / efficiency): summed over
-- a day's rows the site's P50 (`gpucast plan`'s gpus_site_p50), which gpus_total_p50 summed (the queues' own P50s) is not
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS expected_gpu_hours_p50_of_total DOUBLE;
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS gpus_total_p50_of_total BIGINT;
ALTER TABLE plan_runs ADD COLUMN IF NOT EXISTS demand_run_id VARCHAR;                -- the demand forecast planned from (NULL: none)

-- Jobs no GPU of their queue can hold, with the smallest catalogue GPU that would (NULL: none).
CREATE TABLE IF NOT EXISTS capacity_unplaceable (
    plan_run_id VARCHAR NOT NULL,
    job_id VARCHAR NOT NULL,
    queue VARCHAR,
    mem_gb DOUBLE,                     -- the memory request (P90 + allocator headroom)
    gpu_count BIGINT,
    smallest_fitting_gpu VARCHAR
);

-- Jobs the P90 plan puts side by side on one GPU (summed requests fit it): MIG / MPS candidates.
CREATE TABLE IF NOT EXISTS capacity_colocation (
    plan_run_id VARCHAR NOT NULL,
    day DATE NOT NULL,
    queue VARCHAR NOT NULL,
    gpu_type VARCHAR NOT NULL,
    group_id BIGINT NOT NULL,
    jobs BIGINT,
    job_ids VARCHAR[],
    mem_gb DOUBLE                      -- summed memory requests of the group
);

-- Issue 53: a day's expected wait on the queue's GPUs of the type (tasks/plan/starts.py: a job submitted at the
-- start of the day waits this long; NULL: the GPUs owned are unknown or none).
ALTER TABLE capacity_plan ADD COLUMN IF NOT EXISTS expected_wait_hours DOUBLE;

-- Issue 53, item 5: per plan run and pending job, when it is expected to start on the GPUs owned (tasks/plan/starts.py:
-- first come first served, whole GPUs, after the running jobs). NULL: its queue owns no GPU of its type, fewer
-- than it asks for, or none known. pending_forecasts shows the latest plan's.
CREATE TABLE IF NOT EXISTS capacity_job_starts (
    plan_run_id VARCHAR NOT NULL,
    job_id VARCHAR NOT NULL,
    queue VARCHAR,
    gpu_type VARCHAR,                  -- the type the plan places it on (NULL: none of its queue holds it)
    expected_start DATE,               -- the day it starts
    expected_wait_hours DOUBLE         -- hours from the plan's first day, 00:00 UTC, to its start
);

-- Issue 53, item 4: per plan run, the baseline and each what-if scenario (records/scenario.py), one row per day
-- (tasks/plan/scenarios.py): GPUs needed, owned and short over all queues, jobs that fit no GPU or cannot start,
-- the expected wait of a job submitted that day, and what changed from the baseline. A failed scenario: one row,
-- status 'failed', day NULL, with its reason.
CREATE TABLE IF NOT EXISTS plan_scenarios (
    plan_run_id VARCHAR NOT NULL,
    scenario VARCHAR NOT NULL,         -- 'baseline': the inventory on file
    status VARCHAR NOT NULL,           -- planned | failed
    day DATE,
    gpus_total_p50 BIGINT,             -- known + expected, all queues and GPU types
    gpus_total_p90 BIGINT,             -- the site's P90 total: the rows' gpus_total_p90_of_total summed (issue 53),
                                       -- not capacity_plan.gpus_total_p90 (a row's own P90) summed
    gpus_owned BIGINT,                 -- NULL: no queue's GPUs are known
    gpus_short_p50 BIGINT,             -- the rows' shortfall_total_p50 summed
    gpus_short_p90 BIGINT,             -- the rows' shortfall_total_p90 (each queue at its own P90) summed: not the site's
    unplaceable_jobs BIGINT,           -- pending jobs larger than every GPU of their queue
    jobs_without_start BIGINT,         -- pending jobs whose queue owns no GPU of their type, or fewer than they ask for
    expected_wait_hours DOUBLE,        -- a job submitted at the day's start: its queue's wait, weighted by expected arrivals
    longest_wait_hours DOUBLE,
    longest_wait_queue VARCHAR,
    changes VARCHAR,                   -- the scenario's edits in words
    gpus_short_p90_vs_baseline BIGINT, -- minus the baseline's that day (NULL: a day the baseline does not plan)
    gpus_owned_vs_baseline BIGINT,
    expected_wait_hours_vs_baseline DOUBLE,
    unplaceable_jobs_vs_baseline BIGINT,
    reason VARCHAR                     -- why a failed scenario failed; a planned row's (the baseline's too): the
                                       -- days past the demand forecast, with no expected arrivals (session 25)
);
-- Session 14: the site's P50 total, the pair of gpus_total_p90 (the rows' gpus_total_p50_of_total summed: the site's
-- total's own P50), where gpus_total_p50 is the queues' own P50s summed
ALTER TABLE plan_scenarios ADD COLUMN IF NOT EXISTS gpus_site_p50 BIGINT;
-- Session 15 (review 64b S2-1): the GPUs the jobs that fit no GPU of their queue ask for; a what-if adding a type
-- that holds them moves them from here to gpus_short_*: per day, their sum never rises when GPUs are added to a
-- queue the inventory lists
ALTER TABLE plan_scenarios ADD COLUMN IF NOT EXISTS gpus_unplaceable BIGINT;
-- Session 17 (review 66a S2-1): gpus_unplaceable is a day's figure: the GPUs those jobs would hold that day had a GPU
-- held them from their first day for their P90 run time (the GPU counts of those running that day); rows recorded
-- before carried the plan-wide figure on every day. The jobs' first day and P90 run time, kept with them:
ALTER TABLE capacity_unplaceable ADD COLUMN IF NOT EXISTS first_day DATE;   -- the plan's first day for a job waiting now
ALTER TABLE capacity_unplaceable ADD COLUMN IF NOT EXISTS hours_p90 DOUBLE; -- the job's P90 run time (NULL: unknown)

-- The planners' views: the latest succeeded plan (a failed plan run never replaces it).
CREATE OR REPLACE VIEW current_capacity_plan AS
SELECT p.* FROM capacity_plan p
WHERE p.plan_run_id = (SELECT plan_run_id FROM plan_runs WHERE status = 'succeeded'
                       ORDER BY started_at DESC, plan_run_id DESC LIMIT 1);

CREATE OR REPLACE VIEW current_unplaceable_jobs AS
SELECT u.* FROM capacity_unplaceable u
WHERE u.plan_run_id = (SELECT plan_run_id FROM plan_runs WHERE status = 'succeeded'
                       ORDER BY started_at DESC, plan_run_id DESC LIMIT 1);

CREATE OR REPLACE VIEW current_colocation AS
SELECT g.* FROM capacity_colocation g
WHERE g.plan_run_id = (SELECT plan_run_id FROM plan_runs WHERE status = 'succeeded'
                       ORDER BY started_at DESC, plan_run_id DESC LIMIT 1);

CREATE OR REPLACE VIEW current_plan_scenarios AS
SELECT s.* FROM plan_scenarios s
WHERE s.plan_run_id = (SELECT plan_run_id FROM plan_runs WHERE status = 'succeeded'
                       ORDER BY started_at DESC, plan_run_id DESC LIMIT 1);

CREATE OR REPLACE VIEW current_job_starts AS
SELECT s.* FROM capacity_job_starts s
WHERE s.plan_run_id = (SELECT plan_run_id FROM plan_runs WHERE status = 'succeeded'
                       ORDER BY started_at DESC, plan_run_id DESC LIMIT 1);

-- Issue 53, item 5: pending_forecasts with each job's expected start from the latest plan (defined again here, after
-- the plan's tables; NULL until a plan has run, or for a job planned before it was pending).
CREATE OR REPLACE VIEW pending_forecasts AS
SELECT f.job_id, f.target, f.p10, f.p50, f.p90, f.safe_request_gb, f.gpu_mem_gb, f.oom_risk, f.ood, f.ood_reason,
       f.model, f.train_run_id, f.score_run_id, f.scored_at,
       j.queue, j.team, j.model_type, j.submitted_at,
       s.expected_start, s.expected_wait_hours
FROM forecasts f
JOIN job_logs j ON j.job_id = f.job_id AND j.status = 'PENDING'
LEFT JOIN current_job_starts s ON s.job_id = f.job_id
-- only the latest published run: it scored every pending job, so older runs are never read
WHERE f.score_run_id = (SELECT score_run_id FROM score_runs WHERE status = 'published'
                        ORDER BY started_at DESC, score_run_id DESC LIMIT 1);

-- Demand history (issue 30) ----------------------------------------------------------------------
-- Per job: its GPUs, when it held them and its GPU-hours, as `demand_daily` counts them (the rules,
-- with why, are in docs/planners.md, "Demand series"). Times are UTC timestamps without a zone, so
-- a day is a UTC day whatever the reader's TimeZone setting.
--   started_at: its first RUNNING record (none while pending); a finished job logged without one: ended_at - runtime_hours
--               (start_known false); null when neither is known (a job never started, or unknowable).
--   ended_at:   finished jobs (COMPLETED, FAILED, CANCELLED) only: the first record in that state, else
--               the logged start + runtime_hours; null while the job is pending or still running.
--   gpu_hours_known:    finished jobs: runtime_hours x GPUs (failed and cancelled jobs held their GPUs
--                       too), else the logged start-to-end time x GPUs; 0 for a job cancelled before it
--                       started; null when unknown.
--   gpu_hours_forecast: pending jobs: the P50 run time of the job's latest *published* forecast x GPUs; null
--                       when it has none. Running jobs (issue 53 item 2): hours_expected x GPUs.
--   hours_expected:     running jobs: their expected run time given the hours already run (elapsed: from the
--                       start to the warehouse's clock, its latest submitted_at / updated_at), survival-aware as
--                       tasks/learn/history.py RemainingTime: its forecast's P50 while that is still ahead; else the
--                       median run time of the COMPLETED jobs of its queue x GPU count that ran longer than it has
--                       (at least 10 of them; else of its queue's), but at least twice the hours run (a Pareto tail:
--                       as long again; the finished runs miss the long ones still running); with fewer such runs,
--                       twice the hours run for a job forecast while pending, unknown (null) for one never forecast
--                       (first seen running, beyond what its queue's history supports: likely a record whose end was
--                       never logged); never beyond the longest finished run of its queue (a job already past it, or
--                       in a queue with none, counts the hours it has run); a start not logged: just started. So a job running for days
--                       counts the days it will still run, and the last days of demand are not under-counted.
-- GPUs: gpu_count, missing means 1 (the contract's rule).
-- The warehouse's clock: the latest submitted_at / updated_at of any job, when the jobs still running were last known
-- to run. One definition (review 58 N4): job_demand's hours run below and the running jobs a nightly stages
-- (warehouse/training.py read_running) read it; its column name is records/times.py KNOWN_AT.
CREATE OR REPLACE VIEW warehouse_clock AS
SELECT greatest(max(submitted_at), max(updated_at)) AS known_at FROM job_logs;

CREATE OR REPLACE VIEW job_demand AS
WITH history AS (   -- the jobs not running read it (a read of running jobs only never runs it: `running` has theirs)
    SELECT job_id,
           min(updated_at) FILTER (WHERE status = 'RUNNING') AS running_at,
           min(updated_at) FILTER (WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED')) AS finished_at
    FROM job_log_records WHERE updated_at IS NOT NULL GROUP BY job_id
),
latest_p50 AS (
    SELECT f.job_id, f.p50
    FROM forecasts f JOIN score_runs r USING (score_run_id)
    WHERE r.status = 'published' AND f.target = 'runtime_hours'
    QUALIFY row_number() OVER (PARTITION BY f.job_id ORDER BY r.started_at DESC, f.score_run_id DESC) = 1
),
clock AS (      -- the warehouse's clock (the view above; the max taken before the UTC conversion: it keeps the order)
    SELECT timezone('UTC', known_at) AS now FROM warehouse_clock
),
running AS (    -- each running job's first RUNNING record (its records only) and hours run (a start not logged: just started)
    SELECT j.job_id, j.queue, coalesce(j.gpu_count, 1) AS gpus, j.submitted_at, j.gpu_type, h.running_at,
           j.time_limit_hours,
           coalesce(greatest(epoch(c.now - timezone('UTC', h.running_at)) / 3600, 0.0), 0.0) AS elapsed
    FROM job_logs j
    LEFT JOIN (SELECT job_id, min(updated_at) AS running_at FROM job_log_records
               WHERE status = 'RUNNING' AND updated_at IS NOT NULL
                 AND job_id IN (SELECT job_id FROM job_logs WHERE status = 'RUNNING')
               GROUP BY job_id) h USING (job_id), clock c
    WHERE j.status = 'RUNNING'
),
done AS (       -- the finished run times a running job's remaining time is read from, ranked per queue x GPUs / queue
                -- (only the queues with running jobs; the counts per group: `survival`'s GROUP BYs)
    SELECT queue, coalesce(gpu_count, 1) AS gpus, runtime_hours,
           row_number() OVER (PARTITION BY queue, coalesce(gpu_count, 1) ORDER BY runtime_hours) AS rank_qg,
           count(*) OVER (PARTITION BY queue, coalesce(gpu_count, 1) ORDER BY runtime_hours
                          RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS upto_qg,
           row_number() OVER (PARTITION BY queue ORDER BY runtime_hours) AS rank_q,
           count(*) OVER (PARTITION BY queue ORDER BY runtime_hours
                          RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS upto_q
    -- every finished run (a failed or cancelled run's end frees its GPUs as a completed one's does: a running job
    -- may end either way), as tasks/learn/history.py RemainingTime reads them
    FROM job_logs WHERE status IN ('COMPLETED', 'FAILED', 'CANCELLED') AND runtime_hours > 0
      AND queue IN (SELECT DISTINCT queue FROM job_logs WHERE status = 'RUNNING')
),
below AS (      -- how many finished runs of its queue x GPUs and of its queue did not last longer (as-of joins)
    SELECT r.job_id, r.queue, r.gpus, r.elapsed,
           coalesce(g.upto_qg, 0) AS upto_qg, coalesce(q.upto_q, 0) AS upto_q
    FROM running r
    ASOF LEFT JOIN done g ON g.queue = r.queue AND g.gpus = r.gpus AND g.runtime_hours <= r.elapsed
    ASOF LEFT JOIN done q ON q.queue = r.queue AND q.runtime_hours <= r.elapsed
),
survival AS (   -- the median of the longer runs (the lower one: rank upto + ceil(longer / 2)), by queue x GPUs, queue
    SELECT b.job_id, b.elapsed,
           coalesce(ng.n, 0) - b.upto_qg AS longer_qg, mg.runtime_hours AS median_qg,
           coalesce(nq.n, 0) - b.upto_q AS longer_q, mq.runtime_hours AS median_q, nq.longest AS longest_q
    FROM below b
    LEFT JOIN (SELECT queue, gpus, count(*) AS n FROM done GROUP BY ALL) ng ON ng.queue = b.queue AND ng.gpus = b.gpus
    LEFT JOIN (SELECT queue, count(*) AS n, max(runtime_hours) AS longest FROM done GROUP BY ALL) nq ON nq.queue = b.queue
    LEFT JOIN done mg ON mg.queue = b.queue AND mg.gpus = b.gpus
                     AND mg.rank_qg = b.upto_qg + (coalesce(ng.n, 0) - b.upto_qg + 1) // 2
    LEFT JOIN done mq ON mq.queue = b.queue AND mq.rank_q = b.upto_q + (coalesce(nq.n, 0) - b.upto_q + 1) // 2
),
expected AS (   -- each running job's whole run expected given the hours it has run (before its time limit's cap)
    SELECT r.job_id, r.queue, r.gpu_type, r.gpus, r.submitted_at, r.running_at, r.time_limit_hours, p.p50, s.elapsed,
           CASE WHEN p.p50 > s.elapsed THEN p.p50                                -- its forecast still ahead
                -- the median of the longer runs of its queue x GPUs (else of its queue), at least as long again,
                -- never beyond its queue's longest finished run (already past it: the hours run)
                WHEN s.longer_qg >= 10 THEN least(greatest(s.median_qg, 2 * s.elapsed), greatest(s.longest_q, s.elapsed))
                WHEN s.longer_q >= 10 THEN least(greatest(s.median_q, 2 * s.elapsed), greatest(s.longest_q, s.elapsed))
                -- fewer ran that long: as long again for a job forecast while pending, or still below a time limit
                -- it logged (the scheduler has not stopped it: not a record whose end was lost); one never forecast,
                -- without a limit or past it (first seen running, longer than its queue's history supports) is
                -- unknown: a stale record?
                WHEN s.elapsed > 0 AND (p.p50 IS NOT NULL OR r.time_limit_hours > s.elapsed)
                    THEN least(2 * s.elapsed, greatest(s.longest_q, s.elapsed))
           END AS hours
    FROM running r LEFT JOIN latest_p50 p USING (job_id) LEFT JOIN survival s USING (job_id)
),
jobs AS (       -- the jobs not running, then the running ones (their own history and survival)
    SELECT j.job_id, j.queue, j.gpu_type, coalesce(j.gpu_count, 1) AS gpus, j.status,
           j.status IN ('COMPLETED', 'FAILED', 'CANCELLED') AS finished,
           timezone('UTC', j.submitted_at) AS submitted_at,
           -- a job pending again (requeued) holds no GPUs until it runs again
           timezone('UTC', CASE WHEN j.status <> 'PENDING' THEN h.running_at END) AS running_at,
           timezone('UTC', h.finished_at) AS finished_at,
           to_microseconds(CAST(j.runtime_hours * 3600e6 AS BIGINT)) AS runtime,
           j.runtime_hours, p.p50, CAST(NULL AS DOUBLE) AS hours_expected
    FROM job_logs j LEFT JOIN history h USING (job_id) LEFT JOIN latest_p50 p USING (job_id)
    WHERE j.status <> 'RUNNING'
    UNION ALL
    SELECT job_id, queue, gpu_type, gpus, 'RUNNING', false, timezone('UTC', submitted_at), timezone('UTC', running_at),
           NULL, NULL, NULL, p50,
           -- below its time limit, never beyond it (the scheduler stops a job there: issue 53, as its forecasts)
           CASE WHEN time_limit_hours > elapsed THEN least(hours, time_limit_hours) ELSE hours END
    FROM expected
)
SELECT job_id, queue, gpu_type, gpus, status, submitted_at,
       coalesce(running_at, CASE WHEN finished THEN finished_at - runtime END) AS started_at,
       running_at IS NOT NULL AS start_known,
       CASE WHEN finished THEN coalesce(finished_at, running_at + runtime) END AS ended_at,
       CASE WHEN NOT finished THEN NULL
            WHEN runtime_hours IS NOT NULL THEN runtime_hours * gpus
            WHEN running_at IS NOT NULL AND finished_at IS NOT NULL THEN epoch(finished_at - running_at) / 3600 * gpus
            WHEN status = 'CANCELLED' AND running_at IS NULL THEN 0.0
       END AS gpu_hours_known,
       CASE WHEN status = 'PENDING' THEN p50 * gpus WHEN status = 'RUNNING' THEN hours_expected * gpus
       END AS gpu_hours_forecast,
       hours_expected
FROM jobs;

-- The demand series: per UTC day x queue x GPU type (null: not logged), every day from the group's
-- first to its last day, a day with no jobs as zeros (never a missing row).
--   jobs_submitted, gpu_hours_known, gpu_hours_forecast, gpu_hours (their sum), jobs_hours_unknown:
--     by submission day (demand as it arrives: a job's GPU-hours all count on the day it was submitted).
--   peak_busy_gpus: by the time GPUs were held: the most GPUs held at once during the day by the group's
--     jobs, each over [started_at, ended_at) (still running: to now, but a running job whose run time is unknown,
--     `hours_expected` NULL, likely a record whose end was never logged: @UNKNOWN_RUNNING_HOURS@ hours from its start, as
--     the plan holds its GPUs: records/__init__.py UNKNOWN_RUNNING_HOURS), jobs running since an earlier day
--     included. An event sweep: +GPUs at a start, -GPUs at an end, a running sum, each midnight an
--     instant of its own (so a day with no event still carries the GPUs held through it).
--   A group's last day is its last submission or event, or, while one of its jobs still runs, the
--   warehouse's last day (its latest submitted_at / updated_at).
CREATE OR REPLACE VIEW demand_daily AS
WITH demand AS MATERIALIZED (   -- job_demand read once (its running jobs' survival estimate paid once), for both below
    SELECT queue, gpu_type, gpus, submitted_at, started_at, ended_at, gpu_hours_known, gpu_hours_forecast, status,
           hours_expected
    FROM job_demand
),
by_submission AS (
    SELECT CAST(submitted_at AS DATE) AS day, queue, gpu_type,
           count(*) AS jobs_submitted,
           coalesce(sum(gpu_hours_known), 0) AS gpu_hours_known,
           coalesce(sum(gpu_hours_forecast), 0) AS gpu_hours_forecast,
           count(*) FILTER (WHERE gpu_hours_known IS NULL AND gpu_hours_forecast IS NULL) AS jobs_hours_unknown
    FROM demand GROUP BY ALL
),
intervals AS (  -- a start after its end (inconsistent times) is left out rather than held negative
    SELECT queue, gpu_type, gpus, started_at,
           CASE WHEN status = 'RUNNING' AND hours_expected IS NULL THEN started_at + to_microseconds(CAST(@UNKNOWN_RUNNING_HOURS@ * 3600e6 AS BIGINT))
                ELSE ended_at END AS ended_at
    FROM demand
    WHERE started_at IS NOT NULL AND (ended_at IS NULL OR ended_at > started_at)
),
events AS (     -- the net change of GPUs held at each instant
    SELECT queue, gpu_type, t, sum(delta) AS delta FROM (
        SELECT queue, gpu_type, started_at AS t, gpus AS delta FROM intervals
        UNION ALL SELECT queue, gpu_type, ended_at, -gpus FROM intervals WHERE ended_at IS NOT NULL
    ) GROUP BY ALL
),
last_day AS (
    SELECT CAST(max(greatest(timezone('UTC', submitted_at), timezone('UTC', coalesce(updated_at, submitted_at))))
                AS DATE) AS day
    FROM job_logs
),
bounds AS (
    SELECT queue, gpu_type, min(day) AS first_day, max(day) AS last_day FROM (
        SELECT queue, gpu_type, day FROM by_submission
        UNION ALL SELECT queue, gpu_type, CAST(t AS DATE) FROM events
        UNION ALL SELECT i.queue, i.gpu_type, l.day FROM intervals i, last_day l WHERE i.ended_at IS NULL
    ) GROUP BY ALL
),
calendar AS (
    SELECT queue, gpu_type, CAST(unnest(generate_series(first_day, last_day, INTERVAL 1 DAY)) AS DATE) AS day
    FROM bounds
),
levels AS (     -- GPUs held from each instant on (peers at one instant share the level after all of them)
    SELECT queue, gpu_type, t, sum(delta) OVER (PARTITION BY queue, gpu_type ORDER BY t) AS busy FROM (
        SELECT queue, gpu_type, t, delta FROM events
        UNION ALL SELECT queue, gpu_type, CAST(day AS TIMESTAMP), 0 FROM calendar
    )
),
peaks AS (
    SELECT queue, gpu_type, CAST(t AS DATE) AS day, CAST(max(busy) AS BIGINT) AS peak_busy_gpus
    FROM levels GROUP BY ALL
)
SELECT c.day, c.queue, c.gpu_type,
       coalesce(s.jobs_submitted, 0) AS jobs_submitted,
       coalesce(s.gpu_hours_known, 0) + coalesce(s.gpu_hours_forecast, 0) AS gpu_hours,
       coalesce(s.gpu_hours_known, 0.0) AS gpu_hours_known,
       coalesce(s.gpu_hours_forecast, 0.0) AS gpu_hours_forecast,
       coalesce(s.jobs_hours_unknown, 0) AS jobs_hours_unknown,
       coalesce(p.peak_busy_gpus, 0) AS peak_busy_gpus
FROM calendar c
LEFT JOIN by_submission s
       ON s.day = c.day AND s.queue IS NOT DISTINCT FROM c.queue AND s.gpu_type IS NOT DISTINCT FROM c.gpu_type
LEFT JOIN peaks p
       ON p.day = c.day AND p.queue IS NOT DISTINCT FROM c.queue AND p.gpu_type IS NOT DISTINCT FROM c.gpu_type;

-- Demand forecast (issue 30) ---------------------------------------------------------------------
-- One row per nightly (or `gpucast demand`) forecast of the next days' demand per queue x GPU type.
CREATE TABLE IF NOT EXISTS demand_runs (
    demand_run_id VARCHAR PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ,
    status VARCHAR NOT NULL,           -- running | succeeded | failed | crashed
    as_of DATE,                        -- the last day of history the forecast saw; day 1 is the day after
    days INTEGER,                      -- the horizon (`--days`)
    series BIGINT,                     -- queue x GPU type series forecast
    fallback_series BIGINT,            -- series given the seasonal-naive / naive forecast (the reason is per row)
    message VARCHAR,
    pid BIGINT,
    host VARCHAR
);

-- Per series and future day: daily GPU-hours (and jobs submitted) at P10 / P50 / P90.
CREATE TABLE IF NOT EXISTS demand_forecast (
    demand_run_id VARCHAR NOT NULL,
    day DATE NOT NULL,
    horizon INTEGER NOT NULL,          -- 1 = the day after as_of
    queue VARCHAR NOT NULL,
    gpu_type VARCHAR NOT NULL,         -- 'unknown' where the jobs did not say
    gpu_hours_p10 DOUBLE NOT NULL,
    gpu_hours_p50 DOUBLE NOT NULL,
    gpu_hours_p90 DOUBLE NOT NULL,
    jobs_p50 DOUBLE,                   -- jobs submitted that day, P50
    method VARCHAR NOT NULL,           -- the model chosen for the series (e.g. AutoETS, seasonal_naive, naive)
    fallback_reason VARCHAR,           -- why the series got a fallback (too short, model failed, lost to the baseline)
    PRIMARY KEY (demand_run_id, day, queue, gpu_type)
);
-- jobs submitted are a series of their own with their own chosen model (tasks/demand/forecast.py): its band,
-- model and fallback reason (null on rows of runs before these columns)
ALTER TABLE demand_forecast ADD COLUMN IF NOT EXISTS jobs_p10 DOUBLE;
ALTER TABLE demand_forecast ADD COLUMN IF NOT EXISTS jobs_p90 DOUBLE;
ALTER TABLE demand_forecast ADD COLUMN IF NOT EXISTS jobs_method VARCHAR;
ALTER TABLE demand_forecast ADD COLUMN IF NOT EXISTS jobs_fallback_reason VARCHAR;

-- issue 53 item 3: each series' part of the P90 of the site's total that day (the total's P90, from
-- demand_forecast_total, split over the day's series in proportion to their P50): summed over all series of a
-- day it is the P90 of the total, which gpu_hours_p90 summed is not (null on rows of runs before this column)
ALTER TABLE demand_forecast ADD COLUMN IF NOT EXISTS gpu_hours_p90_of_total DOUBLE;
-- session 14: its pair, each series' part of the P50 of the site's total (the total's P50 split the same way): the
-- site's P50 of the same forecast whose P90 the plan reads (null on rows of runs before this column)
ALTER TABLE demand_forecast ADD COLUMN IF NOT EXISTS gpu_hours_p50_of_total DOUBLE;

-- Issue 53 item 3: the site's total (every queue and GPU type summed) per future day, forecast as a series of its
-- own by the same method (tasks/demand/forecast.py `forecast_total`): its P10 / P90 are those of the total.
CREATE TABLE IF NOT EXISTS demand_forecast_total (
    demand_run_id VARCHAR NOT NULL,
    day DATE NOT NULL,
    horizon INTEGER NOT NULL,
    gpu_hours_p10 DOUBLE NOT NULL,
    gpu_hours_p50 DOUBLE NOT NULL,
    gpu_hours_p90 DOUBLE NOT NULL,
    jobs_p10 DOUBLE,
    jobs_p50 DOUBLE,
    jobs_p90 DOUBLE,
    method VARCHAR NOT NULL,
    fallback_reason VARCHAR,
    jobs_method VARCHAR,
    jobs_fallback_reason VARCHAR,
    PRIMARY KEY (demand_run_id, day)
);

-- Session 9 (issue 53 item 3): each queue's total (its GPU types summed) per future day (tasks/demand/forecast.py
-- `forecast_queue_totals`): a queue of several GPU types forecast as a series of its own by the same method, so its P10 /
-- P90 are those of the queue's total (not its series' bands summed); a queue of one series: that series' forecast.
CREATE TABLE IF NOT EXISTS demand_forecast_queue (
    demand_run_id VARCHAR NOT NULL,
    day DATE NOT NULL,
    horizon INTEGER NOT NULL,
    queue VARCHAR NOT NULL,
    gpu_hours_p10 DOUBLE NOT NULL,
    gpu_hours_p50 DOUBLE NOT NULL,
    gpu_hours_p90 DOUBLE NOT NULL,
    jobs_p10 DOUBLE,
    jobs_p50 DOUBLE,
    jobs_p90 DOUBLE,
    method VARCHAR NOT NULL,
    fallback_reason VARCHAR,
    jobs_method VARCHAR,
    jobs_fallback_reason VARCHAR,
    PRIMARY KEY (demand_run_id, day, queue)
);
-- ... and each series' part of its queue's P90 (the queue's P90 split over its series by P50): summed over a queue's
-- series of a day it is the P90 of the queue's total (null on rows of runs before this column)
ALTER TABLE demand_forecast ADD COLUMN IF NOT EXISTS gpu_hours_p90_of_queue DOUBLE;
-- Session 26 (newcomer 26 P2): a total is at least each of its parts, so each of its quantiles is raised to the largest
-- of its parts' where it was below (tasks/demand/forecast.py `at_least_its_parts`): `raised_to` names those parts (the
-- queues of the site's total; the GPU types of a queue's), null where nothing was raised (and on older runs' rows)
ALTER TABLE demand_forecast_total ADD COLUMN IF NOT EXISTS raised_to VARCHAR;
ALTER TABLE demand_forecast_queue ADD COLUMN IF NOT EXISTS raised_to VARCHAR;

CREATE OR REPLACE VIEW current_demand_forecast_queue AS
SELECT d.* FROM demand_forecast_queue d
WHERE d.demand_run_id = (SELECT demand_run_id FROM demand_runs WHERE status = 'succeeded'
                         ORDER BY started_at DESC, demand_run_id DESC LIMIT 1);

CREATE OR REPLACE VIEW current_demand_forecast_total AS
SELECT d.* FROM demand_forecast_total d
WHERE d.demand_run_id = (SELECT demand_run_id FROM demand_runs WHERE status = 'succeeded'
                         ORDER BY started_at DESC, demand_run_id DESC LIMIT 1);

CREATE OR REPLACE VIEW current_demand_forecast AS
SELECT d.* FROM demand_forecast d
WHERE d.demand_run_id = (SELECT demand_run_id FROM demand_runs WHERE status = 'succeeded'
                         ORDER BY started_at DESC, demand_run_id DESC LIMIT 1);

-- Rolling-origin backtest of the demand forecast (tasks/demand/backtest.py), written with each demand
-- run: per origin (a night in the past, from which the forecast is made on the days up to it only),
-- horizon and series, the forecast, what happened, seasonal naive's forecast and the MASE scale.
CREATE TABLE IF NOT EXISTS demand_backtest (
    demand_run_id VARCHAR NOT NULL,
    origin DATE NOT NULL,              -- the last day the origin's forecast saw
    horizon INTEGER NOT NULL,
    day DATE NOT NULL,                 -- origin + horizon
    queue VARCHAR NOT NULL,
    gpu_type VARCHAR NOT NULL,
    method VARCHAR NOT NULL,           -- the model the origin's forecast chose for the series
    actual DOUBLE NOT NULL,            -- GPU-hours submitted that day (demand_daily)
    gpu_hours_p10 DOUBLE NOT NULL,
    gpu_hours_p50 DOUBLE NOT NULL,
    gpu_hours_p90 DOUBLE NOT NULL,
    seasonal_naive DOUBLE,             -- the same weekday of the origin's last week
    mase_scale DOUBLE,                 -- mean |y(t) - y(t-7)| over the days up to the origin; null when 0 or unknown
    PRIMARY KEY (demand_run_id, origin, horizon, queue, gpu_type)
);
-- the same for jobs submitted that day (null on rows of runs before these columns)
ALTER TABLE demand_backtest ADD COLUMN IF NOT EXISTS jobs_method VARCHAR;
ALTER TABLE demand_backtest ADD COLUMN IF NOT EXISTS actual_jobs DOUBLE;
ALTER TABLE demand_backtest ADD COLUMN IF NOT EXISTS jobs_p10 DOUBLE;
ALTER TABLE demand_backtest ADD COLUMN IF NOT EXISTS jobs_p50 DOUBLE;
ALTER TABLE demand_backtest ADD COLUMN IF NOT EXISTS jobs_p90 DOUBLE;
ALTER TABLE demand_backtest ADD COLUMN IF NOT EXISTS jobs_seasonal_naive DOUBLE;
ALTER TABLE demand_backtest ADD COLUMN IF NOT EXISTS jobs_mase_scale DOUBLE;

-- The latest successful demand run's backtest, per horizon and series, per horizon over all series
-- (queue and gpu_type null), and over everything (horizon null too):
--   mase:                mean |P50 - actual| / scale (MASE, scaled by in-sample seasonal naive)
--   mase_seasonal_naive: the same for seasonal naive's forecast (the baseline: about 1 on a steady series)
--   relative_mae:        sum |P50 - actual| / sum |seasonal naive - actual| over the days that have a seasonal naive
--                        forecast (below 1: better than the baseline; tasks/demand/backtest.py's and the night log's
--                        figure. Until session 26 the numerator also summed the days without one, a series' first
--                        season: the demo read 1.47 where the log said 0.90)
--   coverage:            share of days whose actual fell within P10-P90 (80% is calibrated)
-- and the same four for jobs submitted (jobs_mase, jobs_mase_seasonal_naive, jobs_relative_mae, jobs_coverage),
-- whose model (jobs_method) is chosen on its own
CREATE OR REPLACE VIEW demand_backtest_summary AS
SELECT b.demand_run_id, b.horizon, b.queue, b.gpu_type, count(*) AS days, count(DISTINCT b.origin) AS origins,
       mode(b.method) AS method,
       avg(abs(b.gpu_hours_p50 - b.actual) / b.mase_scale) AS mase,
       avg(abs(b.seasonal_naive - b.actual) / b.mase_scale) AS mase_seasonal_naive,
       sum(abs(b.gpu_hours_p50 - b.actual)) FILTER (WHERE b.seasonal_naive IS NOT NULL)
           / nullif(sum(abs(b.seasonal_naive - b.actual)), 0) AS relative_mae,
       avg(CAST(b.actual BETWEEN b.gpu_hours_p10 AND b.gpu_hours_p90 AS DOUBLE)) AS coverage,
       mode(b.jobs_method) AS jobs_method,
       avg(abs(b.jobs_p50 - b.actual_jobs) / b.jobs_mase_scale) AS jobs_mase,
       avg(abs(b.jobs_seasonal_naive - b.actual_jobs) / b.jobs_mase_scale) AS jobs_mase_seasonal_naive,
       sum(abs(b.jobs_p50 - b.actual_jobs)) FILTER (WHERE b.jobs_seasonal_naive IS NOT NULL)
           / nullif(sum(abs(b.jobs_seasonal_naive - b.actual_jobs)), 0) AS jobs_relative_mae,
       avg(CAST(b.actual_jobs BETWEEN b.jobs_p10 AND b.jobs_p90 AS DOUBLE)) AS jobs_coverage
FROM demand_backtest b
WHERE b.demand_run_id = (SELECT demand_run_id FROM demand_runs WHERE status = 'succeeded'
                         ORDER BY started_at DESC, demand_run_id DESC LIMIT 1)
GROUP BY GROUPING SETS ((b.demand_run_id, b.horizon, b.queue, b.gpu_type), (b.demand_run_id, b.horizon), (b.demand_run_id));

-- Issue 53 item 3: the backtest of the site's total series (demand_backtest's columns but queue and GPU type),
-- and its summary over all origins and horizons, as demand_backtest_summary's over everything.
CREATE TABLE IF NOT EXISTS demand_backtest_total (
    demand_run_id VARCHAR NOT NULL,
    origin DATE NOT NULL,
    horizon INTEGER NOT NULL,
    day DATE NOT NULL,
    method VARCHAR NOT NULL,
    actual DOUBLE NOT NULL,
    gpu_hours_p10 DOUBLE NOT NULL,
    gpu_hours_p50 DOUBLE NOT NULL,
    gpu_hours_p90 DOUBLE NOT NULL,
    seasonal_naive DOUBLE,
    mase_scale DOUBLE,
    jobs_method VARCHAR,
    actual_jobs DOUBLE,
    jobs_p10 DOUBLE,
    jobs_p50 DOUBLE,
    jobs_p90 DOUBLE,
    jobs_seasonal_naive DOUBLE,
    jobs_mase_scale DOUBLE,
    PRIMARY KEY (demand_run_id, origin, horizon)
);

CREATE OR REPLACE VIEW demand_backtest_total_summary AS
SELECT b.demand_run_id, count(*) AS days, count(DISTINCT b.origin) AS origins,
       sum(abs(b.gpu_hours_p50 - b.actual)) FILTER (WHERE b.seasonal_naive IS NOT NULL)
           / nullif(sum(abs(b.seasonal_naive - b.actual)), 0) AS relative_mae,
       avg(CAST(b.actual BETWEEN b.gpu_hours_p10 AND b.gpu_hours_p90 AS DOUBLE)) AS coverage,
       median(b.gpu_hours_p90 / nullif(b.gpu_hours_p50, 0)) AS p90_over_p50,
       sum(abs(b.jobs_p50 - b.actual_jobs)) FILTER (WHERE b.jobs_seasonal_naive IS NOT NULL)
           / nullif(sum(abs(b.jobs_seasonal_naive - b.actual_jobs)), 0) AS jobs_relative_mae,
       avg(CAST(b.actual_jobs BETWEEN b.jobs_p10 AND b.jobs_p90 AS DOUBLE)) AS jobs_coverage
FROM demand_backtest_total b
WHERE b.demand_run_id = (SELECT demand_run_id FROM demand_runs WHERE status = 'succeeded'
                         ORDER BY started_at DESC, demand_run_id DESC LIMIT 1)
GROUP BY b.demand_run_id;

-- Every successful demand run's forecast of a day that has now happened (a day up to the latest
-- successful run's as_of), against what happened (demand_daily; 0 on a day the series had no jobs).
-- Recent days' actual GPU-hours still count pending and running jobs at their forecast P50.
CREATE OR REPLACE VIEW demand_forecast_vs_actual AS
WITH actual AS (
    SELECT day, queue, coalesce(gpu_type, 'unknown') AS gpu_type, sum(gpu_hours) AS gpu_hours,
           sum(jobs_submitted) AS jobs_submitted
    FROM demand_daily GROUP BY ALL
),
runs AS (SELECT demand_run_id, as_of FROM demand_runs WHERE status = 'succeeded')
SELECT f.demand_run_id, r.as_of, f.day, f.horizon, f.queue, f.gpu_type, f.method,
       f.gpu_hours_p10, f.gpu_hours_p50, f.gpu_hours_p90, coalesce(a.gpu_hours, 0.0) AS actual_gpu_hours,
       f.jobs_p50, coalesce(a.jobs_submitted, 0) AS actual_jobs, f.jobs_p10, f.jobs_p90, f.jobs_method,
       coalesce(a.gpu_hours, 0.0) BETWEEN f.gpu_hours_p10 AND f.gpu_hours_p90 AS within_band,
       abs(f.gpu_hours_p50 - coalesce(a.gpu_hours, 0.0)) AS abs_error
FROM demand_forecast f JOIN runs r USING (demand_run_id)
LEFT JOIN actual a ON a.day = f.day AND a.queue = f.queue AND a.gpu_type = f.gpu_type
WHERE f.day <= (SELECT max(as_of) FROM runs);
