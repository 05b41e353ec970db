"""Tree ensembles compiled to native code for scoring (treelite + tl2cgen, gcc).

LightGBM's own `predict` walks 600 trees of 63 leaves per row through a generic interpreter; the
same trees generated as C `if` chains and compiled with gcc predicted 1M rows 2x faster here
(shared/STACK-NOTES.md). Compiling takes about a minute for such a model, so it happens once,
when the champion is saved, never per scoring run; the library sits beside the native model file.

A compiled library is used only if it agrees with the native model: at compile time both predict
the same sample and the library is kept only when every prediction matches to `AGREEMENT_RTOL`
(relative). Anything else (no compiler, a treelite error, disagreement, a library built by another
tl2cgen version) falls back to the native model, with the reason logged: the compiled path is an
accelerator, never a requirement.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

# registry name -> treelite frontend. XGBoost is left out: its float32 sums differed from the compiled
# float64 ones by up to 8e-5 relative (above the agreement bar), and its own predict already scored
# 4.7M jobs/min here (docs/benchmarks.md).
COMPILABLE = {"lightgbm": "lightgbm"}
AGREEMENT_RTOL = 1e-6
SAMPLE_ROWS = 20_000
LIB_SUFFIX = ".so"
INFO_SUFFIX = ".compiled.json"


def _treelite_model(name: str, native: Path):
    import treelite

    assert COMPILABLE[name] == "lightgbm"
    return treelite.frontend.load_lightgbm_model(str(native))


def compile_model(name: str, native: Path, inner, sample: np.ndarray, threads: int = 2) -> dict:
    """Compile the saved native model `native` of registry model `name` beside it; check it against
    `inner` (the fitted model's raw predictor) on `sample` rows. Returns what happened (written
    next to the library as JSON, and logged): `used` true only when the library may score."""
    lib, info_path = native.with_suffix(LIB_SUFFIX), native.with_suffix(INFO_SUFFIX)
    info: dict = {"model": name, "used": False}
    if name not in COMPILABLE:
        return {**info, "reason": f"{name} is not a compilable tree ensemble"}
    t0 = time.perf_counter()
    try:
        import tl2cgen

        tl2cgen.export_lib(_treelite_model(name, native), toolchain="gcc", libpath=str(lib),
                           params={"parallel_comp": max(1, threads)}, nthread=threads)
        info["compile_seconds"] = round(time.perf_counter() - t0, 1)
        info["tl2cgen"] = tl2cgen.__version__
        rows = np.ascontiguousarray(sample[:SAMPLE_ROWS], dtype=np.float64)
        compiled = CompiledTrees(lib, threads).predict(rows)
        native_pred = np.asarray(inner.predict(rows), dtype=np.float64)
        worst = float(np.max(np.abs(compiled - native_pred) / np.maximum(np.abs(native_pred), 1e-12))) if len(rows) else 0.0
        info["max_relative_difference"] = worst
        info["checked_rows"] = len(rows)
        info["used"] = worst <= AGREEMENT_RTOL
        if not info["used"]:
            info["reason"] = f"compiled and native predictions differ by up to {worst:.2e} relative (> {AGREEMENT_RTOL})"
    except Exception as exc:  # noqa: BLE001  (see the module doc: the native model stays the fallback)
        info["reason"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    if not info["used"]:
        lib.unlink(missing_ok=True)
        log.warning("%s: not compiled, scoring uses the native model: %s", native, info["reason"])
    info_path.write_text(json.dumps(info, indent=2))
    return info


def load_compiled(native: Path, threads: int | None = None) -> CompiledTrees | None:
    """The compiled library beside `native` when it was checked and this tl2cgen built it, else None."""
    lib, info_path = native.with_suffix(LIB_SUFFIX), native.with_suffix(INFO_SUFFIX)
    if not (lib.exists() and info_path.exists()):
        return None
    info = json.loads(info_path.read_text())
    try:
        import tl2cgen
    except ImportError:
        return None
    if not info.get("used") or info.get("tl2cgen") != tl2cgen.__version__:
        return None
    try:
        return CompiledTrees(lib, threads)
    except Exception as exc:  # noqa: BLE001  (a library that no longer loads: score with the native model)
        log.warning("%s: compiled library did not load (%s); scoring uses the native model", lib, exc)
        return None


class CompiledTrees:
    """`predict(X)` through a tl2cgen library: the ensemble's raw output (what LightGBM's `predict`
    returns for a regression objective)."""

    def __init__(self, lib: Path, threads: int | None = None):
        import tl2cgen

        self.lib = Path(lib)
        self.predictor = tl2cgen.Predictor(str(lib), nthread=threads)

    def predict(self, X) -> np.ndarray:
        import tl2cgen

        X = np.ascontiguousarray(X, dtype=np.float64)
        return np.asarray(self.predictor.predict(tl2cgen.DMatrix(X)), dtype=np.float64).reshape(len(X), -1)[:, 0]
