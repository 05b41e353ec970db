"""The training report: the seed's Table 3 layout (models x MSE/RMSE/MAE/MAPE/R², per target),
a bar chart of those metrics per model and a predicted-vs-actual plot of the Transformer-BiGRU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from gpucast.tasks.models.registry import NN

METRICS = ("mse", "rmse", "mae", "mape", "r2")


def _fmt(v: float | None, spread: float | None = None) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "–"
    text = f"{v:.4g}"
    return text + (f" ± {spread:.2g}" if spread is not None and not np.isnan(spread) else "")


def markdown(run_id: str, summary: pl.DataFrame, champions: pl.DataFrame) -> str:
    """`summary`: target, model, split, metric means and `<metric>_std`, repeats, train_seconds."""
    lines = [f"# Training run {run_id}", "",
             "Test-set metrics, mean ± standard deviation over repeated 70/30 holdouts; MAPE in %. "
             "The champion (**bold**) is chosen on validation rows, never on test rows.", ""]
    for champ in champions.iter_rows(named=True):
        target = champ["target"]
        lines.append(f"## {target}")
        if champ["skipped_reason"]:
            lines += [f"Skipped: {champ['skipped_reason']}", ""]
            continue
        rows = summary.filter((pl.col("target") == target) & (pl.col("split") == "test")).sort("rmse")
        lines.append(f"{champ['labelled_rows']:,} labelled jobs; champion: **{champ['model']}**")
        lines.append("")
        lines.append("| model | MSE | RMSE | MAE | MAPE % | R² | train s | repeats |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for r in rows.iter_rows(named=True):
            name = f"**{r['model']}**" if r["model"] == champ["model"] else r["model"]
            cells = [_fmt(r[m], r.get(f"{m}_std")) for m in METRICS]
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['train_seconds']:.1f} | {r['repeats']} |")
        lines.append("")
    return "\n".join(lines)


def bar_chart(summary: pl.DataFrame, target: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary.filter((pl.col("target") == target) & (pl.col("split") == "test")).sort("rmse")
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 4))
    for ax, m in zip(axes, METRICS, strict=True):
        ax.barh(rows["model"].to_list(), rows[m].to_list(), xerr=rows[f"{m}_std"].fill_null(0).to_list())
        ax.set_title(m.upper() + (" %" if m == "mape" else ""))
        ax.invert_yaxis()
    fig.suptitle(f"{target}: test metrics per model (mean ± sd over repeats)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def predicted_vs_actual(predictions: pl.DataFrame, target: str, path: Path, model: str = NN) -> Path | None:
    if model not in predictions.columns:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    actual, pred = predictions["actual"].to_numpy(), predictions[model].to_numpy()
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.scatter(actual, pred, s=6, alpha=0.4)
    lo, hi = float(min(actual.min(), pred.min())), float(max(actual.max(), pred.max()))
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"actual {target}")
    ax.set_ylabel(f"predicted {target}")
    ax.set_title(f"{model} on the test rows")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
