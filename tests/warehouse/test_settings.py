"""Numeric settings from the environment."""

from __future__ import annotations

import pytest

from gpucast.warehouse.settings import env_number


def test_unset_or_empty_gives_the_default(monkeypatch):
    monkeypatch.delenv("GPUCAST_TEST_NUMBER", raising=False)
    assert env_number("GPUCAST_TEST_NUMBER", 20.0) == 20.0
    monkeypatch.setenv("GPUCAST_TEST_NUMBER", " ")
    assert env_number("GPUCAST_TEST_NUMBER", 7, int) == 7


def test_a_value_is_parsed_as_its_kind(monkeypatch):
    monkeypatch.setenv("GPUCAST_TEST_NUMBER", "2.5")
    assert env_number("GPUCAST_TEST_NUMBER", 20.0) == 2.5
    monkeypatch.setenv("GPUCAST_TEST_NUMBER", "3")
    assert env_number("GPUCAST_TEST_NUMBER", 7, int) == 3


@pytest.mark.parametrize(("raw", "kind", "what"), [("twenty", float, "a number"), ("2.5", int, "a whole number")])
def test_a_bad_value_names_the_variable(monkeypatch, raw, kind, what):
    monkeypatch.setenv("GPUCAST_TEST_NUMBER", raw)
    with pytest.raises(ValueError, match=f"GPUCAST_TEST_NUMBER='{raw}' is not {what}"):
        env_number("GPUCAST_TEST_NUMBER", 1, kind)
