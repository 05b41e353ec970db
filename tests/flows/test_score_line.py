"""The line `gpucast score` ends with (flows/cli/pipeline.py `_score`)."""

from __future__ import annotations

import pytest

from gpucast.flows.cli import main
from gpucast.records.results import ScoreResult


@pytest.mark.parametrize("champions, says", [
    ({}, "(no champion yet: jobs without model features are forecast from the scheduler's history; run `gpucast "
         "train` (or `gpucast nightly`) to forecast jobs with model features)"),
    ({"runtime_hours": "lightgbm"}, "(runtime_hours: lightgbm)"),
])
def test_the_score_line_says_which_champions_or_that_there_is_none(home, monkeypatch, capsys, champions, says):
    """Issue 48 item 11: with no champion (only jobs without model features pending) the line ended in "()"."""
    import gpucast.flows.cli.pipeline as pipeline
    import gpucast.flows.score as score
    import gpucast.tasks.learn.score as learn_score

    result = ScoreResult(score_run_id="score-1", pending_jobs=1, forecasts=3, scored_on="this process",
                         ood_forecasts=0, featureless_jobs=1, champions=champions)
    monkeypatch.setattr(pipeline, "_require_ml", lambda: None)
    monkeypatch.setattr(learn_score, "warm_up", lambda **_: None)
    monkeypatch.setattr(score, "score_pending", lambda **_: result)
    assert main(["score"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"score run score-1: 3 forecasts for 1 pending jobs {says}"
