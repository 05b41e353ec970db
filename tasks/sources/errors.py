"""The sources' own errors: a source that cannot be read at all (its tool missing or failing, its server not
answering). The command line maps `SourceUnavailable` to exit code 5 (`flows/cli/process.py`, through
`flows/errors.py`)."""

from __future__ import annotations


class SourceUnavailable(RuntimeError):
    """A source's own tool is missing or failing (`sacct` not installed, slurmdbd unreachable): exit code 5."""


class TrackerUnreachable(Exception):
    """MLflow's client failed to read the tracking store at `tracking_uri` (`cause`: what it raised). The flow says
    so as a `SourceUnavailable`, the error's text masked (`flows/imports.py`)."""

    def __init__(self, tracking_uri: str, cause: Exception):
        super().__init__(tracking_uri, cause)
        self.tracking_uri, self.cause = tracking_uri, cause
