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


@pytest.mark.parametrize(("entry", "says"), [
    # before: AttributeError ... 'decode' (the list reached MLflow's URI parser) and TypeError (glob of an int)
    ("mlflow:\n  - tracking_uri: [a, b]\n", "mlflow entry 1: tracking_uri must be a URI (text), got list ['a', 'b']"),
    ("slurm:\n  - files: 123\n", "slurm entry 1: files must be a file path or a glob (text), got int 123"),
    ("slurm:\n  - sacct: 'yes'\n", "slurm entry 1: sacct must be true or false, got str 'yes'"),
    ("mlflow:\n  - tracking_uri: x\n    experiments: [a, {b: 1}]\n",
     "mlflow entry 1: experiments must be a name or a list of names, got list ['a', {'b': 1}]"),
    ("slurm:\n  - files: a.txt\n    mapping: {x: 1}\n    since: 7\n",
     "slurm entry 1: mapping must be a file path (text), got dict {'x': 1}; since must be a time (text, e.g. "
     "now-1days or 2026-11-01T02:00:00Z), got int 7"),
])
def test_a_value_of_the_wrong_type_fails_that_source_only_naming_file_key_and_type(tmp_path, entry, says):
    good = "  - tracking_uri: http://mlflow:5000\n" if entry.startswith("mlflow") else "  - sacct: true\n"
    path = write(tmp_path / "s.yaml", entry + good)
    bad, ok = load_sources(path)
    assert bad.error == f"{path}: {says}" and "\n" not in bad.error and bad.options == {}
    assert ok.error is None and ok.options


def test_a_date_given_as_since_is_iso_text(tmp_path):
    (source,) = load_sources(write(tmp_path / "s.yaml", "slurm:\n  - sacct: true\n    since: 2026-11-01\n"))
    assert source.options["since"] == "2026-11-01"
