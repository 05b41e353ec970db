"""`gpucast`: the command line for data engineers, planners and on-call staff.

The package only parses, calls and prints; the environment is read after parsing, once (`process.run_command` builds
the command's settings with `options.command_settings` and hands them to the handler), so `--help` works whatever it
holds, and a bad value ends with its variable's name. Where things are (one module per concern, each at most 300 lines):

    parser.py    the argparse tree: commands, flags, defaults (from the settings table and the training options); a
                 command's flags and handler module are loaded when it runs, so each command imports what it uses
    flags.py     the flags several commands share (a setting's flag and its older spellings, the train options')
    options.py   what the command groups share: the command's settings (environment + flags) and TrainOptions, the `ml` extra's check
    pipeline.py  the data path's commands: simulate, ingest, import slurm|mlflow, train, score, nightly, demo
    planning.py  what planners act on: plan, demand, site
    query.py     the read commands: status, sql, backtest, report
    ops.py       on-call operations on the published copy: restore
    process.py   process control, and nowhere else: exit codes and the one-line errors, SIGTERM, the temporary
                 Prefect server around a flow command, Prefect's console tracebacks (tests/flows/test_cli_package.py)
    __main__.py  `python -m gpucast.flows.cli`, as the console script `gpucast` (pyproject.toml)

A new command: its handler in the group's module (calls a flow or a query, prints, returns 0), its row in
`parser.py` `COMMANDS` with the function adding its flags (which imports the handler); an error it should answer
with a code other than 1: `process.py` `_exit_code`.
"""

from __future__ import annotations

from gpucast.flows.cli.parser import build_parser
from gpucast.flows.cli.process import run_command

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    """The console script `gpucast`: parse the command line, then run the command (`process.py`). What the command
    began before Prefect (`before_prefect`) is ended by its `after_command` on every way out: an answer, exit 5, Ctrl-C
    during Prefect's start (review 72 S1-1: ingest's early reading, left inside DuckDB or Polars at exit, aborted it)."""
    args = build_parser(lazy=True).parse_args(argv)
    try:
        return run_command(args)
    finally:
        if done := getattr(args, "after_command", None):
            done(args)
