"""Package discovery for gpucast (metadata lives in pyproject.toml).

The design card fixes the top level (`flows/`, `tasks/`, `warehouse/`, `expectations/`), beside which `records/`
holds the types the layers share (results, records, inventory, catalogue, config reading); each folder is mapped
onto one importable namespace, `gpucast.<folder>`. Every package below them is
discovered here, data folders included, so a new subpackage (e.g. `tasks/learn/models/`) can never be
left out of the wheel by a hand-written list (tests/test_packaging.py builds and installs it).
"""

from setuptools import find_namespace_packages, setup

LAYERS = ("flows", "tasks", "warehouse", "expectations", "records")
DATA_FILES = ["*.sql", "*.json", "*.csv", "*.yaml", "*.html", "*.css", "*.j2"]


def discover() -> tuple[list[str], dict[str, str]]:
    packages, package_dir = [], {}
    for layer in LAYERS:
        packages.append(f"gpucast.{layer}")
        package_dir[f"gpucast.{layer}"] = layer
        for sub in find_namespace_packages(where=layer, exclude=["*__pycache__*"]):
            packages.append(f"gpucast.{layer}.{sub}")
    return packages, package_dir


packages, package_dir = discover()
setup(packages=packages, package_dir=package_dir, package_data={p: DATA_FILES for p in packages})
