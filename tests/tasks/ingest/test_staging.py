"""Staging many small files in one batch (issue 27, item 9): the same per-file accounting as one file
at a time, with the fixed costs (the expectation suite, a Parquet file) paid once per batch."""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil
import threading
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpucast.tasks.ingest import staging
from gpucast.tasks.ingest.staging import SMALL_FILE_BYTES, batches, stage_file, stage_files
from tests.conftest import write
from tests.sample_jobs import GOOD, jsonl, record

CSV_HEADER = ",".join(GOOD)


def _csv_row(**overrides) -> str:
    rec = record(**overrides)
    return ",".join("" if rec.get(k) is None else str(rec[k]) for k in GOOD)


def _mixed_folder(root):
    """Every kind of small file a folder may hold: good, partly bad, empty, unreadable, a link."""
    files = [
        write(root / "a.jsonl", jsonl(record(job_id="a"), record(job_id="b", batch_size=-1), "{broken")),
        write(root / "b.csv", "\n".join([CSV_HEADER, _csv_row(job_id="c"), _csv_row(job_id="d", status="maybe"),
                                         _csv_row(job_id="e") + ",extra"]) + "\n"),
        write(root / "c.jsonl", ""),
        write(root / "c2.csv", "job_id,submitted_at,status,model_type,batch_size\ns,2026-11-01,PENDING,CNN,-1\n"),
        write(root / "d.jsonl.gz", b"not gzip"),
        write(root / "e.csv", "job_id,colour\nx,red\n"),
        write(root / "f.jsonl", jsonl(record(job_id="f", team="t" * 129), record(job_id="g", extra_key=1))),
        write(root / "h.jsonl.gz", gzip.compress(jsonl(record(job_id="h")).encode())),
    ]
    table = pa.table({k: [str(v) if v is not None else None for v in (record(job_id="p"), record(job_id="q", runtime_hours=0))
                          for v in [v[k]]] for k in GOOD})
    pq.write_table(table, root / "g.parquet")
    files.insert(7, root / "g.parquet")
    (root / "link.jsonl").symlink_to(files[0])
    return [*files, root / "link.jsonl"]


def _comparable(result) -> dict:
    out = dict(vars(result))
    out.pop("seconds")
    return out


def test_a_batch_of_small_files_stages_exactly_as_one_file_at_a_time(tmp_path):
    files = _mixed_folder(tmp_path / "in")
    alone = [stage_file(p, tmp_path / "one", i) for i, p in enumerate(files)]
    together = stage_files(files, tmp_path / "batch", 0)

    assert [_comparable(r) for r in together] == [_comparable(r) for r in alone]
    assert [r.status for r in together] == ["staged", "staged", "empty", "staged", "rejected", "rejected", "staged",
                                            "staged", "staged", "rejected"]
    assert sum(r.rows_rejected for r in together) == 7 and sum(r.rows_valid for r in together) == 5
    for kind in ("valid", "rejected"):  # one Parquet file per batch and kind, holding what the files staged alone hold
        assert len(list((tmp_path / "batch").glob(f"{kind}-*.parquet"))) == 1
        assert _staged_kind(tmp_path / "batch", kind).equals(_staged_kind(tmp_path / "one", kind)), kind
    # a CSV row's text is rebuilt from its own file's columns, not the batch's
    short = _staged_kind(tmp_path / "batch", "rejected").filter(pl.col("job_id") == "s")["raw_record"].item()
    assert json.loads(short) == {"job_id": "s", "submitted_at": "2026-11-01", "status": "PENDING", "model_type": "CNN",
                                 "batch_size": "-1"}


def _staged_kind(folder, kind) -> pl.DataFrame:
    frames = [pl.read_parquet(p) for p in sorted(folder.glob(f"{kind}-*.parquet"))]
    return pl.concat(frames, how="diagonal_relaxed").sort("file_index", "source_row")


def test_the_suite_runs_once_per_batch_not_once_per_file(tmp_path, monkeypatch):
    files = [write(tmp_path / "in" / f"job-{i:04d}.jsonl", jsonl(record(job_id=f"j{i}"))) for i in range(200)]
    calls = []
    real = staging.check_rows
    monkeypatch.setattr(staging, "check_rows", lambda frame, suite: calls.append(frame.height) or real(frame, suite))
    groups = batches(files)
    assert groups == [list(range(200))]
    results = [r for g in groups for r in stage_files([files[i] for i in g], tmp_path / "st", g[0])]
    assert calls == [200]
    assert [r.rows_valid for r in results] == [1] * 200 and [r.index for r in results] == list(range(200))


def test_batches_keep_order_and_leave_large_files_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "BATCH_FILES", 3)
    small = [write(tmp_path / f"s{i}.jsonl", "{}\n") for i in range(6)]
    big = write(tmp_path / "big.jsonl", "x" * (SMALL_FILE_BYTES + 1))
    assert batches([*small[:2], big, *small[2:]]) == [[0, 1], [2], [3, 4, 5], [6]]


def test_the_inbox_keeps_only_the_files_that_changed_while_they_were_read(tmp_path):
    """The inbox archive rule (issue 49 item 1): after a run from the inbox, each file it read moves to
    `archive/<day>/` when its content is what was read; one an exporter was still writing stays for the next run."""
    from gpucast.records.outcomes import FileResult

    inbox = tmp_path / "inbox"
    done, growing = write(inbox / "sub" / "a.jsonl", jsonl(record(job_id="a"))), write(inbox / "b.jsonl", "{")
    read = [FileResult(str(done), staging.content_key(done), 0), FileResult(str(growing), staging.content_key(growing), 1)]
    growing.write_text(jsonl(record(job_id="b")))  # appended to after it was read
    assert staging.archive_read(read, inbox) == [growing]
    assert not done.exists() and growing.exists()
    assert [p.relative_to(inbox).parts[0::2] for p in (inbox / staging.ARCHIVE).rglob("*.jsonl")] == [("archive", "sub")]
    assert staging.archive_read([], inbox) == []


def test_a_tail_written_before_the_hash_read_it_still_keeps_the_file_in_the_inbox(tmp_path):
    """The hash runs beside the read (stage_file): a tail appended after the reader passed the end but before the hash
    did is in the hash and not in the rows. The file's size and mtime taken before the read catch it: it stays."""
    from gpucast.records.outcomes import FileResult

    inbox = tmp_path / "inbox"
    path = write(inbox / "c.jsonl", jsonl(record(job_id="c")))
    before = staging.stat_key(path)
    path.write_text(jsonl(record(job_id="c"), record(job_id="d")))  # the tail the reader never saw
    hashed_with_tail = FileResult(str(path), staging.content_key(path), 0, stat_before=before)
    assert staging.archive_read([hashed_with_tail], inbox) == [path] and path.exists()
    unchanged = FileResult(str(path), staging.content_key(path), 0, stat_before=staging.stat_key(path))
    assert staging.archive_read([unchanged], inbox) == [] and not path.exists()


def test_stage_file_records_the_stat_it_read_from(tmp_path):
    path = write(tmp_path / "e.jsonl", jsonl(record(job_id="e")))
    result = staging.stage_file(path, tmp_path / "staging", 0)
    assert result.stat_before == staging.stat_key(path) and result.sha256 == staging.content_key(path)


def test_a_parallelism_beyond_a_whole_numbers_range_quarantines_its_row_not_the_file(tmp_path):
    """Session 22 (stage52k): `tensor_parallel` 1e20 raised in the layout rule's sentence (Polars builds it for every
    row, and its cast to Int64 was strict): the whole file stopped staging. Now the row is rejected with its reason."""
    path = write(tmp_path / "t.jsonl", jsonl(record(job_id="ok"), record(job_id="huge", gpu_count=8, tensor_parallel=1e20),
                                             record(job_id="ep", gpu_count=8, expert_parallel="1e20")))
    result = stage_file(path, tmp_path / "st", 0)
    assert result.reason is None and (result.rows_valid, result.rows_rejected) == (1, 2)
    rejected = _staged_kind(tmp_path / "st", "rejected").sort("job_id")
    assert rejected["job_id"].to_list() == ["ep", "huge"]
    assert [r[0] for r in rejected["reasons"].to_list()] == [
        "expert_parallel: 1e20 is out of range (a whole number within ±9e18)",
        "tensor_parallel: 100000000000000000000 is out of range (a whole number within ±9e18)"]


def test_stage_seconds_are_summed_per_step_over_the_files():
    from gpucast.records.outcomes import FileResult

    results = [FileResult("a", "h", 0, seconds={"read": 0.5, "rules": 0.25}), FileResult("b", "h", 1, seconds={"read": 1.0})]
    assert staging.stage_seconds(results) == {"read": 1.5, "normalise": 0.0, "rules": 0.25, "write": 0.0}


def test_great_expectations_judges_the_run_once_and_must_agree_with_the_row_rules(tmp_path, monkeypatch):
    """Issue 52, decision 1: the row rules sort each chunk; GX judges the run's checked rows once, on DuckDB
    (`check_run`), valid and rejected ones; a rule that drifts from GX fails the run there."""
    from gpucast.expectations import validate

    path = write(tmp_path / "a.jsonl", jsonl(record(job_id="ok"), record(job_id="bad", batch_size=0)))
    result = stage_file(path, tmp_path / "st", 0)
    assert (result.rows_valid, result.rows_rejected) == (1, 1)
    assert len(list((tmp_path / "st").glob(f"{staging.FAILED}-*.parquet"))) == 1  # the rejected row, typed, for GX
    check = staging.check_run(tmp_path / "st", [result])
    assert (check.rows, check.expectations) == (2, len(validate.SUITES["job_logs"]()["expectations"]))

    drifted = dict(validate.ROW_RULES)  # a rule stricter than GX: passes 'ok' and 'bad' alike on one column
    drifted["expect_column_values_to_be_between"] = lambda kw: pl.col(kw["column"]) > 8
    monkeypatch.setattr(validate, "ROW_RULES", drifted)
    again = stage_file(path, tmp_path / "drift", 0)
    with pytest.raises(validate.RuleMismatch, match="Great Expectations says it holds"):
        staging.check_run(tmp_path / "drift", [again])


def test_reading_ahead_gives_the_same_chunks_in_order_and_the_reading_error_after_them():
    """`_read_ahead` reads the next chunk in a thread: the chunks come as the reader yields them, a reading error
    is raised where it was met (after the chunks before it), and a caller that stops early stops the thread."""
    import threading

    from gpucast.tasks.ingest.readers import FileRejected
    from gpucast.tasks.ingest.staging import _read_ahead

    def chunks(n: int, fail: bool = False):
        for i in range(n):
            yield pl.DataFrame({"i": [i]})
        if fail:
            raise FileRejected("truncated")

    assert [c["i"][0] for c in _read_ahead(chunks(5))] == [0, 1, 2, 3, 4]
    got = []
    with pytest.raises(FileRejected, match="truncated"):
        for c in _read_ahead(chunks(3, fail=True)):
            got.append(c["i"][0])
    assert got == [0, 1, 2]
    ahead = _read_ahead(chunks(1000))
    assert next(ahead)["i"][0] == 0
    ahead.close()  # the caller stops: the reading thread ends
    assert not [t for t in threading.enumerate() if t.name == "gpucast-read-ahead"]


def test_a_reading_started_before_the_run_is_the_one_staged_and_stages_the_same_rows(tmp_path, monkeypatch):
    """`gpucast ingest FILE` starts reading the file before Prefect's import (`start_reading`, issue 52): staging takes
    that reading (the file is read once, in the same chunks) and stages exactly what a reading begun there stages:
    every count, outcome and staged row; read = valid + rejected."""
    import threading

    rows = [record(job_id=f"j{i}", batch_size=-1 if i % 7 == 0 else 8) for i in range(25)] + ["{broken"]
    path = write(tmp_path / "in.jsonl", jsonl(*rows))
    plain = stage_file(path, tmp_path / "plain", 0, chunk_rows=10)

    opened, read = [], staging.read_chunks

    def reading(*args, **kwargs):
        opened.append(threading.current_thread().name)
        yield from read(*args, **kwargs)

    monkeypatch.setattr(staging, "read_chunks", reading)
    staging.start_reading(path, chunk_rows=10)
    assert opened == ["gpucast-read-ahead"]  # begun, in its own thread, before any staging
    early = stage_file(path, tmp_path / "early", 0, chunk_rows=10)
    assert opened == ["gpucast-read-ahead"] and not staging._STARTED  # taken: not read a second time
    assert _comparable(early) == _comparable(plain)
    assert early.rows_read == early.rows_valid + early.rows_rejected == 26 and early.rows_rejected == 5
    for kind in ("valid", "rejected"):
        assert _staged_kind(tmp_path / "early", kind).equals(_staged_kind(tmp_path / "plain", kind)), kind
    assert not [t for t in threading.enumerate() if t.name == "gpucast-read-ahead"]


@pytest.mark.parametrize("change", ["chunk size", "mapping", "file written since", "replaced, same size and time",
                                    "never staged"])
def test_a_reading_started_before_the_run_that_does_not_fit_is_dropped(tmp_path, monkeypatch, change):
    """A reading begun early is taken only if it reads what the staging would (same chunk size, no mapping) and the
    file has not changed since it began; otherwise it is stopped and the file is read anew (the same result as a
    plain staging). One never taken is stopped by `stop_reading` (the command's end): no thread is left."""
    import threading

    from gpucast.tasks.sources.mapping import load_mapping

    path = write(tmp_path / "in.jsonl", jsonl(*[record(job_id=f"j{i}") for i in range(12)]))
    staging.start_reading(path, chunk_rows=5)
    if change == "never staged":
        staging.stop_reading()
    else:
        chunk_rows, mapping = (4 if change == "chunk size" else 5), None
        if change == "mapping":
            mapping = load_mapping(write(tmp_path / "m.yaml", "fields:\n  job_id: job_id\n"))
        if change == "file written since":
            with path.open("a") as f:
                f.write(jsonl(record(job_id="late")))
        if change == "replaced, same size and time":  # `rsync -t`: other rows, the same size and mtime (review 72 S2-2)
            other = write(tmp_path / "other.jsonl", jsonl(*[record(job_id=f"k{i}") for i in range(12)]))
            st = path.stat()
            os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
            os.replace(other, path)
            assert staging.stat_key(path) == (st.st_size, st.st_mtime_ns)  # what the check compared before
        result = stage_file(path, tmp_path / "staged", 0, chunk_rows=chunk_rows, mapping=mapping)
        assert result.rows_read == (13 if change == "file written since" else 12)
        staged = _staged_kind(tmp_path / "staged", "valid")["job_id"].to_list()
        assert staged[0] == ("k0" if change.startswith("replaced") else "j0")  # the file's rows as they are now
        assert result.stat_before == staging.stat_key(path)
    assert not staging._STARTED
    assert not [t for t in threading.enumerate() if t.name == "gpucast-read-ahead"]


def test_a_name_too_long_for_the_archive_is_archived_by_its_content_hash(tmp_path):
    """Review 77 S1-2: a 254-character file name archived twice in one day (`.1` takes it past 255 bytes), or a path
    near PATH_MAX made longer by `archive/<day>/`, raised ENAMETOOLONG after the run's load had committed, and every
    later run failed in `find-files`. Such a file goes to the day's folder by its content's hash; the others as before."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    long = "f" * 248 + ".jsonl"  # 254 bytes: with `.1`, 256
    first = inbox / long
    first.write_text('{"job_id": "a"}\n')
    (moved,) = staging.archive([first], inbox, day="2026-12-01")
    assert moved == inbox.resolve() / "archive" / "2026-12-01" / long  # the name kept where it fits
    again = inbox / long
    again.write_text('{"job_id": "b"}\n')
    (moved,) = staging.archive([again], inbox, day="2026-12-01")
    assert moved.parent == inbox.resolve() / "archive" / "2026-12-01" and not again.exists()
    assert moved.name == staging.content_key(moved)[:16] + ".jsonl" and moved.read_text() == '{"job_id": "b"}\n'
    deep = inbox
    while len(str(deep)) < 3800:
        deep = deep / ("d" * 200)
    deep.mkdir(parents=True)
    near = deep / ("g" * (4080 - len(str(deep)) - 8) + ".jsonl")
    near.write_text('{"job_id": "c"}\n')
    (moved,) = staging.archive([near], inbox, day="2026-12-01")
    assert not near.exists() and moved.read_text() == '{"job_id": "c"}\n'


def test_a_file_gone_before_it_was_read_is_said_not_the_runs_failure(tmp_path):
    """Review 77 S2-8: a file listed by the run and deleted before it was read (a clean-up job, an exporter rotating
    its files) failed the night in `stat`. Alone or in a batch of small files, it is `gone`: no rows, no hash, its
    reason said; the batch's other files stage as before."""
    kept = write(tmp_path / "kept.jsonl", jsonl(record(job_id="k1"), record(job_id="k2")))
    alone = stage_file(tmp_path / "deleted.jsonl", tmp_path / "staging", 0)
    assert (alone.status, alone.reason, alone.rows_read, alone.sha256) == ("gone", staging.GONE, 0, "")
    batch = stage_files([kept, tmp_path / "deleted.csv", tmp_path / "no-suffix"], tmp_path / "staging-b", 1)
    assert [(r.status, r.rows_read) for r in batch] == [("staged", 2), ("gone", 0), ("gone", 0)]
    assert staging.gone(batch) == ["deleted.csv", "no-suffix"]
    assert staging.archive_read(batch, tmp_path) == [] and not kept.exists()  # the read one archived, the gone skipped


def test_a_file_deleted_while_its_hash_was_pending_is_gone_with_no_rows(tmp_path, monkeypatch):
    """The hash opens the file beside the reader: a file deleted between the two opens was read but not hashed. It is
    `gone` with no rows counted (the next run reads it if it comes back); no staging file was written, since the first
    waits for the hash (its rows carry it)."""
    path = write(tmp_path / "racy.jsonl", jsonl(record(job_id="r1")))

    def hash_after_delete(p):
        p.unlink(missing_ok=True)
        raise FileNotFoundError(p)

    monkeypatch.setattr(staging, "content_key", hash_after_delete)
    result = stage_file(path, tmp_path / "staging", 3)
    assert (result.status, result.rows_read) == ("gone", 0)
    assert not list((tmp_path / "staging").glob("*.parquet"))


def test_a_missing_staging_folder_is_the_runs_failure_not_a_file_gone(tmp_path, monkeypatch):
    """Review 78: only the file's own absence makes it `gone`; a FileNotFoundError of another path (the run's staging
    folder removed by a clean-up) fails the staging, as before, rather than reading every file as gone."""
    path = write(tmp_path / "f.jsonl", jsonl(record(job_id="f1")))

    def lost_folder(self, *args):
        raise FileNotFoundError(2, "No such file or directory", str(tmp_path / "staging" / "valid-00000-00000.parquet"))

    monkeypatch.setattr(staging._Staged, "add", lost_folder)
    with pytest.raises(FileNotFoundError):
        stage_file(path, tmp_path / "staging", 0)


def test_a_file_named_path_deleted_after_its_early_reading_began_is_gone(tmp_path):
    """`gpucast ingest FILE` starts reading FILE before the flow (`start_reading`): deleted before the staging takes
    that reading, the file is `gone`, not the run's failure (review 78)."""
    path = write(tmp_path / "early.jsonl", jsonl(record(job_id="e1")))
    before = set(threading.enumerate())
    staging.start_reading(path)
    try:
        path.unlink()
        result = stage_file(path, tmp_path / "staging", 0)
        reading = [t for t in set(threading.enumerate()) - before if t.name == "gpucast-read-ahead"]  # before stop_reading
    finally:
        staging.stop_reading()
    assert (result.status, result.rows_read) == ("gone", 0)
    assert reading == []  # review 79 S3-6: the reading begun early was left running, holding the deleted file open


def test_an_inbox_archive_that_links_to_a_folder_elsewhere_is_kept_and_used(tmp_path):
    """Review 78: an `archive` link to a folder on another disk is the archive as meant: left as it is (not renamed,
    not read), and files are archived through it; a plain *file* named `archive` is renamed and read."""
    inbox, elsewhere = tmp_path / "inbox", tmp_path / "other-disk"
    elsewhere.mkdir()
    inbox.mkdir()
    (inbox / staging.ARCHIVE).symlink_to(elsewhere, target_is_directory=True)
    done = write(inbox / "a.jsonl", jsonl(record(job_id="a")))
    assert staging.make_archive_room(inbox) is None and (inbox / staging.ARCHIVE).is_symlink()
    assert staging.inbox_files(inbox, set()) == ([done.resolve()], [])
    staging.archive([done.resolve()], inbox)
    assert [p.name for p in elsewhere.rglob("*.jsonl")] == ["a.jsonl"]
    (inbox / staging.ARCHIVE).unlink()
    write(inbox / staging.ARCHIVE, "not a folder")
    assert staging.make_archive_room(inbox) == inbox / "archive.1" and (inbox / "archive.1").read_text() == "not a folder"


def _across_disks(monkeypatch, inbox: Path, elsewhere: Path) -> None:
    """`os.replace` out of `inbox` into `elsewhere` refused as the kernel refuses a rename across file systems."""
    real_replace = os.replace

    def across(src, dst):
        src_folder, dst_folder = Path(src).parent.resolve(), Path(dst).parent.resolve()  # (a link itself not followed)
        if src_folder.is_relative_to(inbox.resolve()) and dst_folder.is_relative_to(elsewhere.resolve()):
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src))
        real_replace(src, dst)

    monkeypatch.setattr(staging.os, "replace", across)


def _inbox_archived_elsewhere(tmp_path) -> tuple[Path, Path]:
    inbox, elsewhere = tmp_path / "inbox", tmp_path / "other-disk"
    elsewhere.mkdir()
    inbox.mkdir()
    (inbox / staging.ARCHIVE).symlink_to(elsewhere, target_is_directory=True)
    return inbox, elsewhere


def test_an_archive_on_another_file_system_receives_the_files(tmp_path, monkeypatch):
    """Review 79 S1-1: `os.replace` cannot cross file systems (EXDEV), so an `archive` link to another disk failed every
    night after its load; the file is copied there, then removed from the inbox, under its own name however long."""
    inbox, elsewhere = _inbox_archived_elsewhere(tmp_path)
    done = write(inbox / "deep" / "a.jsonl", jsonl(record(job_id="a")))
    long_name = write(inbox / ("n" * 249 + ".jsonl"), jsonl(record(job_id="n")))  # 255 bytes: a `.part` suffix would not fit
    _across_disks(monkeypatch, inbox, elsewhere)
    went = staging.archive([done.resolve(), long_name.resolve()], inbox)
    assert [p.name for p in went] == ["a.jsonl", long_name.name] and not done.exists() and not long_name.exists()
    assert went[0].read_text() == jsonl(record(job_id="a"))
    assert sorted(p.name for p in elsewhere.rglob("*") if p.is_file()) == sorted(["a.jsonl", long_name.name])  # no part


def test_links_are_archived_across_disks_as_links_never_followed(tmp_path, monkeypatch):
    """Review 80: the copy followed an inbox link: a link to a secret was archived as the secret's content, a link to a
    folder raised after the load (every night, its hash then known), a dangling one stayed. Each moves as the link."""
    inbox, elsewhere = _inbox_archived_elsewhere(tmp_path)
    secret = write(tmp_path / "secret.txt", "TOP SECRET")
    (inbox / "to-secret.jsonl").symlink_to(secret)
    (inbox / "to-folder").symlink_to(tmp_path, target_is_directory=True)
    (inbox / "dangling.jsonl").symlink_to(tmp_path / "nowhere")
    _across_disks(monkeypatch, inbox, elsewhere)
    links = [inbox / name for name in ("to-secret.jsonl", "to-folder", "dangling.jsonl")]
    went = staging.archive(links, inbox)
    assert [p.name for p in went] == [p.name for p in links] and not any(p.is_symlink() for p in links)
    assert all(p.is_symlink() for p in went) and os.readlink(went[0]) == str(secret)
    assert "TOP SECRET" not in "".join(p.read_text() for p in elsewhere.rglob("*") if p.is_file() and not p.is_symlink())


def test_a_file_written_to_while_it_is_copied_across_disks_stays_in_the_inbox(tmp_path, monkeypatch):
    """Review 80 S2-1: a line appended while the copy ran went to the removed inbox file, lost; the file stays for the
    next run to read whole, no partial copy is left in the archive, and the run counts it among the files changed while
    read (review 81 S3-1: it was only a log line)."""
    from gpucast.records.outcomes import FileResult

    inbox, elsewhere = _inbox_archived_elsewhere(tmp_path)
    growing = write(inbox / "growing.jsonl", jsonl(record(job_id="g1"))).resolve()
    read = FileResult(path=str(growing), sha256=staging.content_key(growing), index=0, stat_before=staging.stat_key(growing))
    _across_disks(monkeypatch, inbox, elsewhere)
    real_copy = shutil.copyfile

    def copy_then_append(src, dst, **kwargs):
        real_copy(src, dst, **kwargs)
        with open(src, "a") as f:
            f.write(jsonl(record(job_id="g2")))

    monkeypatch.setattr(shutil, "copyfile", copy_then_append)
    assert staging.archive_read([read], inbox) == [growing]
    assert growing.read_text() == jsonl(record(job_id="g1")) + jsonl(record(job_id="g2"))
    assert not [p for p in elsewhere.rglob("*") if p.is_file() or p.name.startswith(".")]


def test_a_link_the_archives_disk_cannot_hold_is_left_and_said_not_the_nights_stop(tmp_path, monkeypatch, caplog):
    """Review 81 S1-3: on a disk that holds no links (vfat, exFAT, some SMB mounts) making the link again raised after
    the load, then every night in find-files; the link stays in the inbox, said, and the files around it move."""
    inbox, elsewhere = _inbox_archived_elsewhere(tmp_path)
    (inbox / "to-secret.jsonl").symlink_to(tmp_path / "secret.txt")
    done = write(inbox / "a.jsonl", jsonl(record(job_id="a")))
    _across_disks(monkeypatch, inbox, elsewhere)

    def no_links(src, dst, *args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted", str(dst))

    monkeypatch.setattr(os, "symlink", no_links)
    went = staging.archive([inbox / "to-secret.jsonl", done.resolve()], inbox)
    assert [p.name for p in went] == ["a.jsonl"] and (inbox / "to-secret.jsonl").is_symlink()
    assert "archive's disk holds none: left in the inbox" in caplog.text


def test_a_link_whose_name_is_not_utf8_has_a_content_key(tmp_path):
    """Review 82: a link's key was its name and target encoded as UTF-8, so a Latin-1 name stopped every night in
    `inbox_files`; the bytes the file system holds are hashed (a UTF-8 name's key is as before)."""
    link = tmp_path / os.fsdecode(b"caf\xe9.jsonl")
    link.symlink_to(tmp_path / os.fsdecode(b"cibl\xe9"))
    assert len(staging.content_key(link)) == 64
    plain = tmp_path / "plain.jsonl"
    plain.symlink_to(tmp_path / "target")
    import hashlib
    assert staging.content_key(plain) == hashlib.sha256(f"symlink:{plain}->{tmp_path / 'target'}".encode()).hexdigest()


def test_a_file_in_the_way_of_the_archives_folder_leaves_the_inbox_file_and_says_so(tmp_path, caplog):
    """Review 83: a file at `archive/<day>` raised FileExistsError after the load, every run of that day."""
    inbox = tmp_path / "inbox"
    done = write(inbox / "a.jsonl", jsonl(record(job_id="a")))
    write(inbox / staging.ARCHIVE / "2026-12-02", "in the way")
    assert staging.archive([done.resolve()], inbox, day="2026-12-02") == [] and done.exists()
    assert "a file where the archive needs a folder" in caplog.text


def test_each_file_is_checked_just_before_its_own_move(tmp_path, monkeypatch):
    """Review 83: every file was checked, then every file moved, so a line appended to the second while the first was
    archived went into the archive unread; the second is now left for the next run to read whole."""
    from gpucast.records.outcomes import FileResult

    inbox = tmp_path / "inbox"
    first, second = (write(inbox / f"{n}.jsonl", jsonl(record(job_id=n))).resolve() for n in ("a", "b"))
    read = [FileResult(path=str(p), sha256=staging.content_key(p), index=i, stat_before=staging.stat_key(p))
            for i, p in enumerate((first, second))]
    moving = staging.archive

    def archive_while_b_grows(files, *args, **kwargs):
        with open(second, "a") as f:  # an exporter appends to b while a is being archived
            f.write(jsonl(record(job_id="b2")))
        return moving(files, *args, **kwargs)

    monkeypatch.setattr(staging, "archive", archive_while_b_grows)
    assert staging.archive_read(read, inbox) == [second] and not first.exists()
    assert second.read_text().count("job_id") == 2  # still in the inbox, whole
