"""Accuracy on real, named architectures (issue 26): the analytic prior's own error, and the models
trained on the measured set forecasting the reference set and real H100 runs.

Two evaluation sets, neither used for training:

* the reference set `tests/data/reference_archs.csv` (named torchvision / transformers architectures x 3
  batch sizes x FP32 / mixed precision, traced by the zoo with the tooling of the measured set;
  truth = `peak_gpu_mem_gb`, the traced tensor peak + a seeded CUDA-context draw);
* the real H100 runs `tests/data/gpu_archs_h100.csv` (truth = `device_used_gb`, what the GPU reports).

`--prior-error` prints the analytic prior's error per family (MAPE and median ratio of `prior_mem_gb` to
the measured peak, and of `prior_gflop_per_iter` to the traced FLOPs) on the reference set, with the
`model_type` as logged and with the architecture's family name as the model type (`VGG`, `EfficientNet`,
...: what sites log), and per model type on the measured set.

    .venv/bin/python tests/benchmarks/real_archs.py --prior-error
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

from gpucast.expectations import contract as c
from gpucast.tasks.learn import priors

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script: make `tests` importable
from tests import measured  # noqa: E402

REFERENCE = ROOT / "tests" / "data" / "reference_archs.csv"
GPU_RUNS = ROOT / "tests" / "data" / "gpu_archs_h100.csv"
FAMILY = "arch_family"
# The name a site would log for an architecture family (model_type), when it logs the family's name.
FAMILY_NAMES = {"alexnet": "AlexNet", "convnext": "ConvNeXt", "densenet": "DenseNet", "efficientnet": "EfficientNet",
                "inception": "Inception", "mnasnet": "MNASNet", "mobilenet": "MobileNet", "regnet": "RegNet",
                "resnet": "ResNet", "resnext": "ResNeXt", "shufflenet": "ShuffleNet", "squeezenet": "SqueezeNet",
                "vgg": "VGG", "wide_resnet": "WideResNet", "albert": "ALBERT", "bart": "BART", "bert": "BERT",
                "distilbert": "DistilBERT", "gpt2": "GPT-2", "maxvit": "MaxViT", "opt": "OPT", "roberta": "RoBERTa",
                "swin": "Swin", "t5": "T5", "vit": "ViT", "xlnet": "XLNet"}


def with_hardware(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with the contract's hardware columns, null where it lacks them (the sets log no hardware)."""
    missing = [pl.lit(None, dtype=pl.String if n == c.GPU_TYPE else pl.Float64).alias(n)
               for n in c.HARDWARE if n not in df.columns]
    return df.with_columns(missing) if missing else df


def load_reference(path: Path = REFERENCE, family_names: bool = False) -> pl.DataFrame:
    """The reference set's rows; `family_names`: the model type is the family's name (`FAMILY_NAMES`)."""
    if not path.exists():
        raise SystemExit(f"no reference set at {path} (tests/data/make_reference_archs.py makes it)")
    df = with_hardware(pl.read_csv(path).with_columns(pl.col(c.REGULARIZATION).cast(pl.Boolean),
                                                      pl.col(c.DATA_AUGMENTATION).cast(pl.Boolean)))
    if family_names:
        df = df.with_columns(pl.col(FAMILY).replace_strict(FAMILY_NAMES, default=pl.col(c.MODEL_TYPE)).alias(c.MODEL_TYPE))
    return df


def prior_error(df: pl.DataFrame, by: str) -> pl.DataFrame:
    """Per value of `by` (and `all`): rows, MAPE (%) and median ratio of the analytic prior's memory to
    `peak_gpu_mem_gb` and of its FLOPs per step to `train_gflop_per_iter`."""
    p = priors.compute(with_hardware(df))
    d = df.select(pl.col(by).cast(pl.String), mem=p["prior_mem_gb"] / df[c.PEAK_GPU_MEM_GB],
                  flop=p["prior_gflop_per_iter"] / df[priors.GFLOP_PER_ITERATION])
    aggs = [pl.len().alias("n"), ((pl.col("mem") - 1).abs().mean() * 100).alias("mem MAPE %"),
            pl.col("mem").median().alias("mem ratio"), ((pl.col("flop") - 1).abs().mean() * 100).alias("FLOP MAPE %"),
            pl.col("flop").median().alias("FLOP ratio")]
    table = d.group_by(by).agg(aggs).sort(by)
    return pl.concat([table, d.select(pl.lit("all").alias(by), *aggs)])


def print_table(title: str, table: pl.DataFrame) -> None:
    print(f"\n{title}")
    key = table.columns[0]
    print(f"  {key:14s}" + "".join(f" {col:>11s}" for col in table.columns[1:]))
    for row in table.iter_rows():
        cells = "".join(f" {v:11d}" if isinstance(v, int) else f" {v:11.2f}" for v in row[1:])
        print(f"  {row[0]:14s}" + cells)


def print_prior_error(reference: Path) -> None:
    print_table("Reference set, model_type as logged (CNN / ResNet / Transformer):",
                prior_error(load_reference(reference), FAMILY))
    print_table("Reference set, model_type = the family's name (VGG, EfficientNet, ...):",
                prior_error(load_reference(reference, family_names=True), FAMILY))
    print_table("Measured set, per model type:", prior_error(measured.load(), c.MODEL_TYPE))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prior-error", action="store_true", help="the analytic prior's own error per family")
    ap.add_argument("--reference", type=Path, default=REFERENCE, help="the reference set (CSV)")
    args = ap.parse_args(argv)
    if args.prior_error:
        print_prior_error(args.reference)


if __name__ == "__main__":
    main()
