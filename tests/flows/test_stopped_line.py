"""The one line a SIGTERM ends a command with (issue 38: before, only Prefect's \"Crash detected\" line)."""

from __future__ import annotations


def test_a_sigterm_says_the_step_and_run_it_stopped():
    """The notes `note_stop` leaves on Prefect's TerminationSignal reach the CLI's Terminated that replaced it."""
    from gpucast.flows.cli.process import Terminated, stopped_line
    from gpucast.warehouse.runs import note_stop

    class TerminationSignal(BaseException):  # Prefect's, by name (warehouse/runs.py STOP_SIGNALS)
        pass

    try:
        try:
            try:
                raise TerminationSignal()
            except BaseException as exc:
                note_stop(exc, "train run train-1")  # the run's lifecycle
                note_stop(exc, "step train")  # the nightly's step
                raise
        except BaseException:
            raise Terminated(143) from None  # Prefect re-sends SIGTERM: the CLI's handler raises in its except
    except Terminated as stop:
        assert stopped_line("nightly", stop) == (
            "gpucast nightly: stopped by SIGTERM at step train (train run train-1: recorded as failed); nothing of it "
            "was published: planners keep the previous copy; rerunning is safe")
    note_stop(err := ValueError("x"), "step train")
    assert not hasattr(err, "__notes__")  # only a stop is noted
