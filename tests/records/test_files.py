"""records/files.py: a file replaced whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpucast.records import files
from gpucast.records.files import replacing, temp_beside, write_text


def test_the_temporary_name_is_hidden_beside_the_target_and_this_process_own(tmp_path: Path) -> None:
    assert temp_beside(tmp_path / "note.json") == tmp_path / f".note.json.{os.getpid()}.tmp"


def test_write_text_replaces_the_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "note.json"
    path.write_text("old")
    write_text(path, "new ü")
    assert path.read_text(encoding="utf-8") == "new ü" and sorted(tmp_path.iterdir()) == [path]


def test_a_body_that_raises_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "data.parquet"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="half written"), replacing(path) as tmp:
        tmp.write_text("ha")
        raise RuntimeError("half written")
    assert path.read_text() == "old" and sorted(tmp_path.iterdir()) == [path]


def test_a_body_that_writes_nothing_raises_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "data.parquet"
    with pytest.raises(FileNotFoundError), replacing(path):
        pass  # (a COPY that wrote no file: nothing to rename in)
    assert not path.exists() and list(tmp_path.iterdir()) == []


def test_a_read_only_temporary_file_is_renamed_in(tmp_path: Path) -> None:
    path = tmp_path / "published.duckdb"
    with replacing(path) as tmp:
        tmp.write_bytes(b"copy")
        os.chmod(tmp, 0o444)  # as the publish makes its copy read-only before the rename
    assert path.read_bytes() == b"copy" and path.stat().st_mode & 0o777 == 0o444


def test_a_long_name_has_a_temporary_name_the_file_system_takes(tmp_path: Path) -> None:
    """Review 80 S3-1: `.<name>.<pid>.tmp` of a 250-255-byte name passed the 255-byte limit, so a move across disks sent
    the file to its hash name; the temporary name is cut to 200 bytes of the name (a character never split)."""
    target = tmp_path / ("é" * 127)  # 254 bytes
    files.write_text(target, "x")
    assert target.read_text() == "x" and len(files.temp_beside(target).name.encode()) <= 255


def test_a_folder_whose_file_system_cannot_flush_it_is_left_as_it_is_a_file_never(tmp_path: Path, monkeypatch) -> None:
    """Review 81 S3-3: some FUSE and network mounts refuse fsync on a folder (EINVAL): a rename into it is as durable
    as they make it, and stopping the night would gain nothing; a file's flush that fails still raises."""
    import errno

    def refuse(fd: int) -> None:
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(os, "fsync", refuse)
    files.flush(tmp_path)
    (tmp_path / "f").write_text("x")
    with pytest.raises(OSError):
        files.flush(tmp_path / "f")


def test_a_name_that_is_not_utf8_has_a_temporary_name(tmp_path: Path) -> None:
    """Review 82: `temp_beside` encoded the name as UTF-8, so a Latin-1 file name archived across disks stopped every
    night; the name's own bytes are used."""
    target = tmp_path / os.fsdecode(b"caf\xe9-" + b"x" * 240 + b".jsonl")
    write_text(target, "x")
    assert target.read_text() == "x" and not list(tmp_path.glob(".*.tmp"))
