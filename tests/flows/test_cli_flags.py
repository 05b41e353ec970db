"""The command line's flags: each named as its setting, older spellings hidden and still answering, one meaning per
name, and the command's settings built once, where it starts (issue 49, items 3 and 5). Parsing only: fast."""

from __future__ import annotations

import argparse
import re
import sys

import pytest

from gpucast.flows.cli import main
from gpucast.flows.cli.options import FLAG_ALIASES, SETTING_FLAGS, SPLIT_FLAGS, command_settings, dest
from gpucast.flows.cli.parser import build_parser
from gpucast.flows.settings import SPEC_BY_FIELD, SettingsError


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by its name (`import slurm` as 'import slurm')."""
    found = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}".strip())
        if prefix:
            found[prefix] = parser

    walk(build_parser(), "")
    return found


def shown_flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """flag -> dest, for the flags `--help` shows."""
    return {o: a.dest for a in parser._actions if a.help != argparse.SUPPRESS for o in a.option_strings}


def test_every_flag_of_a_setting_is_named_as_its_setting():
    """A shown flag that sets a setting (or the train option a setting defaults) is `--` + the setting's name."""
    seen = set()
    for name, parser in commands().items():
        for flag, field in shown_flags(parser).items():
            if field in SPEC_BY_FIELD:
                assert flag == "--" + field.replace("_", "-"), (name, flag, field)
                seen.add(flag)
    assert seen >= set(SETTING_FLAGS) and "--train-runner" in seen and "--plan-days" in seen


def test_older_spellings_are_hidden_and_still_answer():
    parser = build_parser()
    assert parser.parse_args(["train", "--runner", "local"]).train_runner == "local"
    assert parser.parse_args(["train", "--budget-minutes", "5"]).night_budget_minutes == 5
    assert parser.parse_args(["plan", "--horizon-days", "3"]).plan_days == 3
    assert parser.parse_args(["demand", "--days", "3"]).plan_days == 3
    assert parser.parse_args(["backtest", "--window-days", "3"]).backtest_days == 3
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "--runner", "ray"])  # the alias keeps the flag's choices
    for name, sub in commands().items():
        shown = shown_flags(sub)
        hidden = {o for a in sub._actions if a.help == argparse.SUPPRESS for o in a.option_strings}
        olds = {old for olds in FLAG_ALIASES.values() for old in olds} | set(SPLIT_FLAGS)
        assert not olds & set(shown), name
        for flag, aliases in FLAG_ALIASES.items():
            if flag in shown:
                assert set(aliases) <= hidden, (name, flag)


def settings_of(*argv: str):
    return command_settings(build_parser().parse_args(list(argv))).planning


@pytest.mark.parametrize(("argv", "oom", "default"), [
    (["score", "--gpu-mem-gb", "40"], 40.0, 80.0),  # score: the OOM threshold only
    (["plan", "--gpu-mem-gb", "40"], 80.0, 40.0),  # plan: the plan's default GPU only
    (["nightly", "--gpu-mem-gb", "40"], 40.0, 40.0),  # the nightly scores and plans: both, as before
    (["nightly", "--gpu-mem-gb", "40", "--oom-gpu-mem-gb", "24"], 24.0, 40.0),  # the new name wins
    (["score", "--oom-gpu-mem-gb", "24"], 24.0, 80.0),
    (["plan", "--default-gpu-mem-gb", "24"], 80.0, 24.0),
])
def test_gpu_mem_gb_sets_what_it_set_on_each_command(argv, oom, default, monkeypatch):
    monkeypatch.delenv("GPUCAST_GPU_MEM_GB", raising=False)
    monkeypatch.delenv("GPUCAST_OOM_GPU_MEM_GB", raising=False)
    monkeypatch.delenv("GPUCAST_DEFAULT_GPU_MEM_GB", raising=False)
    planning = settings_of(*argv)
    assert (planning.oom_gpu_mem_gb, planning.default_gpu_mem_gb) == (oom, default)


def test_a_bad_flag_names_the_spelling_given():
    with pytest.raises(SettingsError, match=re.escape("--gpu-mem-gb=-1.0 is not a finite number > 0")):
        settings_of("score", "--gpu-mem-gb", "-1")
    with pytest.raises(SettingsError, match=re.escape("--plan-days=0 is not a whole number >= 1")):
        settings_of("plan", "--horizon-days", "0")


def test_the_command_reads_the_environment_once(monkeypatch, home, capsys):
    """`gpucast sql` (no flow, no server): the settings are built once, before the handler, which gets them; a read
    command builds them as `ReadSettings` (no training concern, no pydantic: issue 52 item 4), never as `Settings`."""
    from gpucast.flows.settings import ReadSettings, Settings

    calls = []

    def counting(kind):
        real = kind.from_env.__func__

        def counted(cls, environ=None):
            calls.append(kind.__name__)
            return real(cls, environ)
        monkeypatch.setattr(kind, "from_env", classmethod(counted))

    counting(Settings)
    counting(ReadSettings)
    assert main(["sql", "SELECT 1"]) == 2  # no warehouse yet: one line, exit 2
    assert calls == ["ReadSettings"] and "run `gpucast ingest`" in capsys.readouterr().err


def test_demo_refuses_no_train_with_one_line(capsys, monkeypatch):
    """`gpucast demo --no-train` was taken and ignored: refused now, before anything runs (no setting is read: a bad
    variable does not hide the refusal)."""
    monkeypatch.setenv("GPUCAST_SQL_THREADS", "0")
    assert main(["demo", "--no-train"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpucast demo: --no-train: the demo trains on its first night")
    assert "gpucast nightly --no-train" in err
    assert build_parser().parse_args(["nightly", "--no-train"]).no_train is True


def test_every_setting_flag_is_a_setting():
    assert all(dest(flag) == field and field in SPEC_BY_FIELD for flag, field in SETTING_FLAGS.items())


@pytest.mark.parametrize("lazy", [True, False])
def test_an_unknown_flag_is_the_commands_error_with_its_usage(lazy, capsys):
    """`gpucast train --modles x` printed the top level's usage (every command, no flag): the command's now (newcomer
    22's S3), exit 2 as argparse's errors are."""
    with pytest.raises(SystemExit) as stop:
        build_parser(lazy=lazy).parse_args(["train", "--modles", "x"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("usage: gpucast train [-h]") and "--models MODELS" in err
    assert err.rstrip().endswith("gpucast train: error: unrecognized arguments: --modles x")
    assert build_parser(lazy=lazy).parse_args(["train", "--models", "x"]).models == "x"  # a known flag as before


def test_demo_says_how_to_put_gpucast_on_path_when_it_is_not(tmp_path, monkeypatch):
    """`make demo` runs the venv's gpucast without activating it: "Where to look next" lists bare `gpucast ...`
    lines, so it names the activate script (newcomer 25); on PATH, it says nothing more."""
    from gpucast.flows.cli import pipeline

    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "activate").write_text("")
    (bin_dir / "gpucast").write_text("")
    monkeypatch.setattr(sys, "argv", [str(bin_dir / "gpucast"), "demo"])
    monkeypatch.setenv("PATH", str(tmp_path / "elsewhere"))
    assert pipeline._on_path_hint() == f" (first `source {bin_dir / 'activate'}`, which puts `gpucast` on PATH)"
    (bin_dir / "gpucast").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert pipeline._on_path_hint() == ""
