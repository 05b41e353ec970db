"""A registry model's unfitted estimator for one target, with what the night's feature encoder and training
options say about it (`model`), and the champion's (`champion`: a blend where the champion is one). Used by the
night's fits (`train.py`) and by the evidence refits (`evidence.py`)."""

from __future__ import annotations

from dataclasses import replace

from gpucast.tasks.learn import blend
from gpucast.tasks.learn.features import FEATURE_SETS, FeatureEncoder
from gpucast.tasks.learn.models import registry
from gpucast.tasks.learn.options import TrainOptions


def model(name: str, encoder: FeatureEncoder, target: str, options: TrainOptions, build: registry.Build):
    """Registry model `name` for `target`, with what the encoder and the options say about it on top of
    `build` (seed, threads, progress, the fit's time budget)."""
    fs = FEATURE_SETS[options.features]
    base = (fs.prior_column(target) if name == registry.PRIOR else None if name in registry.NO_BASE
            else fs.base_column(target))
    return registry.build(name, replace(build, categorical=encoder.categorical, base=base,
                                        cardinalities=encoder.cardinalities, preset=options.preset, device=options.device,
                                        epochs=options.epochs, max_seconds=build.max_seconds or options.nn_max_seconds))


def champion(name: str, encoder: FeatureEncoder, target: str, options: TrainOptions, build: registry.Build,
              mix: blend.Candidate | None):
    """The champion's unfitted estimator: the blend of `mix`'s members and weights (`blend.Blend`), or `model`'s."""
    if name == blend.NAME and mix is not None:
        return blend.Blend({m: model(m, encoder, target, options, build) for m in mix.members},
                           dict(zip(mix.members, mix.weights, strict=True)))
    return model(name, encoder, target, options, build)
