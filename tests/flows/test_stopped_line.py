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


def test_a_command_called_in_process_leaves_sigterm_as_it_found_it(home):
    """`main` in a process that goes on after it (a test session, a program calling it): SIGTERM's handler, the
    wakeup fd and the deadline's watch are the caller's again when the command returns. Before, the CLI's handler
    stayed: a capped test run's SIGTERM (`timeout 300 pytest ...`) became a failure of whichever test was running,
    and the process exited 8 s later without the run's summary (docs/testing.md, session 10)."""
    import signal
    import threading
    import time

    from gpucast.flows.cli import main

    def callers(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, callers)
    wakeup_fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(wakeup_fd)
    try:
        assert main(["sql", "SELECT 1"]) == 2  # no warehouse yet: the command ran, under its own handler, and returned
        assert signal.getsignal(signal.SIGTERM) is callers
        assert signal.set_wakeup_fd(wakeup_fd) == wakeup_fd
        deadline = time.monotonic() + 30
        while "gpucast-sigterm-deadline" in {t.name for t in threading.enumerate()}:
            assert time.monotonic() < deadline, "the SIGTERM deadline's watch outlived the command"
            time.sleep(0.05)
    finally:
        signal.signal(signal.SIGTERM, previous)
