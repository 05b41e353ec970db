"""Process control, in this module only: the exit codes and the one line an error ends with, SIGTERM (its
handler, the deadline, the exit without the interpreter's teardown), the temporary Prefect server around a
flow command, and the console's filter of Prefect's tracebacks for errors answered with a code.
`tests/flows/test_cli_package.py` fails if `os._exit`, `atexit`, `signal` or `sys.exit` appears elsewhere in the
package (but for `__main__.py`'s `sys.exit(main())`, the console script's own wrapper).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import NoReturn

from gpucast.flows import children
from gpucast.flows.cli.options import ML_MODULES, command_settings
from gpucast.flows.environment import configure, prefect_api_in_use
from gpucast.warehouse.errors import damaged_database, environment_error, printable, redact, storage_error

EXIT_CODES = """exit codes:
  0  success
  1  an unexpected error (a traceback follows: please report it)
  2  bad input: a missing file, a bad setting or flag, an SQL error or a statement that writes, a query past
     GPUCAST_SQL_TIMEOUT_S or a result past GPUCAST_SQL_MEMORY
  3  busy: another gpucast writer or run holds the warehouse (wait, or see `gpucast status`)
  4  failed validation: too many rejected rows tonight (rows are in rejected_job_logs)
  5  environment: disk full, permission denied, read-only file system, a file where a folder is needed (or a
     folder where a file is), a missing install extra, or a configured Prefect API (PREFECT_API_URL) that does not
     answer
  6  not published: the warehouse could not be read back whole, or a DuckDB file is damaged (docs/operations.md)
  143  stopped by SIGTERM (the run is recorded as failed; rerunning is safe)"""


class Terminated(SystemExit):
    """SIGTERM (a scheduler's stop, `kill`): unwinds like an error, so runs are recorded as failed,
    locks are released and Prefect's temporary API server is stopped (its atexit hook runs)."""

    def __str__(self) -> str:
        return f"stopped by SIGTERM (exit code {self.code})"


STOP_DEADLINE_S = 8.0  # after SIGTERM, exit by then even if unwinding has not finished (SIGKILL often follows at 10 s)
_deadline_started = threading.Event()


def _start_deadline(signum: int) -> None:
    """Exit `STOP_DEADLINE_S` from now whatever the unwinding is doing (once, however often it is called)."""
    if _deadline_started.is_set():
        return
    _deadline_started.set()
    deadline = threading.Timer(STOP_DEADLINE_S, _stop_now, (128 + signum,))
    deadline.daemon = True
    deadline.start()


def _terminate(signum: int, frame) -> None:
    _start_deadline(signum)
    raise Terminated(128 + signum)


def _deadline_from_arrival() -> Callable[[], None]:
    """Start the deadline when SIGTERM arrives, not when `_terminate` runs. Inside a flow run Prefect handles
    SIGTERM itself (`prefect.utilities.engine`: it raises its own TerminationSignal, reports the runs crashed and
    unwinds every flow) and sends the signal on to `_terminate` only once the outermost flow has ended: ~5 s later
    on two busy cores, so the deadline ran out ~13 s after the signal (tests/reliability/test_sigterm.py). The
    interpreter's C-level handler writes every handled signal's number to the wakeup fd at once, whichever Python
    handler is installed; a thread reads it. Where something else already uses the wakeup fd (an asyncio loop in
    the main thread), it is left alone and the deadline starts in `_terminate`, as before. Returns the watch's stop."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    if previous != -1:
        signal.set_wakeup_fd(previous)
        os.close(read_end)
        os.close(write_end)
        return lambda: None

    def watch() -> None:
        while (got := os.read(read_end, 64)) and signal.SIGTERM not in got:
            pass
        _start_deadline(signal.SIGTERM) if got else os.close(read_end)  # (nothing read: the watch was stopped)

    def stop() -> None:
        signal.set_wakeup_fd(-1)
        os.close(write_end)

    threading.Thread(target=watch, name="gpucast-sigterm-deadline", daemon=True).start()
    return stop


@contextlib.contextmanager
def _sigterm_handled() -> Iterator[None]:
    """SIGTERM's handler and deadline while a command runs (main thread only), then SIGTERM as the caller had it: a
    process going on after `main` (a program calling it, a test session) keeps its own. Left installed, a later SIGTERM
    raised `Terminated` wherever that process was and exited it 8 s after: a capped test run (`timeout 300 pytest`)
    showed one unnamed failure and no summary (docs/testing.md, session 10)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    stop_watch = _deadline_from_arrival()
    try:
        yield
    finally:
        stop_watch()
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _stop_now(code: int) -> None:
    """The unwinding after SIGTERM took too long (closing a local Dask cluster alone took 4-6 s on 2 busy
    cores): exit now. The run stays `running` until the next run marks it crashed, as after a SIGKILL;
    Prefect's server and Dask's workers notice their parent is gone and stop (flows/children.py)."""
    print(f"gpucast: still stopping {STOP_DEADLINE_S:g} s after SIGTERM; exiting now (the next run marks this "
          "one crashed)", file=sys.stderr, flush=True)
    os._exit(code)


def stopped_line(command: str, stop: BaseException) -> str:
    """The one line a SIGTERM ends with: the step and run it stopped (the notes `note_stop` left on the way out,
    on this exception or Prefect's it replaced) and what planners have meanwhile."""
    notes, seen = [], stop
    while seen is not None:
        notes += [n for n in getattr(seen, "__notes__", ()) if n not in notes]
        seen = seen.__context__
    steps = [n for n in notes if n.startswith("step ")]  # the nightly's (outermost last)
    runs = [n for n in notes if not n.startswith("step ")]
    where = " at " + steps[-1] if steps else ""
    if runs:
        where += f" ({', '.join(runs)}: recorded as failed)"
    kept = ("the night was published before it stopped; only its page was not rewritten" if steps == ["step page"]
            else "nothing of it was published: planners keep the previous copy")
    return printable(f"gpucast {command}: stopped by SIGTERM{where}; {kept}; rerunning is safe")


def _exit_stopped(stop: Terminated) -> NoReturn:
    """The end of a SIGTERM: the unwinding has recorded the run, released the locks and closed the Dask
    cluster; the atexit hooks stop Prefect's temporary server. Then exit without the interpreter's
    teardown, which took 3-4 s after a night's imports (torch, Dask) on 2 busy cores: deployments
    send SIGKILL 10 s after SIGTERM (issue 27). A second SIGTERM meanwhile is ignored."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # Prefect's API log handler sends what it holds now, while the temporary server (stopped by an atexit hook)
    # still answers: flushed after it, it waited ~5 s on the stopped server (py-spy, two busy cores)
    logging.shutdown()
    atexit.unregister(logging.shutdown)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(stop.code)


FLOW_COMMANDS = {"ingest", "import", "train", "score", "nightly", "demo", "plan", "demand"}  # the commands that run Prefect flows
NO_SETTINGS = {"simulate"}  # the commands that read no setting (a bad GPUCAST_* variable does not stop them)


class ExpectedErrors(logging.Filter):
    """On the console: drop Prefect's own ERROR record of a failed flow or task run ("Encountered exception
    during execution", "Task run failed with exception") when its error is one `main` answers with a clear
    exit code (2-6) and one line, so the person sees that line and no traceback. The run's state keeps the
    error (`gpucast status`, the Prefect UI), and Prefect's API handler, on the run loggers themselves, has
    already sent the record before it reaches the console. An unexpected error (exit 1) keeps its traceback."""

    LOGGERS = ("prefect.flow_runs", "prefect.task_runs")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name not in self.LOGGERS or not record.exc_info or record.exc_info[1] is None:
            return True
        return _exit_code(record.exc_info[1])[0] == 1


class RedactedUris(logging.Filter):
    """A record's message and traceback with the secrets of any URI in them masked (`redact`): Prefect's own lines
    quote the API's address ("View at http://user:password@host/runs/..." is derived from PREFECT_API_URL), and a
    flow's printed lines or errors may quote a tracking URI. Changes the record itself, so every handler after it
    sees it masked (a formatter prints `exc_text` when it is set)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if (masked := redact(message)) != message:
            record.msg, record.args = masked, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            shown = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            if (masked := redact(shown)) != shown:
                record.exc_text = masked
        return True


REDACTED_LOGGERS = ("", "prefect.flow_runs", "prefect.task_runs", "prefect.extra")  # the console's; Prefect's API's


def quiet_expected_errors() -> None:
    """Install `ExpectedErrors` on the root logger's handlers (Prefect's console handler lives there; the run
    loggers propagate to it), and `RedactedUris` there and on the run loggers' handlers (Prefect's API handler).
    Sets up Prefect's logging first (as its first flow would); idempotent."""
    from prefect.logging.configuration import ensure_logging_setup

    ensure_logging_setup()

    for name in REDACTED_LOGGERS:
        for handler in logging.getLogger(name).handlers:
            wanted = (RedactedUris, ExpectedErrors) if name == "" else (RedactedUris,)
            for kind in wanted:
                if not any(isinstance(f, kind) for f in handler.filters):
                    handler.addFilter(kind())


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed command: its settings (the environment, read here once, with the command's flags on top), its
    flow's temporary server, SIGTERM's handler, and the exit code its outcome gets. The handler gets the settings
    and passes each flow the concerns it takes. `main` ends what `before_prefect` began (`after_command`)."""
    server, settings = None, None
    try:
        if refused := getattr(args, "refused", None):  # a flag this command refuses (parser.py `_Refused`)
            raise ValueError(refused)
        if args.command not in NO_SETTINGS:
            settings = command_settings(args)  # a bad variable or flag: one line naming it, exit 2
        configure(settings.storage.home if settings else None)  # Prefect's defaults, before any flow imports Prefect
        if args.command in FLOW_COMMANDS:  # the data directory's folders, before a server or a flow starts
            settings.ensure()
        if early := getattr(args, "before_prefect", None):  # what a command starts beside Prefect's import and server
            early(args)  # (`gpucast ingest`: its first file's reading and GX's judge, pipeline.py `_ingest_early`)
    except Exception as exc:  # noqa: BLE001  (a file where a folder goes: one line, exit 5)
        return _answer(args.command, exc)
    if args.command in FLOW_COMMANDS or getattr(args, "flows", None):  # (the others never call Prefect's API)
        if (api := prefect_api_in_use()) is None:  # start the temporary server now: it starts while we import
            server = children.start()
        elif args.command in FLOW_COMMANDS and (problem := children.api_problem(api, settings.cluster.prefect_api_check_s)):
            # it must answer first, within the setting's bound
            # (`status --flows` is not asked: it prints the warehouse's part whatever the API does, then one line
            # saying the API did not answer, flows/status.py)
            print(f"gpucast {args.command}: {printable(problem)}; start it (`prefect server start`) or point "
                  "PREFECT_API_URL at one that runs, or unset it to run with a temporary local server", file=sys.stderr)
            return 5
        quiet_expected_errors()
    with _sigterm_handled():
        try:
            with children.serving(server):
                return args.func(args, settings)
        except Terminated as stop:
            print(stopped_line(args.command, stop), file=sys.stderr, flush=True)
            _exit_stopped(stop)
        except Exception as exc:  # noqa: BLE001  (the last line a person sees must say what failed)
            return _answer(args.command, exc)


def _answer(command: str, exc: Exception) -> int:
    """The exit code of a command's error, after its one line; an error nobody foresaw is raised (its traceback)."""
    code, message = _exit_code(exc)
    if code == 1:
        raise exc
    print(f"gpucast {command}: {printable(message)}", file=sys.stderr)  # store names may hold controls
    _release_frames(exc)
    return code


def _release_frames(exc: BaseException) -> None:
    """Clear the local variables of the frames an answered error's traceback holds, and its causes'. Prefect keeps a
    failed run's exception until the interpreter exits (the run's final state, in the context its event-loop thread
    keeps for its shutdown calls), and with it those frames: the DuckDB connections in them were alive at exit, and
    DuckDB's bindings (nanobind) printed ~42 "nanobind: leaked" lines after the error's one line (issue 48). Nothing
    reads the frames once the line is printed: Prefect recorded the traceback when the run failed."""
    pending, seen = [exc], set()
    while pending:
        err = pending.pop()
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        traceback.clear_frames(err.__traceback__)
        pending += [err.__cause__, err.__context__]


def _exit_code(exc: BaseException) -> tuple[int, str]:
    """(exit code, the one line to print) for an error; 1 for one nobody foresaw (re-raised)."""
    from gpucast.flows.errors import SourceUnavailable, ValidationFailed
    from gpucast.warehouse.db import WarehouseBusy
    from gpucast.warehouse.publish import PublishFailed
    from gpucast.warehouse.queries import SqlTimeout, SqlTooLarge

    if isinstance(exc, ModuleNotFoundError) and exc.name and exc.name.split(".")[0] == "mlflow":
        return 5, f"this command needs the `mlflow` extra ({exc.name} is not installed): pip install 'gpucast[mlflow]'"
    if isinstance(exc, ModuleNotFoundError) and exc.name and exc.name.split(".")[0] in ML_MODULES:
        return 5, (f"this command needs the `ml` extra ({exc.name} is not installed): "
                   "pip install 'gpucast[ml]' (or `make setup` in a checkout)")
    if environment := environment_error(exc):
        return 5, environment
    for kind, code in ((ValidationFailed, 4), (WarehouseBusy, 3), (PublishFailed, 6), (SourceUnavailable, 5),
                       ((FileNotFoundError, ValueError, SqlTimeout, SqlTooLarge), 2)):
        if isinstance(exc, kind):
            return code, str(exc)
    for check, code in ((damaged_database, 6), (storage_error, 2)):  # (after PublishFailed, whose line names the
        if line := check(exc):  # warehouse); then a failing query, a constraint the input broke
            return code, line
    return 1, ""
