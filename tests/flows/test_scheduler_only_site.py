"""A site that starts from its scheduler's accounting (issue 38): a plain `sacct --parsable2` export, no Comment,
no mapping, through `gpucast import slurm` and real nights, to the demand forecast, the plan, the backtest and the page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import pytest

from gpucast.expectations import contract as c
from gpucast.flows.cli import main
from gpucast.tasks.learn.history import BURST_REASON, MEDIAN, MODEL
from tests.conftest import write
from tests.data.make_sacct_sample import HEADER, lines

QUICK = ["--models", "lightgbm", "--repeats", "1", "--min-labelled", "20"]


def rows(path, sql: str, params=None) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def finished_now(pending: list[str], now: datetime) -> str:
    """The same jobs as a later export shows them: started after tonight's forecasts, finished within the hour."""
    out = [HEADER]
    for line in pending:
        f = line.split("|")
        start, end = now + timedelta(minutes=5), now + timedelta(minutes=50)
        f[5], f[8], f[9], f[10] = "COMPLETED", start.strftime("%Y-%m-%dT%H:%M:%S"), end.strftime("%Y-%m-%dT%H:%M:%S"), "00:45:00"
        f[12] = f[13]  # allocated what it asked for
        out.append("|".join(f))
    return "\n".join(out) + "\n"


def sweep_line(job: str, state: str, submit: datetime) -> str:
    """A sweep's job on one A100 (its name's digits stripped, the burst key): RUNNING since 10 minutes after its
    submission (no end yet), or PENDING; a week's time limit."""
    tres = "billing=4,cpu=8,gres/gpu:a100=1,gres/gpu=1,mem=32G,node=1"
    at = lambda t: t.strftime("%Y-%m-%dT%H:%M:%S")  # noqa: E731
    times = [at(submit + timedelta(minutes=10)), "Unknown", "00:00:00"] if state == "RUNNING" else ["Unknown", "Unknown", "00:00:00"]
    return "|".join([job, f"sweep_lr_{job[-2:]}", "gpu-a100", "nlp", "u1", state, "0:0", at(submit), *times,
                     "7-00:00:00", tres if state == "RUNNING" else "", tres, ""])


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_sacct_only_site_gets_forecasts_a_demand_forecast_a_plan_and_a_page(home, tmp_path, capsys):
    now = datetime.now(UTC).replace(tzinfo=None)
    start = (now - timedelta(days=15)).replace(hour=0, minute=0, second=0, microsecond=0)
    # the export's last day holds its pending jobs, and a weekend day gets 0.4x the arrivals: on a Sunday the last day
    # (a Saturday) had one job, and the `>= 3` below failed on the calendar (2026-11-29): it ends on a weekday
    start -= timedelta(days=max(0, (start + timedelta(days=14)).weekday() - 4))
    text = lines(days=15, jobs_per_day=8, seed=7, start=start)
    assert "Comment" not in text[0] and "Timelimit" in text[0]
    # issue 53 item 2: a sweep's first job RUNNING for the export's last 30 minutes (submitted 10 minutes before it
    # started; the export's latest time is the warehouse's clock), its second PENDING, submitted 20 minutes after it
    clock = max(datetime.fromisoformat(t) for ln in text[1:] if "." not in (f := ln.split("|"))[0]
                for t in (f[7], f[9]) if t != "Unknown")
    text += [sweep_line("190001", "RUNNING", clock - timedelta(minutes=40)),
             sweep_line("190002", "PENDING", clock - timedelta(minutes=20))]
    sacct = write(tmp_path / "sacct.txt", "\n".join(text) + "\n")
    jobs = [ln for ln in text[1:] if "." not in ln.split("|")[0]]
    pending = [ln for ln in jobs if "|PENDING|" in ln]
    assert len(pending) >= 3

    assert main(["import", "slurm", str(sacct)]) == 0
    out = capsys.readouterr().out
    assert f"{len(jobs)} rows read: {len(jobs)} loaded, 0 rejected, 0 duplicate" in out  # none quarantined
    assert main(["nightly", *QUICK]) == 0
    db = home / "published.duckdb"

    # every job loaded as `unknown`, with its time limit and name
    assert rows(db, "SELECT count(*), count(*) FILTER (WHERE model_type = ?), count(time_limit_hours), count(job_name) "
                    "FROM job_logs", [c.UNKNOWN_MODEL_TYPE]) == [(len(jobs),) * 4]
    # no champion learned from jobs without features; every pending job still has a memory and a run-time forecast,
    # from the scheduler's history, flagged with its reason; the run time never above the time limit
    assert rows(db, "SELECT count(*) FROM current_champions") == [(0,)]
    got = rows(db, "SELECT f.target, count(*), bool_and(f.model IN (?, ?)), bool_and(f.ood), "
                   "bool_and(f.ood_reason LIKE 'model features unknown -> scheduler history%'), "
                   "bool_and(f.p10 <= f.p50 AND f.p50 <= f.p90 AND f.p10 > 0), "
                   "bool_and(f.target <> 'runtime_hours' OR f.p90 <= j.time_limit_hours + 1e-9) "
                   "FROM pending_forecasts f JOIN job_logs j USING (job_id) GROUP BY 1 ORDER BY 1", [MODEL, MEDIAN])
    assert got == [(c.PEAK_GPU_MEM_GB, len(pending), True, True, True, True, True),
                   (c.RUNTIME_HOURS, len(pending), True, True, True, True, True)]  # compute: nothing measured it
    # the pending sweep job's run time moved toward its running sibling (staged RUNNING, its hours so far a lower
    # bound: `training.read_running`); the nightly before staged finished jobs only and found no sibling
    (reason,), = rows(db, "SELECT ood_reason FROM pending_forecasts WHERE job_id = 'slurm-local-190002' AND target = ?",
                      [c.RUNTIME_HOURS])
    assert reason.endswith(BURST_REASON.format(n=1))
    # the demand history counts the running job by the survival-aware figure (its hours run and more: job_demand's
    # hours_expected at the warehouse's clock), on its submission day, in the series the demand forecast reads. (A job
    # first seen running that has run longer than all but 9 finished runs of its queue is unknown, tests/warehouse:
    # here 30 minutes, shorter than most)
    (expected, ran, forecast), = rows(
        db, "SELECT j.hours_expected, epoch((SELECT greatest(max(submitted_at), max(updated_at)) FROM job_logs) - "
            "j.started_at) / 3600, d.gpu_hours_forecast FROM job_demand j JOIN demand_daily d "
            "ON d.day = CAST(j.submitted_at AS DATE) AND d.queue = j.queue WHERE j.job_id = 'slurm-local-190001'")
    assert expected >= 2 * ran and ran == pytest.approx(0.5) and forecast >= expected  # 1 GPU (+ the pending one's P50)
    # the demand history counts them (GPU-hours from their run time), the demand forecast is made from it
    assert rows(db, "SELECT sum(jobs_submitted) FROM demand_daily") == [(len(jobs),)]
    assert rows(db, "SELECT sum(gpu_hours_known) > 0 FROM job_demand") == [(True,)]
    assert rows(db, "SELECT count(*) > 0, sum(gpu_hours_p50) > 0 FROM current_demand_forecast") == [(True, True)]
    # the plan sizes every pending job by its forecast (none planned as unknown size): packed, or listed as larger
    # than every GPU. Which of the two depends on the hour the test runs: ~70 labelled jobs are too few to calibrate
    # the interval (P90 = P50 x 4), and after midnight UTC (2026-11-27, 00:2x) the safe requests of all three were
    # above the default 80 GB GPU, on the tree before this change too; at 23:xx they were packed. What in the data
    # moves with the hour was not pinned down (an export at a fixed offset from now, not from midnight, failed too).
    (planned, unknown, unplaceable), = rows(db, "SELECT jobs, unknown_size_jobs, unplaceable_jobs FROM plan_runs "
                                                "WHERE status = 'succeeded'")
    assert (planned + unplaceable, unknown) == (len(pending), 0)
    assert rows(db, "SELECT count(*) FROM current_capacity_plan")[0][0] >= 1
    page = (home / "site" / "index.html").read_text()
    queues = {ln.split("|")[2] for ln in pending}
    assert all(q in page for q in queues)
    assert f"{len(pending)} pending job(s) without model features" in page

    # the next export: those jobs ran and finished; the next night's backtest measures their forecasts
    write(tmp_path / "later.txt", finished_now(pending, datetime.now(UTC).replace(tzinfo=None)))
    assert main(["import", "slurm", str(tmp_path / "later.txt")]) == 0
    assert main(["nightly", "--no-train"]) == 0
    back = rows(db, "SELECT target, count(*), bool_and(model IN (?, ?)), count(ape) FROM forecast_backtest "
                    "WHERE job_id IN (SELECT unnest(?)) GROUP BY 1 ORDER BY 1",
                [MODEL, MEDIAN, [f"slurm-local-{ln.split('|')[0]}" for ln in pending]])
    assert back == [(c.RUNTIME_HOURS, len(pending), True, len(pending))]  # memory: the later export has no gpumem
