"""`sacct --parsable2` output as contract rows: fixtures written as Slurm prints them, checked field by field."""

from __future__ import annotations

import io
import time
import tracemalloc

import polars as pl
import pytest

from gpucast.expectations import contract as c
from gpucast.tasks.sources import slurm
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
                         "slurm-hpc1-1010_1", "slurm-hpc1-1010_2", "slurm-hpc1-1010_3", "slurm-hpc1-1010_4",
                         "slurm-hpc1-1020+0"]
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
        # the array's pending range `1010_[3-4]`: one row per task (issue 48 item 3)
        "1010_3": ("PENDING", None, t("20T13:00:00"), t("20T13:00:00"), None, "gpu-l4", "vision", "L4-24GB", "1", None),
        "1010_4": ("PENDING", None, t("20T13:00:00"), t("20T13:00:00"), None, "gpu-l4", "vision", "L4-24GB", "1", None),
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
    got = by_id(parsed)
    # the CPU partition's jobs (no gres/gpu): not GPU jobs, not loaded; het component +1 ran on it
    assert parsed.no_gpu == 2 and not {"slurm-hpc1-1020+1", "slurm-hpc1-1030"} & set(got)
    # finished without a gres/gpumem figure or a Comment one (the running 1008 has none yet, and is not counted)
    assert parsed.no_gpu_mem == 2
    assert [j for j, r in got.items() if r[c.PEAK_GPU_MEM_GB] is None and r[c.STATUS] in slurm.FINISHED] == [
        "slurm-hpc1-1003", "slurm-hpc1-1005"]


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
        9, 2, 1, 1, 3 + 1 + 1)  # 7 ran on no GPU
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
    assert float(row[c.RUNTIME_HOURS]) == 1.5 and parsed.elapsed_from_times == 1


@pytest.mark.parametrize("elapsed", ["UNLIMITED", "INVALID", "-00:01:00", "1:2:3:4"])
def test_an_unreadable_elapsed_without_both_times_is_passed_on_for_the_contract_to_quarantine(elapsed):
    parsed = parse_sacct(HEAD + f"9|FAILED|2026-11-01T00:00:00|Unknown|2026-11-01T02:30:00|{elapsed}|gres/gpu=1\n",
                         "s.txt")
    (row,) = parsed.jobs.iter_rows(named=True)
    assert row[c.RUNTIME_HOURS] == f"Elapsed {elapsed}" and parsed.elapsed_from_times == 0


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


# Issue 48: one line never stops the import; clusters, arrays, streaming --------------------------------------

FULL = "JobID|JobName|Cluster|Partition|State|Submit|Start|End|Elapsed|AllocTRES|TRESUsageInMax|Comment\n"


def line(job: str, name: str = "train", cluster: str = "hpc1", state: str = "COMPLETED",
         start: str = "2026-11-01T01:00:00", end: str = "2026-11-01T02:00:00", elapsed: str = "01:00:00",
         tres: str = "gres/gpu=1", mem: str = "", comment: str = "") -> str:
    return f"{job}|{name}|{cluster}|gpu|{state}|2026-11-01T00:00:00|{start}|{end}|{elapsed}|{tres}|{mem}|{comment}\n"


def pending(job: str, gpus: int = 2, cluster: str = "hpc1") -> str:
    return line(job, cluster=cluster, state="PENDING", start="Unknown", end="Unknown", elapsed="00:00:00",
                tres=f"gres/gpu={gpus}")


def by_id(parsed) -> dict[str, dict]:
    return {r[c.JOB_ID]: r for r in parsed.jobs.iter_rows(named=True)}


def test_a_comment_nested_2000_levels_deep_quarantines_its_job_alone():
    """Issue 48 item 1: json.loads raised RecursionError and `gpucast import slurm` exited 1, loading nothing."""
    deep = '{"model_type": ' + "[" * 2000 + "]" * 2000 + "}"
    parsed = parse_sacct(FULL + line("1") + line("2", comment=deep) + line("3", comment='{"model_type": "CNN"}'),
                         "s.txt")
    got = by_id(parsed)
    assert [got[f"slurm-hpc1-{j}"]["_source_error"] for j in "13"] == [None, None]
    assert got["slurm-hpc1-2"]["_source_error"] == (
        "s.txt line 3: Comment: JSON nested 2,001 levels deep, more than the 100 read; write the job's Comment as a "
        "flat JSON object of names and values")
    assert got["slurm-hpc1-3"][c.MODEL_TYPE] == "CNN"
    assert (parsed.rows, parsed.quarantined, parsed.accounted()) == (3, 1, parsed.lines)


def test_a_comment_built_to_be_slow_to_scan_is_read_in_linear_time():
    """The nesting is counted before parsing; an unclosed string of escapes made that count quadratic (a 40 kB
    Comment took 5 s, this 120 kB one ~45 s, a 1 MiB one hours; now milliseconds)."""
    started = time.monotonic()
    parsed = parse_sacct(FULL + line("1", comment="{" + '"\\' * 60_000 + "[" * 100), "s.txt")
    assert time.monotonic() - started < 5
    (row,) = parsed.jobs.iter_rows(named=True)
    assert row["_source_error"] is None  # not JSON: ignored, as any Comment that is not JSON


def test_a_latin1_job_name_quarantines_that_line_and_names_its_field_and_byte():
    """Issue 48 item 1: one Latin-1 byte made the whole export "not sacct output" (exit 2)."""
    data = (FULL + line("1") + line("2", name="entra\xeenement") + line("3")).encode("latin-1")
    parsed = parse_sacct(io.BytesIO(data).readlines(), "s.txt")
    got = by_id(parsed)
    assert got["slurm-hpc1-2"]["_source_error"] == (
        "s.txt line 3: JobName holds byte 0xee (byte 8 of the line), which is not UTF-8; export with a UTF-8 locale "
        "(LANG=C.UTF-8 sacct ...) or convert the file (iconv -f latin1 -t utf-8)")
    assert got["slurm-hpc1-2"][c.JOB_NAME] == "entra\ufffdnement"  # what it holds, shown in rejected_job_logs
    assert [got[f"slurm-hpc1-{j}"]["_source_error"] for j in "13"] == [None, None]
    assert (parsed.unreadable, parsed.quarantined, parsed.accounted(), parsed.lines) == (1, 1, 3, 3)
    assert "1 unreadable line(s) quarantined" in parsed.summary()


def test_a_latin1_line_alone_is_quarantined_not_taken_for_output_that_is_not_sacct():
    """A line not UTF-8 but with its header's fields is sacct's line with an encoding fault, even the only one."""
    parsed = parse_sacct([FULL.encode(), line("1", name="caf\xe9").encode("latin-1")], "s.txt")
    assert (parsed.rows, parsed.unreadable, parsed.quarantined, parsed.accounted()) == (1, 1, 1, 1)


def test_a_line_with_the_wrong_number_of_fields_is_quarantined_not_the_file():
    parsed = parse_sacct(FULL + line("1") + "2|broken\n" + line("3"), "s.txt")
    got = by_id(parsed)
    assert got["slurm-local-2"]["_source_error"] == "s.txt line 3: 2 fields where its header has 12"
    assert (parsed.rows, parsed.unreadable, parsed.accounted()) == (3, 1, parsed.lines)


@pytest.mark.parametrize(("body", "says"), [
    # a header, then what is mostly not lines of its fields (binary, another format): refused whole, naming the first
    # line that cannot be read
    (bytes(range(256)) * 40, "s.txt line 2: "),
    (b"1|x\n2|y\n3|z\n" + line("4").encode(), "s.txt line 2: 2 fields where its header has 12; 3 of its 4 "
                                                      "line(s) cannot be read, so it is not sacct --parsable2 output"),
])
def test_output_that_is_mostly_unreadable_is_still_refused_whole(body, says):
    with pytest.raises(NotSacctOutput) as err:
        parse_sacct(io.BytesIO(FULL.encode() + body).readlines(), "s.txt")
    assert str(err.value).startswith(says) and "\n" not in str(err.value)


def test_a_line_longer_than_the_limit_is_read_in_part_and_quarantined(monkeypatch):
    monkeypatch.setattr(slurm, "MAX_LINE_BYTES", 200)
    data = (FULL + line("1") + line("2", comment='{"note": "' + "x" * 1000 + '"}') + line("3")).encode()
    read = list(slurm.lines_of(io.BytesIO(data)))
    assert [len(x) for x in read[2:3]] == [200] and isinstance(read[2], slurm.CutLine) and len(read) == 4
    parsed = parse_sacct(read, "s.txt")
    assert by_id(parsed)["slurm-hpc1-2"]["_source_error"] == "s.txt line 3: longer than 200 bytes (only that much was read)"
    assert parsed.accounted() == parsed.lines == 3


def test_the_same_job_id_on_two_clusters_is_two_jobs_each_with_its_own_steps():
    """Issue 48 item 2: `sacct -M all`: 5001 of hpc1 and of hpc2 were one job (1 superseded) with hpc2's memory."""
    parsed = parse_sacct(FULL + line("5001") + line("5001.0", mem="gres/gpumem=2000M")
                         + line("5001", cluster="hpc2") + line("5001.0", cluster="hpc2", mem="gres/gpumem=70000M"), "s")
    got = by_id(parsed)
    assert {j: float(r[c.PEAK_GPU_MEM_GB]) for j, r in got.items()} == {
        "slurm-hpc1-5001": pytest.approx(2000 * MIB), "slurm-hpc2-5001": pytest.approx(70000 * MIB)}
    assert (parsed.superseded, parsed.steps, parsed.orphan_steps, parsed.accounted()) == (0, 2, 0, 4)


@pytest.mark.parametrize(("job", "tasks"), [
    ("7000_[1-1000]", [f"7000_{k}" for k in range(1, 1001)]),
    ("7000_[1,3,5-9]", ["7000_1", "7000_3", "7000_5", "7000_6", "7000_7", "7000_8", "7000_9"]),
    ("7000_[1-9:2]", ["7000_1", "7000_3", "7000_5", "7000_7", "7000_9"]),  # a step
    ("7000_[3-6%2]", ["7000_3", "7000_4", "7000_5", "7000_6"]),  # a throttle: at most 2 at once, still 4 tasks
    ("7000_[3-4]%2", ["7000_3", "7000_4"]),
    ("7000_[5,1-3,2]", ["7000_5", "7000_1", "7000_2", "7000_3"]),  # a task named twice is one task
])
def test_a_pending_array_range_is_one_row_per_task(job, tasks):
    """Issue 48 item 3: `7000_[1-1000]` was one pending job with 2 GPUs for 1,000 queued tasks."""
    parsed = parse_sacct(FULL + pending(job), "s.txt")
    assert parsed.jobs[c.JOB_ID].to_list() == [f"slurm-hpc1-{t}" for t in tasks]
    assert set(parsed.jobs[c.STATUS]) == {"PENDING"} and set(parsed.jobs[c.GPU_COUNT]) == {"2"}
    assert (parsed.ranges, parsed.tasks, parsed.tasks_superseded, parsed.rows) == (1, len(tasks), 0, len(tasks))
    assert parsed.accounted() == parsed.lines == 1


@pytest.mark.parametrize(("job", "says"), [
    ("7000_[1-100001]", "JobID 7000_[1-100001]: an array range of 100,001 tasks, more than the 100,000 one range "
                        "record is expanded into; each task loads when it has a record of its own (running, finished)"),
    ("7000_[5-1]", "JobID 7000_[5-1]: '5-1' is not a task id, a span a-b or a span with a step a-b:s"),
    ("7000_[a-b]", "JobID 7000_[a-b]: 'a-b' is not a task id"),
    ("7000_[1-3", "JobID 7000_[1-3: not an array range as Slurm writes one"),
])
def test_an_array_range_too_large_or_not_written_as_slurm_writes_it_is_one_quarantined_row(job, says):
    parsed = parse_sacct(FULL + line("1") + pending(job), "s.txt")
    got = by_id(parsed)
    assert got[f"slurm-hpc1-{job}"]["_source_error"].startswith(f"s.txt line 3: {says}")
    assert (parsed.rows, parsed.ranges, parsed.tasks, parsed.quarantined, parsed.accounted()) == (2, 0, 0, 1, 2)


def test_array_tasks_supersede_the_pending_range_they_leave():
    """Two nights' exports joined (the header repeated): night 1 `7000_[1-4]` pending; night 2 tasks 1 and 2 run,
    `7000_[3-4]` still pending. Each task is its latest record: 1 and 2 running, 3 and 4 pending once."""
    night2 = (line("7000_1", state="RUNNING", end="Unknown", tres="gres/gpu=2")
              + line("7000_1.0", state="RUNNING", end="Unknown", mem="gres/gpumem=4096M")
              + line("7000_2", state="RUNNING", end="Unknown", tres="gres/gpu=2") + pending("7000_[3-4]"))
    parsed = parse_sacct(FULL + pending("7000_[1-4]") + FULL + night2, "s.txt")
    got = by_id(parsed)
    assert {j: (r[c.STATUS], r[c.GPU_COUNT], r[c.PEAK_GPU_MEM_GB]) for j, r in got.items()} == {
        "slurm-hpc1-7000_1": ("RUNNING", "2", repr(4096 * MIB)), "slurm-hpc1-7000_2": ("RUNNING", "2", None),
        "slurm-hpc1-7000_3": ("PENDING", "2", None), "slurm-hpc1-7000_4": ("PENDING", "2", None)}
    # 6 lines: 2 ranges (6 tasks: 1-2 superseded by their own records, 3-4 of night 1 by night 2's range), 2 task
    # lines, 1 step, 1 header
    assert (parsed.lines, parsed.headers, parsed.ranges, parsed.tasks, parsed.tasks_superseded, parsed.steps) == (
        6, 1, 2, 6, 4, 1)
    assert parsed.accounted() == parsed.lines
    assert ("6 sacct line(s): 2 GPU job(s), 2 array range(s) expanded into 6 task(s) (4 superseded by a later record "
            "of the task), 1 step(s) folded into their job, 0 job(s) without GPUs not loaded, 1 header line(s) inside "
            "the output skipped;") in parsed.summary()


def test_a_task_line_older_than_its_range_is_superseded_by_the_range():
    """A task's own line that is older than a range naming it (requeued into the array's pending range)."""
    old = line("7000_2", state="FAILED", start="2026-10-01T00:00:00", end="2026-10-01T00:10:00")
    parsed = parse_sacct(FULL + old.replace("2026-11-01T00:00:00", "2026-10-01T00:00:00") + pending("7000_[1-2]"),
                         "s.txt")
    assert [(r[c.JOB_ID], r[c.STATUS]) for r in parsed.jobs.iter_rows(named=True)] == [
        ("slurm-hpc1-7000_1", "PENDING"), ("slurm-hpc1-7000_2", "PENDING")]
    assert (parsed.superseded, parsed.tasks_superseded, parsed.accounted(), parsed.lines) == (1, 0, 2, 2)


def test_a_cpu_array_range_is_a_job_without_gpus_not_expanded():
    parsed = parse_sacct(FULL + pending("7000_[1-1000]", gpus=0).replace("gres/gpu=0", ""), "s.txt")
    assert (parsed.rows, parsed.no_gpu, parsed.ranges, parsed.accounted()) == (0, 1, 0, 1)


@pytest.mark.parametrize("state", ["completed", "Completed", "timeout", "cancelled by 0"])
def test_states_are_matched_whatever_their_case(state):
    """Issue 48 item 11: `completed` loaded without its run time (the state word was matched as written)."""
    (row,) = parse_sacct(FULL + line("1", state=state), "s.txt").jobs.iter_rows(named=True)
    assert row[c.STATUS] in ("COMPLETED", "FAILED", "CANCELLED") and float(row[c.RUNTIME_HOURS]) == 1.0


def test_a_header_repeated_inside_the_output_is_skipped_and_counted():
    """Issue 48 item 11: two exports joined: the second header counted as a job without GPUs."""
    parsed = parse_sacct(FULL + line("1") + FULL + line("2"), "s.txt")
    assert (list(by_id(parsed)), parsed.no_gpu, parsed.headers, parsed.lines, parsed.accounted()) == (
        ["slurm-hpc1-1", "slurm-hpc1-2"], 0, 1, 3, 3)
    assert ", 1 header line(s) inside the output skipped;" in parsed.summary()


def test_a_second_export_with_other_fields_is_read_by_its_own_header():
    other = "Submit|State|JobID|AllocTRES|Cluster\n2026-11-02T00:00:00|PENDING|9|gres/gpu=4|hpc2\n"
    parsed = parse_sacct(FULL + line("1") + other, "s.txt")
    got = by_id(parsed)
    assert (got["slurm-hpc2-9"][c.STATUS], got["slurm-hpc2-9"][c.GPU_COUNT]) == ("PENDING", "4")
    assert (parsed.headers, parsed.accounted(), parsed.lines) == (1, 3, 3)


def test_rows_are_handed_on_in_chunks_and_the_lines_read_once():
    """Issue 48 item 10: the reader takes lines one at a time and hands the rows on a chunk at a time."""
    chunks: list[int] = []
    lines = iter((FULL + "".join(line(str(j)) + line(f"{j}.batch", mem="gres/gpumem=1024M") for j in range(1, 8))
                  ).encode().splitlines(keepends=True))
    out = slurm.SacctReader("s.txt", chunk_rows=3).read(lines, lambda rows: chunks.append(rows.height))
    assert chunks == [3, 3, 1] and (out.rows, out.steps, out.accounted(), out.lines) == (7, 7, 14, 14)
    assert next(lines, None) is None


def traced_peak_mb(read) -> float:
    """The most memory Python allocated (tracemalloc) while `read()` ran, in MB."""
    tracemalloc.start()
    try:
        read()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def test_a_range_s_tasks_take_no_memory_per_task():
    """Review of issue 48 (W 8): expanding a range kept an entry per task of every range (to settle which record
    of a task is the latest): 10 lines of N_[1-100000] took 160 MB more. Only a range's rows are held now, a chunk
    at a time: the same for 5,000 tasks as for 50,000 (it was 1 MB and 8 MB). Which record of a task wins is
    unchanged (`test_array_tasks_supersede_the_pending_range_they_leave`, ...)."""
    def peak(tasks: int) -> float:
        reader = slurm.SacctReader("s.txt", chunk_rows=500)
        return traced_peak_mb(lambda: reader.read((FULL + pending(f"7000_[1-{tasks}]")).splitlines(), lambda _: None))

    small, large = peak(5_000), peak(50_000)
    assert large < small + 1, (small, large)


def test_a_jobs_line_is_kept_with_only_what_its_row_reads():
    """Review of issue 48 (W 8): each job's latest line was kept whole until the rows were built, so a jobs-only
    export (`sacct -X`, no steps) held about twice the file. Only the fields a row is built from are kept, and of
    the TRES lists only their GPU items; the rows are those the whole lines gave."""
    head = "JobID|User|Cluster|Partition|State|Submit|Start|End|Elapsed|AllocTRES|ReqTRES|TRESUsageInMax|NodeList\n"
    noise = ",".join(f"fs/disk{k}=1048576" for k in range(60))  # ~1.2 kB of TRES items no row reads
    body = "".join(f"{j}|{'u' * 300}|hpc1|gpu|COMPLETED|2026-11-01T00:00:00|2026-11-01T01:00:00|2026-11-01T02:00:00|"
                   f"01:00:00|cpu=8,{noise},gres/gpu:a100=2,gres/gpu=2|cpu=8,{noise},gres/gpu=2|"
                   f"cpu=01:00:00,{noise},gres/gpumem=40960M|{'node' * 100}\n" for j in range(1, 2001))
    reader, rows, lines = slurm.SacctReader("s.txt"), [], body.encode().splitlines(keepends=True)  # as read
    reader.start(iter([head]))
    held = traced_peak_mb(lambda: all(reader.feed(x) is None for x in lines))
    assert held < 0.15 * len(body) / 1e6, (held, len(body) / 1e6)  # 8.2 MB of lines: it held 8.8 MB, now 0.9
    reader.read([], lambda frame: rows.extend(frame.iter_rows(named=True)))
    assert len(rows) == 2000 and {(r[c.GPU_TYPE], r[c.GPU_COUNT], r[c.PEAK_GPU_MEM_GB]) for r in rows} == {
        ("a100", "2", repr(40960 * MIB))}


def test_a_field_a_mapping_names_is_kept_whole(tmp_path):
    """A mapping may name any sacct field (`WCKey`, `User`, a TRES list): those are kept as they are written."""
    mapping = load_mapping(write(tmp_path / "m.yaml", "fields:\n  model_type: User\n  arch: ReqTRES\n"))
    (row,) = parse_sacct("JobID|User|State|Submit|AllocTRES|ReqTRES\n"
                         "1|bert|COMPLETED|2026-11-01T00:00:00|gres/gpu=1|cpu=4,gres/gpu=1\n", "s.txt",
                         mapping).jobs.iter_rows(named=True)
    assert (row[c.MODEL_TYPE], row[c.ARCH], row[c.GPU_COUNT]) == ("bert", "cpu=4,gres/gpu=1", "1")


def test_stored_ranges_of_the_arrays_read_are_retired_as_cancelled_at_their_own_time():
    """A range an older gpucast stored whole is retired once this output has a record of its array and cluster.
    `stored` is the contract's text, as warehouse/sources.py selects it."""
    when = "2026-11-01T00:00:00.000000Z"
    stored = pl.DataFrame({n: [None, None] for n in c.COLUMNS}, schema={n: pl.String for n in c.COLUMNS}).with_columns(
        pl.Series(c.JOB_ID, ["slurm-hpc-east-7000_[1-9]", "slurm-hpc-east-8000_[1-9]"]),
        pl.Series(c.SUBMITTED_AT, [when, when]), pl.Series(c.UPDATED_AT, [when, when]),
        pl.Series(c.STATUS, ["PENDING"] * 2), pl.Series(c.GPU_COUNT, ["2", "4"]), pl.Series(c.RUNTIME_HOURS, ["1.0"] * 2))
    (row,) = slurm.retired_ranges(stored, {"hpc-east|7000", "hpc1|8000"}).iter_rows(named=True)
    assert (row[c.JOB_ID], row[c.STATUS], row[c.GPU_COUNT], row[c.UPDATED_AT], row[c.RUNTIME_HOURS]) == (
        "slurm-hpc-east-7000_[1-9]", "CANCELLED", "2", when, None)
    assert row[c.FAILURE_REASON].endswith("(the tasks are jobs of their own: slurm-hpc-east-7000_<task>)")


def test_gpus_per_node_times_nodes_when_only_tres_per_node_is_exported():
    """Issue 51: a job on 4 nodes of 8 GPUs, exported with TRESPerNode and NNodes but no AllocTRES."""
    text = ("JobID|State|Submit|Partition|NNodes|TRESPerNode\n"
            "7001|PENDING|2026-11-20T08:00:00|gpu|4|gres/gpu:h100:8\n"
            "7002|PENDING|2026-11-20T08:00:00|gpu|2|gres:gpu:4\n"
            "7003|PENDING|2026-11-20T08:00:00|gpu||gres/gpu:2\n")
    got = jobs(text)
    assert [(r[c.GPU_TYPE], r[c.GPU_COUNT]) for r in got.values()] == [("h100", "32"), (None, "8"), (None, "2")]
