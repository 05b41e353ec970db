"""The sources the nightly pulls besides the inbox (`sources.yaml`, GPUCAST_SOURCES; docs/sources.md):

    mlflow:
      - tracking_uri: sqlite:////data/mlflow/mlflow.db
        experiments: [resnet-sweeps]          # optional; none: every active experiment
        mapping: mlflow-mapping.yaml          # optional
    slurm:
      - files: /data/sacct/*.txt              # a file or a glob of sacct --parsable2 exports ...
      - sacct: true                           # ... or run sacct (since: now-1days by default)
        mlflow_uri: http://mlflow:5000        # optional: the runs the jobs ran (join by tag)

Relative paths (mappings, files) are read from the sources file's folder and must stay under it
(`../../etc/shadow` is refused; an absolute path is taken as written). The file is read by the one YAML
loader (`records/plain_yaml.py`): plain values only, each entry at most `MAX_VALUES` values once
its aliases are expanded (an alias bomb under one `tracking_uri` is that entry's problem, not a 2.8 GB
string). A file that cannot be read at all is a `SourcesError`; an entry that cannot be used is a
`Source` with its `problem`, which fails that source only: the night pulls the others. Each usable entry's
settings are typed by kind (`MlflowSource`, `SlurmSource`). Parsing only: the flow pulls.
"""

from __future__ import annotations

import datetime as dt
import glob
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpucast.records.plain_yaml import YamlRefused, line_of, plain_value, read_config, where
from gpucast.tasks.sources.mlflow import JOIN_TAG, MlflowJoin

KEYS = {
    "mlflow": ("tracking_uri", "experiments", "mapping", "since"),
    "slurm": ("files", "sacct", "since", "mapping", "mlflow_uri", "mlflow_experiments", "join_tag"),
}
LISTS = ("experiments", "mlflow_experiments")  # a name, or a list of names
FLAGS = ("sacct",)  # true or false
PATHS = ("mapping", "files")  # relative to the sources file's folder, and under it


class SourcesError(ValueError):
    """A sources file that cannot be used: one line naming the file and the entry (exit 2)."""


@dataclass(frozen=True)
class MlflowSource:
    """An `mlflow:` entry's settings: the runs of `experiments` (none: every active one) at `tracking_uri`."""

    tracking_uri: str
    experiments: tuple[str, ...] = ()
    mapping: str | None = None  # a mapping file (absolute)
    since: str | None = None  # ISO 8601: read from then on instead of from the watermarks


@dataclass(frozen=True)
class SlurmSource:
    """A `slurm:` entry's settings: exported `files` (a file or a glob) or `sacct` run, and the MLflow runs the
    jobs ran when `mlflow_uri` names their store."""

    files: str | None = None  # a file or a glob (absolute)
    sacct: bool = False
    since: str | None = None  # sacct's --starttime
    mapping: str | None = None  # a mapping file (absolute)
    mlflow_uri: str | None = None
    mlflow_experiments: tuple[str, ...] = ()
    join_tag: str | None = None

    def join(self) -> MlflowJoin | None:
        """The MLflow runs to join the jobs to (`mlflow_uri`), or None."""
        return MlflowJoin(self.mlflow_uri, self.mlflow_experiments, self.join_tag or JOIN_TAG) if self.mlflow_uri else None

    def matched_files(self) -> list[str]:
        """The files `files` names (a glob: every match, sorted); none is an error naming the pattern."""
        found = sorted(glob.glob(str(Path(self.files or "").expanduser())))
        if not found:
            raise FileNotFoundError(f"no file matches {self.files}")
        return found


SourceOptions = MlflowSource | SlurmSource


@dataclass(frozen=True)
class Source:
    """One entry: its kind (`mlflow`, `slurm`), a name for messages, its settings (paths made absolute; None when
    the entry cannot be used), and why it cannot be pulled (empty: it can)."""

    kind: str
    name: str
    options: SourceOptions | None = None
    problem: str = ""

    def usable(self) -> SourceOptions:
        """The entry's settings; `SourcesError` (its problem) when it cannot be pulled."""
        if self.problem or self.options is None:
            raise SourcesError(self.problem)
        return self.options


def load_sources(path: Path) -> list[Source]:
    """The sources a sources file lists, in its order. `SourcesError` when the file as a whole cannot be
    read; an entry that cannot be used comes back with its `problem` (one line naming the file, the line
    and the entry), so that only it fails."""
    root, _ = read_config(path, SourcesError, "sources file", "see docs/sources.md; GPUCAST_SOURCES")  # the one reader
    if root is None:
        return []
    kinds = _kinds(path, root)
    return [_entry(path, kind, i, node) for kind, entries in kinds for i, node in enumerate(entries.value, start=1)]


def _kinds(path: Path, root: yaml.Node) -> list[tuple[str, yaml.SequenceNode]]:
    """(kind, its list of entries) of the top level, which must name kinds only."""
    keys = [k.value if isinstance(k, yaml.ScalarNode) else "?" for k, _ in root.value] \
        if isinstance(root, yaml.MappingNode) else []
    if not isinstance(root, yaml.MappingNode) or set(keys) - set(KEYS):
        found = ", ".join(k if k in KEYS else "an unknown key" for k in keys) if keys else "no mapping"
        raise SourcesError(f"{where(path, line_of(root))}: its top level lists sources by kind ({', '.join(KEYS)}); "
                           f"found {found}")
    out = []
    for key, entries in root.value:
        if not isinstance(entries, yaml.SequenceNode):
            raise SourcesError(f"{where(path, line_of(entries))}: `{key.value}` is a list of entries (`- ...` lines)")
        out.append((key.value, entries))
    return out


def _entry(path: Path, kind: str, number: int, node: yaml.Node) -> Source:
    """One entry as a `Source`: its settings checked, or the problem that keeps it from being pulled."""
    name = f"{kind} entry {number}"
    try:
        options = _options(path, kind, plain_value(node))
    except YamlRefused as exc:
        return Source(kind, name, None, f"{where(path, exc.line)}: {name}: {exc.problem}")
    except SourcesError as exc:
        return Source(kind, name, None, f"{where(path, line_of(node))}: {name} {exc}")
    shown = options.get("tracking_uri") or options.get("files") or "sacct"
    typed = {**options, **{k: tuple(options[k]) for k in LISTS if k in options}}
    return Source(kind, f"{kind} {shown}", MlflowSource(**typed) if kind == "mlflow" else SlurmSource(**typed))


def _options(path: Path, kind: str, entry: object) -> dict:
    """An entry's settings, each of the kind of value it takes; `SourcesError` (the entry's problem) else."""
    if not isinstance(entry, dict):
        raise SourcesError(f"is not a mapping of settings ({', '.join(KEYS[kind])})")
    unknown = [k for k in entry if k not in KEYS[kind]]
    if unknown:
        raise SourcesError(f"has unknown setting(s) {', '.join(map(_shown, unknown))} (settings: {', '.join(KEYS[kind])})")
    options = {k: _value(path, k, v) for k, v in entry.items() if v is not None}
    if kind == "mlflow" and not options.get("tracking_uri"):
        raise SourcesError("needs tracking_uri")
    if kind == "slurm" and bool(options.get("files")) == bool(options.get("sacct")):
        raise SourcesError("needs files (a file or a glob) or sacct: true, not both")
    return options


def _value(path: Path, key: str, value: object) -> object:
    """A setting's value as the flow uses it: yes/no, a list of names, or text (a path: absolute)."""
    if key in FLAGS:
        if not isinstance(value, bool):
            raise SourcesError(f"{key} is true or false, not {_kind(value)}")
        return value
    if key in LISTS:
        names = value if isinstance(value, list) else [value]
        if not all(_text_like(v) for v in names):
            raise SourcesError(f"{key} is a name or a list of names, not {_kind(value)}")
        return [str(v) for v in names]
    if not _text_like(value):
        raise SourcesError(f"{key} is a single value, not {_kind(value)}")
    text = value.isoformat() if isinstance(value, dt.date) else str(value)
    return _local(path, key, text) if key in PATHS else text


def _local(path: Path, key: str, value: str) -> str:
    """A mapping file or an export glob: relative to the sources file's folder, and under it; absolute as written."""
    if Path(value).expanduser().is_absolute():
        return value
    folder = path.parent.resolve()
    where = (folder / value).resolve()
    if not where.is_relative_to(folder):
        raise SourcesError(f"{key} {_shown(value)} leaves the sources file's folder ({folder}); a relative path is read "
                           "under it: write an absolute path to read a file elsewhere")
    return str(where)


def _text_like(value: object) -> bool:
    return isinstance(value, str | int | float | dt.date) and not isinstance(value, bool)


def _kind(value: object) -> str:
    return {dict: "a mapping", list: "a list", bool: "true/false"}.get(type(value), type(value).__name__)


def _shown(text: object, limit: int = 60) -> str:
    """A value of the file in a message: escaped, and cut to `limit` characters."""
    shown = repr(str(text))
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
