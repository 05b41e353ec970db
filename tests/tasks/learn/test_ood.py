"""The out-of-distribution fallback chosen by evidence: held-out families decide which estimate and how wide."""

from __future__ import annotations

from datetime import date

import numpy as np
import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.flows.runners import cores_here
from gpucast.records.outcomes import Champion
from gpucast.tasks.learn import features, ood
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.learn.score import Scorer
from gpucast.tasks.simulate import simulate_jobs
from tests.train_steps import train_target

THREADS = cores_here()  # OMP_NUM_THREADS where set (a test worker's share of the cores), else every core


def _history(seed: int = 0, families: int = 4, per_family: int = 60):
    """Jobs of `families` families, each on its own range of sizes x (family k: x in [10^k, 10^(k+1)]),
    whose actual value is 2x with a little noise."""
    rng = np.random.default_rng(seed)
    fam = np.repeat([f"F{k}" for k in range(families)], per_family)
    x = 10 ** (np.repeat(np.arange(families), per_family) + rng.uniform(0, 1, families * per_family))
    return fam, x, 2 * x * np.exp(rng.normal(0, 0.05, len(x)))


def _flat_model(x: np.ndarray, y: np.ndarray):
    """A model that is right inside its training range and flat outside it, as trees are."""
    def fit_predict(train, test):
        lo, hi = x[train].min(), x[train].max()
        return 2 * np.clip(x[test], lo, hi), None
    return fit_predict


def test_an_exact_prior_beats_a_model_that_goes_flat_outside_its_range():
    fam, x, y = _history()

    def fit_predict(train, test):
        return _flat_model(x, y)(train, test)[0], 2 * x[test]  # the prior: the exact formula
    evidence = ood.held_out_best(fam, y, fit_predict, "flat")
    assert evidence.estimate == "prior"
    assert evidence.candidates["prior"].mape < evidence.candidates["blend"].mape < evidence.candidates["model"].mape
    assert set(evidence.families) == {"F0", "F1", "F2", "F3"} and evidence.held_out_rows == len(y)


def test_a_model_that_extrapolates_beats_a_prior_that_is_off():
    fam, x, y = _history()

    def fit_predict(train, test):
        return 2 * x[test], 2 * x[test] * 5  # the model is right everywhere; the prior 5x too high
    evidence = ood.held_out_best(fam, y, fit_predict, "exact")
    assert evidence.estimate == "model"
    assert evidence.candidates["prior"].mape == pytest.approx(400, rel=0.05)


def test_without_a_prior_the_model_is_the_only_candidate_and_still_gets_a_measured_interval():
    fam, x, y = _history()
    evidence = ood.held_out_best(fam, y, _flat_model(x, y), "flat")
    assert evidence.estimate == "model" and set(evidence.candidates) == {"model"}
    assert evidence.interval_factor > 2  # a flat model is far off on the extreme families


def test_the_interval_covers_about_its_quantile_of_the_held_out_jobs():
    rng = np.random.default_rng(3)
    fam, x, _ = _history(per_family=500)
    y = 2 * x * np.exp(rng.normal(0, 0.3, len(x)))  # the prior is right in the median, 30% log noise

    def fit_predict(train, test):
        return 2 * x[test] * 3, 2 * x[test]
    evidence = ood.held_out_best(fam, y, fit_predict, "off")
    assert evidence.estimate == "prior"
    assert evidence.interval_factor == pytest.approx(np.exp(1.645 * 0.3), rel=0.06)  # |N(0, 0.3)|'s 90%
    p10, p50, p90 = ood.estimate(evidence, 2 * x * 3, 2 * x)
    assert np.mean((y >= p10) & (y <= p90)) == pytest.approx(ood.INTERVAL_QUANTILE, abs=0.01)
    assert np.allclose(p50, 2 * x)


@pytest.mark.parametrize("families, per_family, why", [
    (1, 200, "one family: nothing to learn from when it is held out"),
    (3, ood.MIN_FAMILY_ROWS - 1, "every family below the minimum: its error would be noise"),
])
def test_no_evidence_without_two_families_of_enough_rows(families, per_family, why):
    fam, x, y = _history(families=families, per_family=per_family)
    assert ood.held_out_best(fam, y, _flat_model(x, y), "flat") is None, why


def test_a_missing_family_is_never_held_out():
    fam, x, y = _history(families=3)
    fam = fam.astype(object)
    fam[:60] = None
    held = []

    def fit_predict(train, test):
        held.append(len(test))
        return 2 * x[test], None
    evidence = ood.held_out_best(fam, y, fit_predict, "exact")
    assert set(evidence.families) == {"F1", "F2"} and held == [60, 60]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A decision-tree champion of peak memory on 3,000 simulated jobs of seven model families (the quickest
    to fit; a LightGBM champion's stand-in is tests/tasks/learn/test_score.py's)."""
    out = tmp_path_factory.mktemp("models")
    jobs = simulate_jobs(3000, np.random.default_rng(1), date(2026, 11, 1), 0.0)
    opts = TrainOptions(models=("decision_tree",), repeats=1, seed=0)
    return {t: train_target(jobs, t, opts, out / t, threads=THREADS) for t in (c.PEAK_GPU_MEM_GB,)}


def test_training_stores_the_evidence_and_scoring_uses_it_for_flagged_jobs(trained):
    """Jobs at 10,000 M parameters (the history's largest is 5,482 M) are out of distribution: each gets the
    held-out-best estimate with its measured interval, unless that estimate is impossible for its kind (a
    10B-parameter RNN above 2.5x the largest RNN's memory), which is capped at the bound (P50 = P90), said in the reason.
    No P90 passes the bound either: a P50 within it whose P50 x the interval factor would has its P90 at the bound."""
    import json
    from pathlib import Path

    result = trained[c.PEAK_GPU_MEM_GB]
    evidence = ood.Detector.from_json(json.loads((Path(result.model_dir) / "metadata.json").read_text())["ood"]).fallback
    assert evidence.estimate in ood.CANDIDATES and evidence.learner == "decision_tree"
    assert len(evidence.families) >= 2 and evidence.interval_factor > 1
    champ = Champion(c.PEAK_GPU_MEM_GB, result.champion, "train-test", result.model_dir)
    rows = simulate_jobs(40, np.random.default_rng(5), date(2026, 11, 2), 0.0)
    rows = rows.with_columns(pl.lit(1e4).alias(c.PARAMS_MILLION))  # every job above the training range
    scorer = Scorer(champ)
    f = scorer.score(rows)
    bound = ood.ceiling(features.build(rows), c.PEAK_GPU_MEM_GB, scorer.detector.ceiling)[0]
    assert f["ood"].all()
    label = {"model": result.champion, "prior": "prior"}.get(evidence.estimate, f"{result.champion}+prior")
    assert all(f"-> held-out-best: {label} (x/÷ {evidence.interval_factor:.2f})" in r  # the `model` column's name
               for r in f["ood_reason"])
    capped = f["ood_reason"].str.contains("impossible: ").to_numpy()
    assert 0 < capped.sum() < f.height, "some jobs keep the held-out estimate, some are capped"
    # an impossible P50 is capped, or replaced by the next estimate within the bound, named as the `model` column names
    # it (review 76 S3-4: the internal words `model` / `blend` were printed)
    for reason, model in f.filter(pl.Series(capped)).select("ood_reason", "model").iter_rows():
        assert "-> capped at " in reason or f"-> {model} within it (" in reason, reason
        assert model in (result.champion, "prior", f"{result.champion}+prior"), model
    p50, p90 = f["p50"].to_numpy(), f["p90"].to_numpy()
    ratio, low = p90 / p50, (f["p50"] / f["p10"]).to_numpy()
    factor = evidence.interval_factor
    within = ~capped & (p50 * factor <= bound)  # the band as measured fits under what is possible
    clipped = ~capped & ~within  # a P50 within the bound, its P50 x factor above it
    assert within.any() and clipped.any(), "some bands fit under the bound, some would pass it"
    assert np.allclose(ratio[within], factor) and np.allclose(low[~capped], factor)
    assert np.allclose(p90[clipped], bound[clipped]) and (ratio[clipped] < factor).all()
    # a clipped band says so in its reason (newcomer 26 P6: the reason's band read x1.07 over P90 = P50); the rest do not
    said = f["ood_reason"].fill_null("").str.contains(r"; P90 [0-9.e+]+ capped at |^P90 [0-9.e+]+ capped at ").to_numpy()
    assert said[clipped].all() and not said[within].any()
    assert np.allclose(ratio[capped], 1.0) and (low[capped] >= 1.0).all()  # P50 = P90 = the cap; P10 at or under it
    assert (p90 <= bound * (1 + 1e-12)).all()


def test_a_costly_champion_is_stood_in_for_by_a_small_lightgbm_and_the_metadata_says_so():
    from gpucast.tasks.learn.evidence import STAND_IN_TREES, held_out_evidence
    from gpucast.tasks.learn.features import build, labelled_rows
    from gpucast.tasks.learn.models import registry

    rows = labelled_rows(build(simulate_jobs(700, np.random.default_rng(4), date(2026, 11, 1), 0.0)), c.PEAK_GPU_MEM_GB)
    evidence = held_out_evidence(rows, c.PEAK_GPU_MEM_GB, TrainOptions(), "xgboost", registry.Build(threads=THREADS))
    assert evidence.learner == f"lightgbm ({STAND_IN_TREES} trees, a stand-in for xgboost)"
    assert evidence.held_out_rows == sum(evidence.families.values())
    assert all(n >= ood.MIN_FAMILY_ROWS for n in evidence.families.values())


def test_without_evidence_flagged_jobs_get_the_calibrated_prior_and_the_reason_says_so(tmp_path):
    jobs = simulate_jobs(1500, np.random.default_rng(6), date(2026, 11, 1), 0.0).filter(pl.col(c.MODEL_TYPE) == "CNN")
    result = train_target(jobs, c.PEAK_GPU_MEM_GB, TrainOptions(models=("decision_tree",), repeats=1), tmp_path,
                          threads=THREADS)
    assert result.ood.fallback is None  # one family: nothing to hold out
    rows = simulate_jobs(10, np.random.default_rng(7), date(2026, 11, 2), 0.0).with_columns(pl.lit(1e8).alias(c.PARAMS_MILLION))
    f = Scorer(Champion(c.PEAK_GPU_MEM_GB, result.champion, "train-test", result.model_dir)).score(rows)
    assert f["ood"].all() and (f["model"] == "prior").all()
    assert all("-> prior (no held-out-family evidence)" in r for r in f["ood_reason"])


def test_the_detector_is_written_and_read_as_one_typed_record(trained):
    """Issue 39, item 1: `Detector.to_json` is the metadata's one writer, `Detector.from_json` its one reader;
    what training saved reads back equal to what it fitted, and the file stays plain JSON."""
    import json
    from pathlib import Path

    result = trained[c.PEAK_GPU_MEM_GB]
    saved = json.loads((Path(result.model_dir) / "metadata.json").read_text())["ood"]
    assert set(saved) == {"categories", "numbers", "ranges", "density", "gpu_types", "traced_rows", "llm_rows", "ceiling",
                          "fallback", "llm_correction"}
    assert saved["fallback"]["candidates"][saved["fallback"]["estimate"]]["mape"] > 0  # readable as before: nested dicts
    loaded = ood.Detector.from_json(saved)
    assert loaded == result.ood and isinstance(loaded.fallback, ood.Fallback) and isinstance(loaded.ceiling, ood.Ceiling)
    assert ood.Detector.from_json(json.loads(json.dumps(loaded.to_json()))) == loaded
    assert ood.Detector.from_json(None) is None and ood.Detector.from_json({}) is None  # a champion saved without one


def test_a_detector_saved_before_the_newer_fields_still_loads_and_flags(trained):
    """Metadata written before `gpu_types`, `traced_rows`, `ceiling`, `fallback` (and the fallback's `seconds`) existed
    loads with their defaults, and flags as it did: a job above the training range still is."""
    import json
    from pathlib import Path

    result = trained[c.PEAK_GPU_MEM_GB]
    saved = json.loads((Path(result.model_dir) / "metadata.json").read_text())["ood"]
    old = {k: saved[k] for k in ("categories", "numbers", "ranges", "density")}
    loaded = ood.Detector.from_json(old)
    assert (loaded.gpu_types, loaded.traced_rows, loaded.ceiling, loaded.fallback) == ((), 0, None, None)
    fallback = {k: v for k, v in saved["fallback"].items() if k not in ("seconds", "chosen_by", "learner")}
    assert ood.Fallback.from_json(fallback).interval_factor == saved["fallback"]["interval_factor"]
    jobs = simulate_jobs(20, np.random.default_rng(5), date(2026, 11, 2), 0.0).with_columns(pl.lit(1e6).alias(c.PARAMS_MILLION))
    from gpucast.tasks.learn.features import build

    flags, reasons = ood.flag(build(jobs), loaded)
    assert flags.all() and all("params_million" in r for r in reasons)


def test_a_job_with_llm_fields_the_champion_never_learned_gets_the_per_gpu_prior_itself(trained):
    """Issue 51: a champion trained on single-GPU jobs has no support for correcting a sharded LLM job's per-GPU
    prior (nor has its held-out-best fallback, learned there too): the forecast is the prior, x/÷ its factor."""
    from gpucast.tasks.learn import llm_memory

    result = trained[c.PEAK_GPU_MEM_GB]
    assert result.ood.llm_rows == 0
    rows = simulate_jobs(6, np.random.default_rng(8), date(2026, 11, 2), 0.0)
    llm = pl.Series([True, False] * 3)
    # a row of the LLM table, a size its family's rows lack (their shape, scaled), a family the table lacks
    names = pl.Series(["Llama-3.1-8B", None, "llama3_1-20b", None, "acme-lm-3b", None])
    rows = rows.with_columns(pl.when(llm).then(names).otherwise(pl.col(c.ARCH)).alias(c.ARCH),
                             pl.when(llm).then(pl.lit("fsdp")).otherwise(None).alias(c.SHARDING),
                             pl.when(llm).then(8).otherwise(pl.col(c.GPU_COUNT)).alias(c.GPU_COUNT),
                             pl.when(llm).then(None).otherwise(pl.col(c.PARAMS_MILLION)).alias(c.PARAMS_MILLION))
    f = Scorer(Champion(c.PEAK_GPU_MEM_GB, result.champion, "train-test", result.model_dir)).score(rows)
    picked = f.filter(llm)
    assert (picked["model"] == llm_memory.LLM_PRIOR).all() and picked["ood"].all()
    # the reason names what the prior read (newcomer 25 P6): a wrong match shows in the forecast's own words
    said = [r.rsplit(" -> ", 1)[1] for r in picked["ood_reason"]]
    factor = f"(x/÷ {llm_memory.P90_FACTOR:g})"
    assert said == [f"per-GPU prior of the LLM table's Llama-3.1-8B {factor}",
                    f"per-GPU prior of Llama-3.1-8B's shape scaled to 20B parameters {factor}",
                    f"per-GPU prior of a GPT-style shape for 3B parameters (no table row of its family) {factor}"]
    assert np.allclose((picked["p90"] / picked["p50"]).to_numpy(), llm_memory.P90_FACTOR)
    assert (f.filter(~llm)["model"] != llm_memory.LLM_PRIOR).all()  # the other jobs as before



def test_a_sharded_llm_job_no_gpu_holds_is_published_at_the_bound_not_at_the_champions_guess(trained):
    """Review 87 S1-1: a 70B FSDP job's per-GPU prior is 382 GB on 4 GPUs and 105 GB on 16; above the largest GPU,
    the held-out-best fallback took the champion's forecast (learned on single-GPU jobs): 21 GB on 4 GPUs and no OOM
    risk, less per GPU than on 16. It now meets the bound, flagged as needing more than any GPU holds."""
    from gpucast.tasks.learn import llm_memory

    result = trained[c.PEAK_GPU_MEM_GB]
    counts = [4, 8, 16, 64]
    rows = simulate_jobs(len(counts), np.random.default_rng(8), date(2026, 11, 2), 0.0).with_columns(
        pl.lit("Llama-3.1-70B").alias(c.ARCH), pl.lit("fsdp").alias(c.SHARDING), pl.Series(c.GPU_COUNT, counts),
        pl.lit(None, dtype=pl.Float64).alias(c.PARAMS_MILLION), pl.lit(4096).alias(c.INPUT_DIM),
        pl.lit(16).alias(c.BATCH_SIZE), pl.lit("BF16").alias(c.PRECISION))
    f = Scorer(Champion(c.PEAK_GPU_MEM_GB, result.champion, "train-test", result.model_dir)).score(rows)
    gb = ood.largest_gpu_gb()[1]
    p50 = f["p50"].to_list()
    assert p50[0] == p50[1] == gb and f["p90"].to_list()[:2] == [gb, gb]  # the most a GPU holds, and said
    assert all("no GPU holds the job's per-GPU need" in r for r in f["ood_reason"].to_list()[:2])
    assert (f["model"] == llm_memory.LLM_PRIOR).all()
    assert p50 == sorted(p50, reverse=True) and p50[-1] < gb  # fewer GPUs, never less memory on each

def test_the_champions_large_jobs_are_calibrated_on_its_slice_where_it_has_enough_of_them(trained):
    """Issue 50 item 5: training hands the champion's out-of-fold forecasts to its calibration (`size_oof` is said),
    but a calibration slice with its own group at the history's 90th percentile (this 3,000-job night's) keeps it: the
    out-of-fold group stands in only where the slice has too few large jobs (tests/tasks/learn/test_intervals.py)."""
    import json
    from pathlib import Path

    from gpucast.tasks.learn.intervals import SIZE_OOF, Calibrated

    result = trained[c.PEAK_GPU_MEM_GB]
    cal = json.loads((Path(result.model_dir) / "metadata.json").read_text())["calibration"][result.champion]
    assert cal["size"]["quantile"] == 0.9 and cal["size"]["n"] >= 10
    assert SIZE_OOF in cal and cal[SIZE_OOF] is None
    assert len(Calibrated(cal).large) == 1


def test_the_llm_correction_is_judged_on_folds_by_configuration_with_a_cheap_learner(monkeypatch):
    """Review 56 (B1-B3): `llm_evidence` forecasts every LLM job once, from a fit without any job of its configuration
    (a twin at another sequence length would flatter the correction), with a stand-in for a costly champion; one
    configuration alone gives no evidence (nothing to hold out)."""
    from gpucast.tasks.learn import evidence as ev
    from gpucast.tasks.learn.features import build, labelled_rows
    from gpucast.tasks.learn.models import registry

    rows = labelled_rows(build(simulate_jobs(300, np.random.default_rng(4), date(2026, 11, 1), 0.0)), c.PEAK_GPU_MEM_GB)
    llm = np.arange(rows.height) < 40
    arch = [f"arch{i % 5}" if m else None for i, m in enumerate(llm)]  # 5 configurations of 8 runs each
    rows = rows.with_columns(pl.Series(ev.ood.LLM_MEM_GB, np.where(llm, rows[c.PEAK_GPU_MEM_GB].to_numpy(), np.nan))
                             .fill_nan(None), pl.Series(c.ARCH, arch, dtype=pl.String),
                             pl.when(pl.Series(llm)).then(1).otherwise(pl.col(c.GPU_COUNT)).alias(c.GPU_COUNT))
    seen: dict = {}
    fits: list[set] = []
    real_champion = ev.unfitted.champion

    def recording(*args, **kwargs):
        est = real_champion(*args, **kwargs)
        fit = est.fit

        def fit_and_note(X, y):
            fits.append(len(y))
            return fit(X, y)
        est.fit = fit_and_note
        return est

    monkeypatch.setattr(ev.unfitted, "champion", recording)
    judge = ev.ood.llm_correction
    monkeypatch.setattr(ev.ood, "llm_correction", lambda rows, y, forecasts: seen.update(forecasts) or judge(rows, y, forecasts))
    said: list[str] = []
    ev.llm_evidence(rows, c.PEAK_GPU_MEM_GB, TrainOptions(), "catboost", registry.Build(threads=THREADS, progress=said.append))
    assert sorted(i for _, i in seen) == list(range(40))  # every LLM job once, no other job
    assert fits == [rows.height - 8] * 5  # each fit leaves out one whole configuration (8 runs), nothing else
    configuration = ev.llm_configuration(rows[:40])
    assert len(set(configuration)) == 5 and configuration[0] == configuration[5]
    one = rows.with_columns(pl.when(pl.col(c.ARCH).is_not_null()).then(pl.lit("arch0")).alias(c.ARCH))
    assert ev.llm_evidence(one, c.PEAK_GPU_MEM_GB, TrainOptions(), "catboost", registry.Build(threads=THREADS)) is None
    assert fits == [rows.height - 8] * 5  # (no fit for one configuration)
    assert "in 5 folds by configuration, learned by lightgbm (100 trees, a stand-in for catboost)" in said[0], said


def test_a_detector_saved_before_the_sign_test_still_loads_with_the_decision_it_saved():
    """Review 56 (M1): b748d04 saved the LLM groups without `closer` / `p_value`; the Scorer read them with KeyError."""
    group = {"rows": 30, "model_mape": 10.0, "prior_mape": 12.0, "keep": True}
    detector = ood.Detector.from_json({"numbers": [], "llm_correction": {"pooled": group, "by_group": {"lora on one GPU": group}}})
    assert detector.llm_correction.pooled.keep and detector.llm_correction.by_group["lora on one GPU"].keep
    assert detector.llm_correction.pooled.p_value == 1.0 and detector.llm_correction.pooled.closer == 0


def test_a_job_with_llm_fields_and_no_size_is_flagged_and_keeps_the_champions_forecast(trained):
    """Check 7 (session 15, champ50f: GLM-4.5-Air logged without a parameter count, forecast at 3-7 GB, measured 75 GB,
    unflagged; the table has GLM-4.5-Air since session 16, so a model it still lacks, DeepSeek-V3, stands in): a job
    with LLM fields whose `arch` the LLM table does not know and that logs no `params_million` has no per-GPU prior;
    it is flagged with words naming what is missing, and its forecast stays the champion's (the held-out-best
    fallback would lean on the analytic prior that read it as a small model). A known LLM is not."""
    from gpucast.tasks.learn import llm_memory

    result = trained[c.PEAK_GPU_MEM_GB]
    rows = simulate_jobs(4, np.random.default_rng(8), date(2026, 11, 2), 0.0)
    unsized = pl.Series([True, False, True, False])
    rows = rows.with_columns(
        pl.when(unsized).then(pl.lit("DeepSeek-V3 (MoE)")).otherwise(pl.lit("Llama-3.1-8B")).alias(c.ARCH),
        pl.when(unsized).then(None).otherwise(pl.col(c.PARAMS_MILLION)).alias(c.PARAMS_MILLION),
        pl.lit("lora").alias(c.ADAPTER), pl.lit(4).alias(c.GPU_COUNT))
    champion = Champion(c.PEAK_GPU_MEM_GB, result.champion, "train-test", result.model_dir)
    f = Scorer(champion).score(rows)
    picked = f.filter(unsized)
    assert picked["ood"].all()
    assert all("an LLM layout of unknown size: arch 'DeepSeek-V3 (MoE)' is not in the LLM table" in r
               and r.endswith(f"-> {result.champion}'s forecast kept") for r in picked["ood_reason"])
    assert (picked["model"] == result.champion).all()
    assert not any("unknown size" in (r or "") for r in f.filter(~unsized)["ood_reason"])
    from gpucast.tasks.learn.features import build

    built = build(rows)
    assert built[llm_memory.LLM_MEM_GB].is_null().to_list() == unsized.to_list()
    _, reasons = ood.flag(built, ood.Detector(categories={}, numbers=(), ranges={}))
    assert ["unknown size" in (r or "") for r in reasons] == [True, False, True, False]
