"""`gpucast demo`: two simulated nights, so everything a new user should see has data.

The demo writes a GPU inventory for the simulator's queues (`$GPUCAST_HOME/inventory.yaml`) unless
one is there or GPUCAST_INVENTORY names one. Night 1 ingests the simulated history (8 weeks with a
weekly rhythm at a small daily volume, so the demand forecast has weekly seasonality to learn) and
trains, scores and publishes as of its end.
Night 2 ingests the next day, in which the simulator starts (and finishes) a share of night 1's
pending jobs: the backtest then compares them with night 1's forecasts, and the champion gate
weighs tonight's challengers against that evidence. Each night stamps its forecasts with its own
simulated time (`as_of`), so "forecast before the job started" holds as it would have.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from importlib import resources

from gpucast.flows.nightly import nightly
from gpucast.flows.nightly_steps import NIGHTLY_CHAIN
from gpucast.flows.settings import Settings
from gpucast.records.results import NightResult
from gpucast.tasks.learn.options import TrainOptions
from gpucast.tasks.simulate import SimConfig, write_logs


def run_demo(settings: Settings, sim: SimConfig, options: TrainOptions, say: Callable[[str], None] = print) -> list[NightResult]:
    """Simulate `sim.days` + 1 days; run the nightly flow after day `sim.days` and after the day after."""
    settings = settings.ensure()
    inventory = settings.storage.home / "inventory.yaml"
    if not settings.planning.inventory and not inventory.exists():  # the simulator's queues and the GPUs they own
        inventory.write_text(resources.files("gpucast.records").joinpath("reference/demo_inventory.yaml").read_text())
        say(f"GPU inventory for the simulator's queues: {inventory} (edit it, or set GPUCAST_INVENTORY)")
    source = settings.storage.home / "demo-source" / f"seed{sim.seed}"
    shutil.rmtree(source, ignore_errors=True)
    days = write_logs(source, SimConfig(**{**sim.__dict__, "days": sim.days + 1}))
    inbox = settings.storage.inbox_dir / f"demo-seed{sim.seed}"
    inbox.mkdir(parents=True, exist_ok=True)
    results = []
    for night, files in ((1, days[:-1]), (2, days[-1:])):
        for f in files:
            shutil.copy2(f, inbox / f.name)
        as_of = datetime.combine(sim.start, datetime.min.time(), tzinfo=UTC) + timedelta(days=sim.days + night - 1)
        say(f"[night {night}/2] {len(files)} day(s) of simulated logs in {inbox}; nightly flow as of "
            f"{as_of:%Y-%m-%d %H:%M} UTC: {NIGHTLY_CHAIN}")
        results.append(nightly(options=options, settings=settings, as_of=as_of))
    return results
