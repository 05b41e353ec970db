"""`sacct --parsable2` output as contract rows: fixtures written as Slurm prints them, checked field by field."""

from __future__ import annotations

import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.sources.mapping import load_mapping
from gpucast.tasks.sources.slurm import NotSacctOutput, parse_sacct
from tests.conftest import FIXTURES, write

SACCT = FIXTURES / "slurm" / "sacct.txt"
OTHER_ORDER = FIXTURES / "slurm" / "sacct_other_order.txt"
MIB = 2**20 / 1e9  # one MiB in the contract's (decimal) GB

SHOWN = (c.STATUS, c.FAILURE_REASON, c.SUBMITTED_AT, c.UPDATED_AT, c.RUNTIME_HOURS, c.QUEUE, c.TEAM, c.GPU_TYPE,
         c.GPU_COUNT, c.PEAK_GPU_MEM_GB)


def jobs(text: str, mapping=None) -> dict[str, dict]:
    parsed = parse_sacct(text, "sacct.txt", mapping)
    return {r[c.JOB_ID]: r for r in parsed.jobs.iter_rows(named=True)}


def shown(row: dict) -> tuple:
    out = [row[k] for k in SHOWN]
    out[4] = float(out[4]) if out[4] else None  # runtime_hours
    out[9] = float(out[9]) if out[9] else None  # peak_gpu_mem_gb
    return tuple(out)


def test_every_job_of_the_fixture_field_by_field():
    got = jobs(SACCT.read_text())
    t = "2026-11-{}".format
    assert list(got) == ["slurm-hpc1-1001", "slurm-hpc1-1002", "slurm-hpc1-1003", "slurm-hpc1-1004",
                         "slurm-hpc1-1005", "slurm-hpc1-1006", "slurm-hpc1-1007", "slurm-hpc1-1008",
                         "slurm-hpc1-1010_1", "slurm-hpc1-1010_2", "slurm-hpc1-1010_[3-4]", "slurm-hpc1-1020+0"]
    expected = {
        # steps folded: the job's own state and times, the steps' maximum gres/gpumem (40960M of 20480M, 40960M)
        "1001": ("COMPLETED", None, t("20T08:00:00"), t("20T10:05:00"), 2.0, "gpu-a100", "nlp", "a100", "2",
                 40960 * MIB),
        "1002": ("FAILED", "OOM", t("20T09:00:00"), t("20T09:31:00"), 0.5, "gpu-a100", "vision", "a100", "1",
                 81920 * MIB),
        # `CANCELLED by 1234`; no gres/gpumem on its steps: no memory, never invented; untyped gres/gpu=1
        "1003": ("CANCELLED", None, t("20T10:00:00"), t("20T10:12:00"), 10 / 60, "gpu-a100", "nlp", None, "1", None),
        # 1-00:00:12 elapsed; l4 canonicalised through the GPU catalogue; memory from the JSON Comment
        "1004": ("FAILED", "TIMEOUT", t("19T06:00:00"), t("20T06:00:12"), 24 + 12 / 3600, "gpu-l4", "vision",
                 "L4-24GB", "1", 18.5),
        "1005": ("FAILED", "NODE_FAIL", t("20T11:00:00"), t("20T11:45:30"), 0.75, "gpu-a100", "speech", "a100", "1",
                 None),
        "1006": ("FAILED", "exit code 2", t("20T12:00:00"), t("20T12:01:10"), 1 / 60, "gpu-a100", "speech", "a100",
                 "1", 1024 * MIB),
        # pending: no AllocTRES, so ReqTRES; Start/End `Unknown`: updated_at is Submit; no runtime
        "1007": ("PENDING", None, t("21T07:00:00"), t("21T07:00:00"), None, "gpu-a100", "nlp", "a100", "4", None),
        # running: updated_at is Start; its Elapsed so far is no runtime
        "1008": ("RUNNING", None, t("21T08:00:00"), t("21T08:00:05"), None, "gpu-a100", "nlp", "a100", "1", None),
        "1010_1": ("COMPLETED", None, t("20T13:00:00"), t("20T13:30:01"), 0.5, "gpu-l4", "vision", "L4-24GB", "1",
                   12288 * MIB),
        "1010_2": ("COMPLETED", None, t("20T13:00:00"), t("20T13:45:01"), 0.75, "gpu-l4", "vision", "L4-24GB", "1",
                   6144 * MIB),
        "1010_[3-4]": ("PENDING", None, t("20T13:00:00"), t("20T13:00:00"), None, "gpu-l4", "vision", "L4-24GB", "1",
                       None),
        "1020+0": ("COMPLETED", None, t("20T14:00:00"), t("20T15:00:02"), 1.0, "gpu-a100", "nlp", "a100", "1",
                   30720 * MIB),
    }
    for job, want in expected.items():
        assert shown(got[f"slurm-hpc1-{job}"]) == pytest.approx(want), job


def test_model_features_come_from_the_json_comment():
    got = jobs(SACCT.read_text())
    features = (c.MODEL_TYPE, c.PARAMS_MILLION, c.BATCH_SIZE, c.PRECISION, c.OPTIMIZER, c.LEARNING_RATE)
    pick = lambda j: tuple(got[f"slurm-hpc1-{j}"][f] for f in features)  # noqa: E731
    assert pick("1001") == ("Transformer", "110", "32", "bf16", None, None)
    assert pick("1007") == ("Transformer", "1300", "8", "bf16", "AdamW", None)
    assert pick("1010_2") == ("CNN", None, None, None, None, "0.001")
    assert pick("1005") == (None,) * 6  # no Comment: model_type missing; the normaliser makes it `unknown`


def test_what_happened_to_every_line_is_counted():
    parsed = parse_sacct(SACCT.read_text(), "sacct.txt")
    assert (parsed.lines, parsed.steps, parsed.orphan_steps) == (28, 14, 0)
    # the CPU partition's jobs (no gres/gpu): not GPU jobs, not loaded; het component +1 ran on it
    assert parsed.no_gpu == ["slurm-hpc1-1020+1", "slurm-hpc1-1030"]
    # finished without a gres/gpumem figure or a Comment one (the running 1008 has none yet, and is not counted)
    assert parsed.no_gpu_mem == ["slurm-hpc1-1003", "slurm-hpc1-1005"]


def test_another_field_order_extra_fields_and_a_mapping(tmp_path):
    m = load_mapping(write(tmp_path / "site.yaml", """\
fields:
  model_type: WCKey
  peak_gpu_mem_gb: {column: mem_mib, unit: MiB}
values:
  model_type: {tfm: Transformer, cnn: CNN}
"""))
    got = jobs(OTHER_ORDER.read_text(), m)
    assert list(got) == ["slurm-local-2001", "slurm-local-2002", "slurm-local-2003"]  # no Cluster field: `local`
    a, b, p = got.values()
    # h100_80gb canonicalised; the Comment's per-GPU 65536 MiB wins over the step's gres/gpumem (70000M, a task's
    # figure); a `|` inside the Comment shifts no field
    assert (a[c.MODEL_TYPE], a[c.GPU_TYPE], a[c.GPU_COUNT], float(a[c.PEAK_GPU_MEM_GB]), float(a[c.RUNTIME_HOURS]),
            a[c.UPDATED_AT]) == ("Transformer", "H100-80GB", "8", pytest.approx(65536 * MIB), 4.0, "2026-11-22T05:30:00")
    # no steps: the Comment's mem_mib through the mapping's unit; no ExitCode field: reason FAILED
    assert (b[c.MODEL_TYPE], b[c.STATUS], b[c.FAILURE_REASON], b[c.GPU_TYPE], b[c.GPU_COUNT],
            float(b[c.PEAK_GPU_MEM_GB])) == ("CNN", "FAILED", "FAILED", None, "2", pytest.approx(4096 * MIB))
    assert (p[c.MODEL_TYPE], p[c.STATUS], p[c.QUEUE], p[c.TEAM]) == ("rnn", "PENDING", "gpu-h100", "lm")  # unmapped: as written


def test_model_type_from_a_job_name_convention(tmp_path):
    m = load_mapping(write(tmp_path / "names.yaml", "fields:\n  model_type: JobName\n"
                                                    "values:\n  model_type: {train-bert: Transformer, train-vit: CNN}\n"))
    got = jobs(SACCT.read_text().replace('"model_type": ', '"model": '), m)  # the Comments' own model key ignored
    assert [got[f"slurm-hpc1-{j}"][c.MODEL_TYPE] for j in ("1001", "1002", "1010_1")] == ["Transformer", "CNN", "hpo"]
    assert got["slurm-hpc1-1001"][c.PARAMS_MILLION] == "110"  # the Comment's other keys still count


@pytest.mark.parametrize(("text", "says"), [
    ("job_id,submitted_at,status,model_type\na,2026-11-01,PENDING,CNN\n",
     "sacct.txt: not sacct --parsable2 output: its first line names no JobID, State, Submit (found "),
    ("", "sacct.txt: not sacct --parsable2 output: its first line names no JobID, State, Submit (found 'an empty file')"),
    ("JobID|State|Submit\n1|COMPLETED\n", "sacct.txt line 2: 2 fields where its header has 3; "),
])
def test_text_that_is_not_sacct_output_is_refused_in_one_line(text, says):
    with pytest.raises(NotSacctOutput) as err:
        parse_sacct(text, "sacct.txt")
    assert str(err.value).startswith(says) and "\n" not in str(err.value)


def test_a_step_without_its_job_line_is_counted_not_loaded():
    parsed = parse_sacct("JobID|State|Submit|AllocTRES\n9.batch|COMPLETED|2026-11-01T00:00:00|gres/gpu=1\n", "s.txt")
    assert (parsed.jobs.height, parsed.steps, parsed.orphan_steps) == (0, 1, 1)


def test_parsable_with_a_trailing_bar_and_an_unknown_state():
    got = jobs("JobID|State|Submit|AllocTRES|\n7|SPECIAL_EXIT|2026-11-01T00:00:00|gres/gpu=1|\n")
    # a state gpucast does not know is left as written: the contract quarantines it, nothing is guessed
    assert (got["slurm-local-7"][c.STATUS], got["slurm-local-7"][c.GPU_COUNT]) == ("SPECIAL_EXIT", "1")


HEAD = "JobID|State|Submit|Start|End|Elapsed|AllocTRES\n"


def test_one_job_on_four_lines_is_its_latest_record_and_the_others_are_counted():
    """Issue 38, defect 8: the last line (RUNNING) was loaded and three lines went uncounted. A requeued job: two
    attempts that ended, then the pending requeue, then the attempt running now; plus a job whose lines tie."""
    parsed = parse_sacct(HEAD + (
        "5|COMPLETED|2026-11-01T00:00:00|2026-11-01T01:00:00|2026-11-01T02:00:00|01:00:00|gres/gpu=1\n"
        "5|FAILED|2026-11-01T03:00:00|2026-11-01T04:00:00|2026-11-01T06:00:00|02:00:00|gres/gpu=1\n"
        "5|PENDING|2026-11-01T00:00:00|Unknown|Unknown|00:00:00|gres/gpu=1\n"
        "5|RUNNING|2026-11-01T00:00:00|2026-11-01T05:00:00|Unknown|00:30:00|gres/gpu=1\n"
        # the same times on every line: the later stage wins, whatever the lines' order
        "6|COMPLETED|2026-11-01T00:00:00|2026-11-01T00:00:00|2026-11-01T00:00:00|00:00:00|gres/gpu=1\n"
        "6|PENDING|2026-11-01T00:00:00|2026-11-01T00:00:00|2026-11-01T00:00:00|00:00:00|gres/gpu=1\n"
        "7|RUNNING|2026-11-01T00:00:00|2026-11-01T00:00:00|Unknown|00:00:00|\n"  # superseded, then a CPU job
        "7|COMPLETED|2026-11-01T00:00:00|2026-11-01T00:00:00|2026-11-01T00:10:00|00:10:00|\n"
        "7.batch|COMPLETED|2026-11-01T00:00:00|2026-11-01T00:00:00|2026-11-01T00:10:00|00:10:00|\n"), "s.txt")
    got = {r[c.JOB_ID]: r for r in parsed.jobs.iter_rows(named=True)}
    assert (got["slurm-local-5"][c.STATUS], got["slurm-local-5"][c.UPDATED_AT]) == ("FAILED", "2026-11-01T06:00:00")
    assert got["slurm-local-6"][c.STATUS] == "COMPLETED"
    assert (parsed.lines, parsed.jobs.height, parsed.steps, parsed.no_gpu, parsed.superseded) == (
        9, 2, 1, ["slurm-local-7"], 3 + 1 + 1)
    assert parsed.accounted() == parsed.lines  # every line read is loaded, folded, not a GPU job, or superseded


def test_the_fixtures_lines_all_accounted_for():
    parsed = parse_sacct(SACCT.read_text(), "sacct.txt")
    assert parsed.superseded == 0 and parsed.accounted() == parsed.lines == 28


@pytest.mark.parametrize("elapsed", ["UNLIMITED", "INVALID", "-00:01:00", "1:2:3:4", "", "Unknown"])
def test_an_unreadable_elapsed_takes_end_minus_start(elapsed):
    """Issue 38, defect 9: these loaded a finished job with a null run time, silently."""
    parsed = parse_sacct(HEAD + f"8|COMPLETED|2026-11-01T00:00:00|2026-11-01T01:00:00|2026-11-01T02:30:00|{elapsed}|"
                                "gres/gpu=1\n", "s.txt")
    (row,) = parsed.jobs.iter_rows(named=True)
    assert float(row[c.RUNTIME_HOURS]) == 1.5 and parsed.elapsed_from_times == ["slurm-local-8"]


@pytest.mark.parametrize("elapsed", ["UNLIMITED", "INVALID", "-00:01:00", "1:2:3:4"])
def test_an_unreadable_elapsed_without_both_times_is_passed_on_for_the_contract_to_quarantine(elapsed):
    parsed = parse_sacct(HEAD + f"9|FAILED|2026-11-01T00:00:00|Unknown|2026-11-01T02:30:00|{elapsed}|gres/gpu=1\n",
                         "s.txt")
    (row,) = parsed.jobs.iter_rows(named=True)
    assert row[c.RUNTIME_HOURS] == f"Elapsed {elapsed}" and parsed.elapsed_from_times == []


def test_a_plain_export_carries_its_time_limit_and_job_name():
    """Contract v4: `Timelimit` as hours (`UNLIMITED` and `Partition_Limit` missing) and `JobName` as written;
    no Comment, no mapping: no model features, left for the normaliser to make `unknown`."""
    head = "JobID|JobName|Partition|Account|State|Submit|Start|End|Elapsed|Timelimit|AllocTRES"
    tres = "gres/gpu:a100=1,gres/gpu=1"
    text = "\n".join([head,
                      f"7|train_bert_042|gpu|nlp|COMPLETED|2026-11-20T08:00:00|2026-11-20T08:00:00|2026-11-20T09:00:00|"
                      f"01:00:00|1-12:00:00|{tres}",
                      f"8|sweep|gpu|nlp|PENDING|2026-11-20T08:00:00|Unknown|Unknown|00:00:00|UNLIMITED|{tres}",
                      f"9|eval|gpu|nlp|PENDING|2026-11-20T08:00:00|Unknown|Unknown|00:00:00|Partition_Limit|{tres}"]) + "\n"
    got = jobs(text)
    assert [(r[c.JOB_NAME], r[c.TIME_LIMIT_HOURS], r[c.MODEL_TYPE]) for r in got.values()] == [
        ("train_bert_042", "36.0", None), ("sweep", None, None), ("eval", None, None)]
