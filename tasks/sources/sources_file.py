"""The sources the nightly pulls besides the inbox (`sources.yaml`, GPUCAST_SOURCES; docs/sources.md):

    mlflow:
      - tracking_uri: sqlite:////data/mlflow/mlflow.db
        experiments: [resnet-sweeps]          # optional; none: every active experiment
        mapping: mlflow-mapping.yaml          # optional
    slurm:
      - files: /data/sacct/*.txt              # a file or a glob of sacct --parsable2 exports ...
      - sacct: true                           # ... or run sacct (since: now-1days by default)
        mlflow_uri: http://mlflow:5000        # optional: the runs the jobs ran (join by tag)

Relative paths (mappings, files) are read from the sources file's folder. Parsing only: the flow pulls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import yaml

KEYS = {
    "mlflow": ("tracking_uri", "experiments", "mapping", "since"),
    "slurm": ("files", "sacct", "since", "mapping", "mlflow_uri", "mlflow_experiments", "join_tag"),
}


# What each setting's value must be, as YAML writes it: checked where it is read, so a wrong type is one line naming
# the file, the entry, the setting and the type, and fails that source only (not a TypeError in the pull).
TEXT = (str,)
NAMES = (str, list)  # one name or a list of names
TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "tracking_uri": (TEXT, "a URI (text)"), "mlflow_uri": (TEXT, "a URI (text)"),
    "experiments": (NAMES, "a name or a list of names"), "mlflow_experiments": (NAMES, "a name or a list of names"),
    "mapping": (TEXT, "a file path (text)"), "files": (TEXT, "a file path or a glob (text)"),
    "since": ((str, date), "a time (text, e.g. now-1days or 2026-11-01T02:00:00Z)"), "sacct": ((bool,), "true or false"),
    "join_tag": (TEXT, "a tag name (text)"),
}


class SourcesError(ValueError):
    """A sources file that cannot be used: one line naming the file and the entry (exit 2)."""


@dataclass(frozen=True)
class Source:
    """One entry: its kind (`mlflow`, `slurm`), a name for messages, and its settings as written."""

    kind: str
    name: str
    options: dict = field(default_factory=dict)
    error: str | None = None  # why this entry cannot be used (a value of the wrong type): this source fails alone


def load_sources(path: Path) -> list[Source]:
    """The sources a sources file lists, in its order; `SourcesError` for anything it cannot mean."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"sources file {path} not found (GPUCAST_SOURCES)") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise SourcesError(f"{path}: not valid YAML ({str(exc).splitlines()[0]}); see docs/sources.md") from None
    if data is None:
        return []
    if not isinstance(data, dict) or set(data) - set(KEYS):
        raise SourcesError(f"{path}: its top level lists sources by kind ({', '.join(KEYS)}); found "
                           f"{', '.join(map(str, data)) if isinstance(data, dict) else type(data).__name__}")
    out = []
    for kind, entries in data.items():
        if not isinstance(entries, list):
            raise SourcesError(f"{path}: `{kind}` is a list of entries (`- ...` lines)")
        out += [_entry(path, kind, i, e) for i, e in enumerate(entries, start=1)]
    return out


def _entry(path: Path, kind: str, number: int, entry: object) -> Source:
    where = f"{path}: {kind} entry {number}"
    if not isinstance(entry, dict):
        raise SourcesError(f"{where} is not a mapping of settings ({', '.join(KEYS[kind])})")
    unknown = [k for k in entry if k not in KEYS[kind]]
    if unknown:
        raise SourcesError(f"{where}: unknown setting(s) {', '.join(map(str, unknown))} (settings: {', '.join(KEYS[kind])})")
    if wrong := _wrong_types(where, entry):
        return Source(kind, f"{kind} entry {number}", error=wrong)
    # YAML reads `since: 2026-11-01` as a date: the importers take ISO 8601 text
    options = {k: _local(path, k, v.isoformat() if isinstance(v, date) else v) for k, v in entry.items()}
    if kind == "mlflow" and not options.get("tracking_uri"):
        raise SourcesError(f"{where} needs tracking_uri")
    if kind == "slurm" and bool(options.get("files")) == bool(options.get("sacct")):
        raise SourcesError(f"{where} needs files (a file or a glob) or sacct: true, not both")
    for key in ("experiments", "mlflow_experiments"):
        if isinstance(options.get(key), str):
            options[key] = [options[key]]
    name = options.get("tracking_uri") or options.get("files") or "sacct"
    return Source(kind, f"{kind} {name}", options)


def _wrong_types(where: str, entry: dict) -> str | None:
    """One line naming each setting whose value is not of its type (TYPES), else None. An empty value (`mapping:`)
    is a setting not given, as before."""
    wrong = []
    for key, value in entry.items():
        kinds, expected = TYPES[key]
        if value is not None and not isinstance(value, kinds) or (isinstance(value, list) and not all(isinstance(v, str) for v in value)):
            wrong.append(f"{key} must be {expected}, got {type(value).__name__} {repr(value)[:60]}")
    return f"{where}: {'; '.join(wrong)}" if wrong else None


def _local(path: Path, key: str, value: object) -> object:
    """A mapping file or an export glob relative to the sources file's folder, as an absolute path."""
    if key in ("mapping", "files") and isinstance(value, str) and not Path(value).expanduser().is_absolute():
        return str(path.parent.resolve() / value)
    return value
