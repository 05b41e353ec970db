"""The sources file the nightly pulls (`tasks/sources/sources_file.py`)."""

from __future__ import annotations

import re

import pytest

from gpucast.tasks.sources.mlflow import JOIN_TAG, MlflowJoin
from gpucast.tasks.sources.sources_file import MlflowSource, SlurmSource, Source, SourcesError, load_sources
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
        Source("mlflow", "mlflow http://mlflow:5000", MlflowSource("http://mlflow:5000", experiments=("sweeps",),
                                                                   mapping=str(tmp_path / "conf" / "names.yaml"))),
        Source("slurm", "slurm sacct", SlurmSource(sacct=True, since="now-2days", mlflow_uri="http://mlflow:5000")),
        Source("slurm", "slurm /data/exports/*.txt", SlurmSource(files="/data/exports/*.txt")),
    ]


def test_an_empty_file_lists_nothing(tmp_path):
    assert load_sources(write(tmp_path / "s.yaml", "# nothing yet\n")) == []


@pytest.mark.parametrize(("text", "line", "says"), [
    ("inbox: true\n", 1, "its top level lists sources by kind (mlflow, slurm); found an unknown key"),
    ("mlflow: http://x\n", 1, "`mlflow` is a list of entries"),
    ("mlflow: [\n", 2, "not valid YAML"),
    # issue 48 item 9: the last `files` was kept silently; two `slurm:` blocks dropped the first
    ("slurm:\n  - files: a.txt\n    files: b.txt\n", 3, "'files' is given twice in one mapping (first on line 2)"),
    ("slurm:\n  - files: a.txt\nslurm:\n  - sacct: true\n", 3, "'slurm' is given twice in one mapping (first on line 1)"),
])
def test_a_file_it_cannot_read_is_one_line_naming_the_file(tmp_path, text, line, says):
    path = write(tmp_path / "s.yaml", text)
    with pytest.raises(SourcesError) as err:
        load_sources(path)
    assert str(err.value).startswith(f"{path}:{line}: ") and says in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("text", "says"), [
    ("mlflow:\n  - experiments: [a]\n", "mlflow entry 1 needs tracking_uri"),
    ("mlflow:\n  - tracking_uri: x\n    experiment: a\n", "mlflow entry 1 has unknown setting(s) 'experiment' (settings: "
                                                          "tracking_uri, experiments, mapping, since)"),
    ("slurm:\n  - files: a.txt\n    sacct: true\n", "slurm entry 1 needs files (a file or a glob) or sacct: true, not both"),
    ("slurm:\n  - x\n", "slurm entry 1 is not a mapping of settings"),
    # issue 38, defect 13: values of the wrong kind were used as they came (AttributeError ... 'decode', TypeError)
    ("mlflow:\n  - tracking_uri: [a, b]\n", "mlflow entry 1 tracking_uri is a single value, not a list"),
    ("slurm:\n  - sacct: yes please\n", "slurm entry 1 sacct is true or false, not str"),
    ("mlflow:\n  - tracking_uri: x\n    experiments: {a: 1}\n", "experiments is a name or a list of names, not a mapping"),
    ("mlflow:\n  - tracking_uri: !!python/name:os.system x\n", "mlflow entry 1: tag !!python/name:os.system is not "
                                                                 "allowed"),
])
def test_an_entry_it_cannot_use_fails_alone_with_one_line(tmp_path, text, says):
    """A bad entry is that source's problem; the file's other entries are still listed, usable."""
    path = write(tmp_path / "s.yaml", text + ("" if text.startswith("slurm") else "slurm:\n") + "  - files: /data/ok/*.txt\n")
    bad, good = load_sources(path)
    assert re.match(rf"{re.escape(str(path))}:\d+: ", bad.problem) and says in bad.problem and "\n" not in bad.problem
    assert good == Source("slurm", "slurm /data/ok/*.txt", SlurmSource(files="/data/ok/*.txt"))
    with pytest.raises(SourcesError, match=re.escape(bad.problem)):  # what the nightly raises for it (that source fails)
        bad.usable()


def bomb(levels: int) -> str:
    """A YAML alias bomb under one tracking_uri: 9 ** levels values from a few hundred bytes."""
    lines = ["mlflow:", "  - tracking_uri:", "      - &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"      - &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n  - tracking_uri: http://mlflow:5000\n"


def test_an_alias_bomb_fails_its_entry_without_being_expanded(tmp_path):
    """Issue 38, defect 2: 442 bytes, anchors nested 9 deep under tracking_uri, took the night down (a 2.8 GB
    string, a MemoryError). The loader counts what aliases would expand to, and refuses past 10,000 values.
    (7 levels here: 4.8 M values, so that today's code fails this test in seconds instead of exhausting memory.)"""
    path = write(tmp_path / "sources.yaml", bomb(7))
    bad, good = load_sources(path)
    assert bad.problem == (f"{path}:2: mlflow entry 1: expands to more than 10,000 values (YAML anchors and "
                           "aliases nested inside each other?); write the values out")
    assert good.name == "mlflow http://mlflow:5000" and not good.problem
    assert len(load_sources(write(tmp_path / "nine.yaml", bomb(9)))[0].problem) < 300  # the probe's own: as quick


def test_aliases_that_expand_to_little_are_plain_yaml(tmp_path):
    path = write(tmp_path / "s.yaml", "mlflow:\n  - tracking_uri: &u http://mlflow:5000\n    experiments: &e [a, b]\n"
                                      "slurm:\n  - sacct: true\n    mlflow_uri: *u\n    mlflow_experiments: *e\n")
    assert [s.options for s in load_sources(path)] == [
        MlflowSource("http://mlflow:5000", experiments=("a", "b")),
        SlurmSource(sacct=True, mlflow_uri="http://mlflow:5000", mlflow_experiments=("a", "b"))]


@pytest.mark.parametrize("entry", ["mlflow:\n  - tracking_uri: http://m:5000\n    mapping: ../../../../etc/shadow\n",
                                   "slurm:\n  - files: ../../../../etc/passw*\n", "slurm:\n  - files: sub/../../x.txt\n"])
def test_a_relative_path_must_stay_under_the_sources_files_folder(tmp_path, entry):
    """Issue 38, defect 5: `mapping: ../../../../etc/shadow` read /etc/shadow (and put its lines in the run's
    message). A relative path is read under the file's folder; an absolute one is taken as written."""
    path = write(tmp_path / "conf" / "sources.yaml", entry)
    (source,) = load_sources(path)
    assert "leaves the sources file's folder" in source.problem and "write an absolute path" in source.problem
    (absolute,) = load_sources(write(tmp_path / "conf" / "abs.yaml", "slurm:\n  - files: /data/x/*.txt\n"
                                                                     "    mapping: names/m.yaml\n"))
    assert absolute.options == SlurmSource(files="/data/x/*.txt", mapping=str(tmp_path / "conf" / "names" / "m.yaml"))


def test_a_date_given_as_since_is_iso_text(tmp_path):
    (source,) = load_sources(write(tmp_path / "s.yaml", "slurm:\n  - sacct: true\n    since: 2026-11-01\n"))
    assert source.options.since == "2026-11-01"


def test_a_slurm_entry_says_what_it_joins_and_which_files_it_reads(tmp_path):
    """The typed settings answer the two questions the nightly's pull asks of a `slurm:` entry: the MLflow runs the
    jobs are joined to (none without `mlflow_uri`; the default tag without `join_tag`), and the files its glob
    matches, sorted (none is an error naming the glob)."""
    assert SlurmSource(sacct=True).join() is None
    assert SlurmSource(sacct=True, mlflow_uri="http://m:5000", mlflow_experiments=("a",)).join() == \
        MlflowJoin("http://m:5000", ("a",), JOIN_TAG)
    assert SlurmSource(sacct=True, mlflow_uri="http://m:5000", join_tag="job").join().tag == "job"
    for name in ("b.txt", "a.txt", "c.csv"):
        write(tmp_path / name, "x")
    assert SlurmSource(files=str(tmp_path / "*.txt")).matched_files() == [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    with pytest.raises(FileNotFoundError, match=re.escape(f"no file matches {tmp_path / '*.json'}")):
        SlurmSource(files=str(tmp_path / "*.json")).matched_files()
