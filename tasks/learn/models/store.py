"""The model registry's folders: this module alone writes, reads and prunes them.

    <models_dir>/<train_run_id>/<target>/
        <model><suffix>            each model of repeat 0, saved by its registry entry (code-free formats)
        blend.json                 a blend champion's members and weights (tasks/learn/blend.py), each member
                                   saved as <member><suffix>
        encoder.json               the feature encoder fitted on repeat 0's fit rows
        metadata.json              features, target, preset, champion, library versions, metrics, calibration
        test_predictions.parquet   repeat 0's test rows: actual and every model's prediction (the report)

Which runs to keep is the warehouse's answer (`warehouse.training.runs_to_keep`); `prune` removes
the folders of all other runs, and only those: a folder named as a train run is (`RUN_FOLDER`). Anything else
under `models_dir` (the trace cache, a folder a person put there) is not gpucast's to delete (it was: every
folder not kept went). A folder's metrics and champion stay in the warehouse after it goes.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from gpucast.tasks.learn.features import FEATURE_SETS, FeatureEncoder
from gpucast.tasks.learn.models import compiled, registry

log = logging.getLogger(__name__)

# A train run's folder: its run id, `train-<UTC time>-<6 hex>` (warehouse/runs.py `new_run_id`; the test pins the two)
RUN_FOLDER = re.compile(r"train-\d{8}T\d{6}Z-[0-9a-f]{6}")
ENCODER_FILE = "encoder.json"
METADATA_FILE = "metadata.json"
TEST_PREDICTIONS_FILE = "test_predictions.parquet"


def target_folder(models_dir: Path, train_run_id: str, target: str) -> Path:
    return models_dir / train_run_id / target


def save_model(folder: Path, name: str, est) -> Path:
    """Write a fitted estimator with its registry entry's own `save`; return the file. A blend
    (`blend.Blend`): each member in its own format and `blend.FILE` (members, weights), which is returned."""
    from gpucast.tasks.learn import blend

    folder.mkdir(parents=True, exist_ok=True)
    if name == blend.NAME:
        for member, member_est in est.estimators.items():
            save_model(folder, member, member_est)
        (folder / blend.FILE).write_text(json.dumps(est.to_json(), indent=2))
        return folder / blend.FILE
    entry = registry.entry(name)
    path = folder / f"{name}{entry.suffix}"
    entry.save(est, path)
    return path


def save_encoder(folder: Path, encoder: FeatureEncoder) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ENCODER_FILE).write_text(json.dumps(encoder.to_dict()))


class ModelFolderDamaged(ValueError):
    """A champion's folder holds a file that is not what training wrote (cut, changed, not JSON): refused with the
    file named before a native loader reads it (review 85 S2-2: a cut LightGBM model aborted the process, exit 134,
    with pages of native noise). Not retried (flows/errors.py): the file does not change between tries."""


FILES_KEY = "file_sha256"  # metadata.json: each file training wrote beside it -> its SHA-256 (`save_metadata`)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save_metadata(folder: Path, metadata: dict) -> None:
    """Write `metadata.json`, last: with the SHA-256 of every file already in the folder (`FILES_KEY`), which
    `load_model` checks before reading one."""
    files = {p.name: _sha256(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name != METADATA_FILE}
    (folder / METADATA_FILE).write_text(json.dumps({**metadata, FILES_KEY: files}, indent=2, default=float))


def _damaged(path: Path, why: str) -> ModelFolderDamaged:
    return ModelFolderDamaged(f"{path} {why}: the model folder is damaged; run `gpucast train` (or `gpucast nightly`) "
                              "to train a new champion")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _damaged(path, f"is not valid JSON ({exc})") from None


def _changed(folder: Path, metadata: dict, paths: tuple[Path, ...]) -> Path | None:
    """The first of `paths` (files of `folder`) whose SHA-256 is not the one training recorded, else None."""
    recorded = metadata.get(FILES_KEY, {})
    return next((p for p in paths if p.name in recorded and (not p.is_file() or _sha256(p) != recorded[p.name])), None)


def _checked(folder: Path, metadata: dict, name: str) -> Path:
    """`folder / name`, once its SHA-256 is the one training recorded (models saved before the record: unchecked)."""
    path = folder / name
    want = metadata.get(FILES_KEY, {}).get(name)
    if want is not None and (not path.is_file() or _sha256(path) != want):
        raise _damaged(path, "is missing" if not path.is_file() else "is not the file training wrote (its SHA-256 differs)")
    return path


def save_test_predictions(folder: Path, predictions: pl.DataFrame) -> None:
    predictions.write_parquet(folder / TEST_PREDICTIONS_FILE)


def read_metadata(folder: Path) -> dict:
    return _read_json(folder / METADATA_FILE)


def read_test_predictions(folder: Path) -> pl.DataFrame | None:
    path = folder / TEST_PREDICTIONS_FILE
    return pl.read_parquet(path) if path.exists() else None


# The libraries a saved model depends on: their versions are recorded with every model
# (metadata.json "versions") and checked when it is loaded (`check_versions`).
LIBRARIES = ("torch", "scikit-learn", "xgboost-cpu", "xgboost", "lightgbm", "catboost", "polars", "numpy")


def library_versions() -> dict[str, str]:
    """Versions of the installed LIBRARIES (those not installed are left out)."""
    versions = {}
    for pkg in LIBRARIES:
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return versions


def check_versions(recorded: dict[str, str], installed: dict[str, str], where: Path) -> list[str]:
    """Compare a model's recorded library versions with the installed ones.

    A different **major** version refuses the model (ValueError): file formats and defaults change
    across majors, and a model that loads but predicts differently is worse than none. A different
    minor or patch version is returned as a warning (logged by the caller) and the model is used.
    """
    major, minor = [], []
    for pkg, then in sorted(recorded.items()):
        now = installed.get(pkg)
        if now is None or now == then:
            continue
        (major if then.split(".")[0] != now.split(".")[0] else minor).append(f"{pkg} {then} -> {now}")
    if major:
        raise ValueError(f"{where} was trained with other major library versions ({'; '.join(major)}): "
                         "run `gpucast train` to retrain with the installed ones, or reinstall from constraints.txt")
    return [f"{where}: trained with {m}" for m in minor]


@dataclass
class LoadedModel:
    """What scoring needs from a folder: the estimator, its encoder and its interval calibration."""

    estimator: object
    encoder: FeatureEncoder
    calibration: dict
    metadata: dict
    compiled: bool = False  # predicting through the compiled library (tasks/learn/models/compiled.py)


def load_model(folder: Path, name: str, device: str | None = None, use_compiled: bool = True,
               threads: int | None = None) -> LoadedModel:
    """Load model `name` of a target folder with its encoder and calibration; a tree ensemble
    predicts through its compiled library when one was built and checked (`use_compiled`), and every
    model predicts on `threads` cores (None: the library's default)."""
    metadata = read_metadata(folder)
    for warning in check_versions(metadata.get("versions", {}), library_versions(), folder):
        log.warning("%s (minor versions: the model is used)", warning)
    calibration = metadata.get("calibration", {}).get(name)
    if calibration is None or "residuals" not in calibration:
        raise ValueError(f"{folder} has no interval calibration for {name} (trained by an older gpucast): "
                         "run `gpucast train` again")
    from gpucast.tasks.learn import blend

    encoder = FeatureEncoder.from_dict(_read_json(_checked(folder, metadata, ENCODER_FILE)))
    if name == blend.NAME:  # each member as it would load alone (compiled where it was), summed with the weights
        mix = _read_json(_checked(folder, metadata, blend.FILE))
        loaded = {m: _load_estimator(folder, m, encoder, metadata, device, use_compiled, threads) for m in mix["members"]}
        return LoadedModel(blend.Blend({m: est for m, (est, _) in loaded.items()},
                                       dict(zip(mix["members"], mix["weights"], strict=True))), encoder, calibration,
                           metadata, compiled=any(fast is not None for _, fast in loaded.values()))
    estimator, fast = _load_estimator(folder, name, encoder, metadata, device, use_compiled, threads)
    return LoadedModel(estimator, encoder, calibration, metadata, compiled=fast is not None)


def _load_estimator(folder: Path, name: str, encoder: FeatureEncoder, metadata: dict, device: str | None,
                    use_compiled: bool, threads: int | None):
    """(registry model `name` loaded from `folder`, its compiled library or None)."""
    from gpucast.tasks.learn.models.estimators import LogTarget, PriorModel  # (scikit-learn: the `ml` extra)

    entry = registry.entry(name)
    native = _checked(folder, metadata, f"{name}{entry.suffix}")
    estimator = entry.load(native, device)
    if isinstance(estimator, PriorModel) and estimator.n_features_in_ < 0:
        estimator.n_features_in_ = len(encoder.names)
    fast, why = None, "not a tree model"
    if isinstance(estimator, LogTarget):  # native formats do not carry the residual's base column
        estimator.base = (None if name in registry.NO_BASE
                          else FEATURE_SETS[encoder.feature_set].base_column(metadata["target"]))
        estimator.from_edges(metadata.get("edges", {}).get(name))  # beyond the history's prior (issue 50)
        fast, why = compiled.load_compiled(native, threads) if use_compiled else (None, "use_compiled=False")
        if fast is not None and (changed := _changed(folder, metadata, (native.with_suffix(compiled.LIB_SUFFIX),
                                                                         native.with_suffix(compiled.INFO_SUFFIX)))):
            # review 86 S2-1: a library swapped since training predicted unchecked; the native model, which is
            # checked, predicts instead (as for any library it cannot use)
            fast, why = None, f"{changed} is not the file training wrote (its SHA-256 differs)"
        if fast is not None:
            estimator.regressor_ = fast
    log.info("%s %s predicts through %s: %s", folder.name, name,
             "its compiled library" if fast is not None else "its native model", why)
    if threads:
        registry.use_threads(estimator, threads)
    return estimator, fast


def prune(models_dir: Path, keep: set[str]) -> list[Path]:
    """Delete every train run's folder (`RUN_FOLDER`) under `models_dir` whose run id is not in `keep`; return them.
    Nothing else there is touched (a link named like a run is not followed: not a run folder gpucast wrote)."""
    removed = []
    for folder in sorted(models_dir.iterdir()) if models_dir.exists() else []:
        if RUN_FOLDER.fullmatch(folder.name) and folder.is_dir() and not folder.is_symlink() and folder.name not in keep:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed
