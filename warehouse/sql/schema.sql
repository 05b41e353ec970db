-- gpucast warehouse, schema v1. Applied on every writer connection; every statement is idempotent.
-- Column lists of the contract tables mirror tasks/contract.py (tests/test_warehouse.py checks it).
SET TimeZone = 'UTC';

-- Every distinct record version ever loaded (history); the Parquet lake mirrors this table.
CREATE TABLE IF NOT EXISTS job_log_records (
    job_id VARCHAR NOT NULL,
    submitted_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ,
    status VARCHAR NOT NULL,
    queue VARCHAR,
    team VARCHAR,
    model_type VARCHAR NOT NULL,
    params_million DOUBLE,
    batch_size BIGINT,
    input_dim BIGINT,
    num_layers BIGINT,
    iterations DOUBLE,
    precision VARCHAR,
    optimizer VARCHAR,
    learning_rate DOUBLE,
    regularization BOOLEAN,
    data_augmentation BOOLEAN,
    gpu_demand_gflops DOUBLE,
    peak_gpu_mem_gb DOUBLE,
    runtime_hours DOUBLE,
    failure_reason VARCHAR,
    record_hash VARCHAR NOT NULL,      -- md5 of the contract columns: identical records share it
    arrival BIGINT NOT NULL,           -- global arrival order (ties on updated_at are broken by it)
    source_file VARCHAR NOT NULL,
    source_row BIGINT NOT NULL,        -- line (JSONL, CSV) or row (Parquet) in source_file
    ingest_run_id VARCHAR NOT NULL,
    loaded_at TIMESTAMPTZ NOT NULL
);

-- One row per job: its latest record by updated_at (else submitted_at), then by arrival.
CREATE TABLE IF NOT EXISTS job_logs (
    job_id VARCHAR NOT NULL,
    submitted_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ,
    status VARCHAR NOT NULL,
    queue VARCHAR,
    team VARCHAR,
    model_type VARCHAR NOT NULL,
    params_million DOUBLE,
    batch_size BIGINT,
    input_dim BIGINT,
    num_layers BIGINT,
    iterations DOUBLE,
    precision VARCHAR,
    optimizer VARCHAR,
    learning_rate DOUBLE,
    regularization BOOLEAN,
    data_augmentation BOOLEAN,
    gpu_demand_gflops DOUBLE,
    peak_gpu_mem_gb DOUBLE,
    runtime_hours DOUBLE,
    failure_reason VARCHAR,
    record_hash VARCHAR NOT NULL,
    arrival BIGINT NOT NULL,
    source_file VARCHAR NOT NULL,
    source_row BIGINT NOT NULL,
    ingest_run_id VARCHAR NOT NULL,
    loaded_at TIMESTAMPTZ NOT NULL
);

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
    status VARCHAR NOT NULL,           -- loaded | rejected (whole file) | empty
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
    status VARCHAR NOT NULL,           -- running | succeeded | failed
    message VARCHAR
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
    message VARCHAR
);

CREATE TABLE IF NOT EXISTS model_metrics (
    train_run_id VARCHAR NOT NULL,
    target VARCHAR NOT NULL,
    model VARCHAR NOT NULL,
    preset VARCHAR,                    -- the Transformer-BiGRU preset; null for baselines
    repeat BIGINT NOT NULL,
    seed BIGINT NOT NULL,
    split VARCHAR NOT NULL,            -- validation (chooses the champion) | test (reported)
    mse DOUBLE, rmse DOUBLE, mae DOUBLE, mape DOUBLE, r2 DOUBLE,
    rows_train BIGINT NOT NULL,
    rows_test BIGINT NOT NULL,         -- rows of the evaluated split
    train_seconds DOUBLE NOT NULL,
    device VARCHAR NOT NULL
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
