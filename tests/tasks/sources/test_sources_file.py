"""The sources file the nightly pulls (`tasks/sources/sources_file.py`)."""

from __future__ import annotations

import pytest

from gpucast.tasks.sources.sources_file import Source, SourcesError, load_sources
from tests.conftest import write


def test_entries_in_order_with_paths_from_the_files_folder(tmp_path):
    path = write(tmp_path / "conf" / "sources.yaml", """
mlflow:
  - tracking_uri: http://mlflow:5000
    experiments: sweeps
    mapping: names.yaml
slurm:
  - sacct: true
    since: now-2days
    mlflow_uri: http://mlflow:5000
  - files: /data/exports/*.txt
""")
    assert load_sources(path) == [
        Source("mlflow", "mlflow http://mlflow:5000", {"tracking_uri": "http://mlflow:5000", "experiments": ["sweeps"],
                                                       "mapping": str(tmp_path / "conf" / "names.yaml")}),
        Source("slurm", "slurm sacct", {"sacct": True, "since": "now-2days", "mlflow_uri": "http://mlflow:5000"}),
        Source("slurm", "slurm /data/exports/*.txt", {"files": "/data/exports/*.txt"}),
    ]


def test_an_empty_file_lists_nothing(tmp_path):
    assert load_sources(write(tmp_path / "s.yaml", "# nothing yet\n")) == []


@pytest.mark.parametrize(("text", "says"), [
    ("inbox: true\n", "its top level lists sources by kind (mlflow, slurm); found inbox"),
    ("mlflow: http://x\n", "`mlflow` is a list of entries"),
    ("mlflow:\n  - experiments: [a]\n", "mlflow entry 1 needs tracking_uri"),
    ("mlflow:\n  - tracking_uri: x\n    experiment: a\n", "mlflow entry 1: unknown setting(s) experiment (settings: "
                                                          "tracking_uri, experiments, mapping, since)"),
    ("slurm:\n  - files: a.txt\n    sacct: true\n", "slurm entry 1 needs files (a file or a glob) or sacct: true, not both"),
    ("slurm:\n  - x\n", "slurm entry 1 is not a mapping of settings"),
    ("mlflow: [\n", "not valid YAML"),
])
def test_what_it_cannot_mean_is_one_line_naming_the_file(tmp_path, text, says):
    path = write(tmp_path / "s.yaml", text)
    with pytest.raises(SourcesError) as err:
        load_sources(path)
    assert str(err.value).startswith(f"{path}: ") and says in str(err.value) and "\n" not in str(err.value)
