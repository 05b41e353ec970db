"""records/files.py: a file replaced whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
