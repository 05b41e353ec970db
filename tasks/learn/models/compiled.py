"""Tree ensembles compiled to native code for scoring (treelite + tl2cgen, gcc).

LightGBM's own `predict` walks 600 trees of 63 leaves per row through a generic interpreter; the
same trees generated as C `if` chains over quantized features (`CODEGEN`) and compiled with gcc
predicted 1M rows 2.15x faster here. Compiling takes about a minute for such a model, so it happens once,
when the champion is saved, never per scoring run; the library sits beside the native model file.

Which families (docs/benchmarks.md "Compiled tree champions per family" has the figures):
  * lightgbm: treelite's LightGBM frontend on the saved text model;
  * extra_trees, random_forest, xgboost, adaboost, catboost, decision_tree stay native, for the reasons (measured) in
    `STAYS_NATIVE` (`treelite_model` still builds the forests', XGBoost's and the tree's, for the benchmark's
    measurement: the tree as a forest of one tree, since treelite has no importer for a lone `DecisionTreeRegressor`).
scikit-learn compares float32 features against its thresholds (it casts X to float32 before walking a
tree), so its families' libraries are fed X rounded to float32 the same way (`float32_input`).

A compiled library is used only if it agrees with the native model: at compile time both predict
the same sample and the library is kept only when every prediction matches to `AGREEMENT_RTOL`
(relative). Anything else (no compiler, a treelite error, disagreement, a library built by another
tl2cgen version) falls back to the native model, with the reason logged: the compiled path is an
accelerator, never a requirement.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from gpucast.records.outcomes import CompileInfo

log = logging.getLogger(__name__)

# registry name -> treelite frontend
COMPILABLE = {"lightgbm": "lightgbm", "lightgbm_plain": "lightgbm"}
SKLEARN_TREES = ("random_forest", "extra_trees", "decision_tree")  # fed X rounded to float32 (module doc)
# Tree champions kept on their library's own predict, and why (written to the info JSON beside the model).
STAYS_NATIVE = {
    "xgboost": "XGBoost sums its float32 leaves in another order than the compiled float32 code: on 200,000 rows "
               "they differed by up to 7.4e-6 absolute, 0.27 relative where the learnt log-ratio is near 0 (bar: "
               "1e-6 relative), and XGBoost's own predict was 4x faster than the compiled library (docs/benchmarks.md)",
    "adaboost": "AdaBoost regression predicts the weighted median of its trees, which a tree-sum compiler "
                "(treelite: sums or means of trees) cannot express; scikit-learn's own predict scores instead",
    "catboost": "treelite has no CatBoost frontend; CatBoost's own predict scores instead",
    "extra_trees": "at 25 trees of up to 2,048 leaves (registry.FOREST_TREES, FOREST_MAX_LEAVES) the compiled library "
                   "predicted slower than scikit-learn's own (4.17 against 2.51 CPU-s per 1M jobs) and took 996 s to "
                   "compile at load ~20 (issue 52, docs/benchmarks.md; at 50 trees it was over MAX_COMPILE_NODES and "
                   "never compiled); scikit-learn's own predict scores instead",
    "random_forest": "at 512 leaves a tree (registry.RANDOM_FOREST_MAX_LEAVES) the compiled library predicted slower "
                     "than scikit-learn's own (4.72 against 3.74 CPU-s per 1M jobs; 3.49 against 3.16 at 256 leaves) "
                     "and took 6 minutes to compile at load 17 (issue 52, docs/benchmarks.md); scikit-learn's own "
                     "predict scores instead",
    "decision_tree": "one tree: scikit-learn's own predict was 7x faster than its compiled library (0.02 s against "
                     "0.15 s per 200,000 rows, docs/benchmarks.md), which pays a per-call setup a single tree never earns back",
}
# gcc's time grows faster than the generated C: LightGBM's 600 x 63 leaves (~76k nodes) compiled in 74-82 s
# here, a 300-tree RandomForest of ~494k nodes (fitted on 3,000 jobs) had not compiled after 21 minutes on the same
# 2 busy cores, and one of 420,868 nodes with gcc -O1 in 32 translation units (`parallel_comp`) had not after 15
# (issue 31, load ~15; docs/benchmarks.md). A scikit-learn model above this many nodes is not compiled (the
# night's budget is for fitting; scoring it natively costs seconds per million jobs, not minutes).
MAX_COMPILE_NODES = 200_000
AGREEMENT_RTOL = 1e-6
SAMPLE_ROWS = 20_000
LIB_SUFFIX = ".so"
INFO_SUFFIX = ".compiled.json"


def treelite_model(name: str, native: Path, inner):
    """The treelite model of registry model `name`: from its saved `native` file or its fitted `inner`
    regressor, through treelite's own frontends. (XGBoost's frontend is here for the benchmark's
    measurement; `compile_model` keeps it native, `STAYS_NATIVE`.)"""
    import treelite

    if COMPILABLE.get(name) == "lightgbm":
        return treelite.frontend.load_lightgbm_model(str(native))
    if name == "xgboost":
        return treelite.frontend.load_xgboost_model(str(native))
    if name == "decision_tree":
        from sklearn.ensemble import RandomForestRegressor

        forest = RandomForestRegressor(n_estimators=1)  # a forest of one tree predicts what the tree does
        forest.estimators_, forest.n_outputs_, forest.n_features_in_ = [inner], inner.n_outputs_, inner.n_features_in_
        return treelite.sklearn.import_model(forest)
    if name in SKLEARN_TREES:
        return treelite.sklearn.import_model(inner)
    raise ValueError(f"{name} has no treelite frontend here")


def node_count(name: str, inner) -> int:
    """Nodes of a scikit-learn family's fitted trees (0 for the others: LightGBM's are capped by `num_leaves`)."""
    if name not in SKLEARN_TREES:
        return 0
    trees = getattr(inner, "estimators_", None) or [inner]
    return int(sum(t.tree_.node_count for t in trees))


# tl2cgen's code-generation options. `quantize`: each feature value is first mapped to the index of its place
# among that feature's split thresholds, and the trees compare small integers: 1.71-1.73x faster than the
# plain library (8.3 s against 14.1-14.3 s per 1M rows for a 600 x 63-leaf LightGBM, 2.15x LightGBM's own 17.8 s;
# same predictions to the bit) and quicker to compile (`bench_compiled.py --plain`, 2026-11-25, docs/benchmarks.md).
# Branch annotation (`annotate_in`, the training rows' branch frequencies) added nothing measurable (7.4 vs 7.6 s).
CODEGEN = {"quantize": 1}


def export(model, lib: Path, threads: int, codegen: dict | None = None) -> None:
    """Generate C for a treelite `model` (with the options `codegen`, default `CODEGEN`) and compile it
    with gcc into the shared library `lib`."""
    import tl2cgen

    params = {"parallel_comp": max(1, threads), **(CODEGEN if codegen is None else codegen)}
    tl2cgen.export_lib(model, toolchain="gcc", libpath=str(lib), params=params, nthread=threads)


def max_relative_difference(compiled: np.ndarray, native: np.ndarray) -> float:
    if not len(native):
        return 0.0
    return float(np.max(np.abs(compiled - native) / np.maximum(np.abs(native), 1e-12)))


def compile_model(name: str, native: Path, inner, sample: np.ndarray, threads: int = 1) -> CompileInfo:
    """Compile the saved native model `native` of registry model `name` beside it; check it against
    `inner` (the fitted model's raw predictor) on `sample` rows. Returns what happened (written
    next to the library as JSON, and logged): `used` true only when the library may score."""
    lib, info_path = native.with_suffix(LIB_SUFFIX), native.with_suffix(INFO_SUFFIX)
    info: dict = {"model": name, "used": False}
    if name not in COMPILABLE:
        info["reason"] = STAYS_NATIVE.get(name, f"{name} is not a compilable tree ensemble")
    elif (nodes := node_count(name, inner)) > MAX_COMPILE_NODES:
        info["reason"] = (f"{nodes:,} tree nodes: above the {MAX_COMPILE_NODES:,} that gcc compiles within minutes "
                          "here (MAX_COMPILE_NODES); the native model scores")
    else:
        info.update(_compile_and_check(name, native, inner, sample, threads, lib))
    if not info["used"]:
        lib.unlink(missing_ok=True)
        log.warning("%s: not compiled, scoring uses the native model: %s", native, info["reason"])
    else:
        log.info("%s: compiled in %.1f s, agrees with the native model to %.1e relative on %d rows", native,
                 info["compile_seconds"], info["max_relative_difference"], info["checked_rows"])
    result = CompileInfo(**info)
    info_path.write_text(result.to_json())
    return result


def _compile_and_check(name: str, native: Path, inner, sample: np.ndarray, threads: int, lib: Path) -> dict:
    info: dict = {"used": False, "float32_input": name in SKLEARN_TREES}
    t0 = time.perf_counter()
    try:
        import tl2cgen

        export(treelite_model(name, native, inner), lib, threads)
        info["compile_seconds"] = round(time.perf_counter() - t0, 1)
        info["tl2cgen"], info["codegen"] = tl2cgen.__version__, CODEGEN
        rows = np.ascontiguousarray(sample[:SAMPLE_ROWS], dtype=np.float64)
        compiled = CompiledTrees(lib, threads, float32_input=info["float32_input"]).predict(rows)
        worst = max_relative_difference(compiled, np.asarray(inner.predict(rows), dtype=np.float64))
        info.update(max_relative_difference=worst, checked_rows=len(rows), used=worst <= AGREEMENT_RTOL)
        if not info["used"]:
            info["reason"] = f"compiled and native predictions differ by up to {worst:.2e} relative (> {AGREEMENT_RTOL})"
    except Exception as exc:  # noqa: BLE001  (see the module doc: the native model stays the fallback)
        info["reason"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return info


def load_compiled(native: Path, threads: int | None = None) -> tuple[CompiledTrees | None, str]:
    """The compiled library beside `native` when it was checked and this tl2cgen built it (else None),
    and why (for the scoring log)."""
    lib, info_path = native.with_suffix(LIB_SUFFIX), native.with_suffix(INFO_SUFFIX)
    if not info_path.exists():
        return None, "no compiled library was built for it (compile_trees off, or not a tree champion)"
    info = CompileInfo.from_json(info_path.read_text())
    if not info.used:
        return None, f"not compiled: {info.reason or 'unknown'}"
    if not lib.exists():
        return None, f"{lib.name} is missing"
    try:
        import tl2cgen
    except ImportError:
        return None, "tl2cgen is not installed"
    if info.tl2cgen != tl2cgen.__version__:
        return None, f"the library was built by tl2cgen {info.tl2cgen}, this is {tl2cgen.__version__}"
    agreed = info.max_relative_difference if info.max_relative_difference is not None else float("nan")
    try:
        return CompiledTrees(lib, threads, float32_input=info.float32_input), \
            f"compiled library {lib.name} (agreed to {agreed:.1e})"
    except Exception as exc:  # noqa: BLE001  (a library that no longer loads: score with the native model)
        return None, f"{lib.name} did not load ({type(exc).__name__}: {str(exc)[:200]})"


class CompiledTrees:
    """`predict(X)` through a tl2cgen library: the ensemble's raw output (what the inner regressor's
    `predict` returns: LightGBM's raw score, a scikit-learn forest's mean of trees). `float32_input`:
    X is rounded to float32 first, as scikit-learn's trees do before comparing with their thresholds."""

    def __init__(self, lib: Path, threads: int | None = None, float32_input: bool = False):
        import tl2cgen

        self.lib = Path(lib)
        self.float32_input = float32_input
        self.predictor = tl2cgen.Predictor(str(lib), nthread=threads)

    def predict(self, X) -> np.ndarray:
        import tl2cgen

        X = np.asarray(X)
        if self.float32_input:
            X = X.astype(np.float32)
        X = np.ascontiguousarray(X, dtype=np.float64)
        return np.asarray(self.predictor.predict(tl2cgen.DMatrix(X)), dtype=np.float64).reshape(len(X), -1)[:, 0]
