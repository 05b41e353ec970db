"""What the nightly report says of the backtest's champion and of the out-of-distribution forecasts (newcomer 27)."""

from __future__ import annotations

from datetime import UTC, datetime

from gpucast.records.results import BacktestResult, ChampionCoverage, NightResult, ScoreResult
from gpucast.tasks.report.render import nightly_report


def test_the_backtest_names_the_run_whose_forecasts_it_judged():
    """P5: a night re-run after its training judged the champion in place before that training, and said only
    "champion blend", read as the model scoring tonight; the line now names the train run it judged."""
    coverage = ChampionCoverage(target="peak_gpu_mem_gb", model="blend", train_run_id="train-old", jobs=40,
                                p90_coverage=0.9, p10_p90_coverage=0.75, mape=19.4)
    back = BacktestResult(window_start=datetime(2026, 10, 24, tzinfo=UTC), jobs=50, forecast=40, not_forecast=10,
                          champions=(coverage,))
    report = nightly_report(NightResult(backtest=back), None)
    assert ("- peak_gpu_mem_gb: blend (train run `train-old`), on the 40 jobs it forecast: P90 covered 90% and "
            "[P10, P90] 75%; MAPE 19.4%") in report


def test_the_out_of_distribution_count_does_not_name_one_estimate():
    """P6: the count said every such job got "the estimate that measured best on held-out families", where traced
    priors and caps are among them; each forecast's reason says which it got."""
    score = ScoreResult(score_run_id="score-1", pending_jobs=5, forecasts=15, scored_on="this process", ood_forecasts=11)
    report = nightly_report(NightResult(score=score), None)
    assert "11 out of distribution (each one's `ood_reason` says why and which estimate it got)" in report
    assert "measured best on held-out families" not in report
