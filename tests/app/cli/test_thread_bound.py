"""``--threads 100000`` / ``[detector] threads = 100000`` hung inside onnxruntime's session creation
(one OS thread each; 8192 took more than 30 s): refused in one line at every door, up to 256 kept."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_agent.app.cli.argtypes import thread_count
from edge_agent.app.cli.main import main
from edge_agent.core.config.schema import parse_config
from edge_agent.core.runtime.providers import CPU, MAX_THREADS, plan_providers
from edge_agent.errors import ConfigError, ProviderError


@given(st.integers(min_value=-(2**40), max_value=2**40))
def test_the_flag_takes_1_to_256_and_refuses_the_rest_with_the_range(n: int) -> None:
    if 1 <= n <= MAX_THREADS:
        assert thread_count(str(n)) == n
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=r"expected a whole number from 1 to 256$"):
            thread_count(str(n))


def test_infer_refuses_100000_threads_before_loading_anything(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ex:
        main(["infer", "--threads", "100000"])
    assert ex.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "edge-agent infer: error: argument --threads: 100000 is out of range: expected a whole number from 1 to 256"
    )


@pytest.mark.parametrize(("n", "ok"), [(1, True), (256, True), (257, False), (100000, False)])
def test_config_check_refuses_more_threads_than_the_bound(n: int, ok: bool) -> None:
    text = f"[detector]\nthreads = {n}\n"
    if ok:
        assert parse_config(text, "c.toml").detector.threads == n
        return
    with pytest.raises(ConfigError) as err:
        parse_config(text, "c.toml")
    assert str(err.value) == f"c.toml: detector.threads = {n}: Input should be less than or equal to 256"


def test_the_planner_refuses_it_too_for_callers_past_both_checks() -> None:
    assert plan_providers("generic-x86", [CPU], 2, threads=256).intra_op_threads == 256
    with pytest.raises(ProviderError, match=r"^threads = 100000: expected 1 to 256 \(one OS thread each\)$"):
        plan_providers("generic-x86", [CPU], 2, threads=100000)
