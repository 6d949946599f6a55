"""The dispatcher's own promises, in process (issue 36): what a flag given before or after the
command means, which help lines show their default, the page a bare subcommand gets, the exit
status and the one line of every way a command can end, and where the demo models are found."""

from __future__ import annotations

import argparse
import io
import os
import stat
import sys
from pathlib import Path

import pytest

from edge_agent import __version__
from edge_agent.app.cli import assets
from edge_agent.app.cli import main as cli
from edge_agent.app.cli.main import HelpFormatter, _all_subparsers, _describe_from_help, build_parser
from edge_agent.app.workbench import inspect_cmd
from edge_agent.errors import ModelError


def test_a_flag_before_the_command_is_not_reset_by_the_subcommand() -> None:
    args = build_parser().parse_args(["-v", "queue", "stats"])
    assert (args.verbose, args.quiet) == (1, False)
    args = build_parser().parse_args(["queue", "stats"])
    assert (args.verbose, args.quiet) == (0, False)
    args = build_parser().parse_args(["queue", "stats", "-q"])
    assert (args.verbose, args.quiet) == (0, True)
    args = build_parser().parse_args(["-q", "queue", "stats"])
    assert (args.verbose, args.quiet) == (0, True)


def test_the_usage_line_names_a_command_not_a_list_of_sixteen() -> None:
    usage = " ".join(build_parser().format_usage().split())
    assert usage.startswith("usage: edge-agent ") and usage.endswith(" COMMAND ...")
    assert "{infer," not in usage


def test_version_names_the_program_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        build_parser().parse_args(["--version"])
    assert ei.value.code == 0
    assert capsys.readouterr().out == f"edge-agent {__version__}\n"
    assert build_parser().prog == "edge-agent"


def _page(build: object) -> str:
    p = argparse.ArgumentParser(prog="x", description="Uses ``literal`` text.", formatter_class=HelpFormatter)
    assert callable(build)
    build(p)
    return " ".join(p.format_help().split())


def test_only_a_real_default_not_already_stated_is_shown() -> None:
    def build(p: argparse.ArgumentParser) -> None:
        p.add_argument("--a", default=5, help="alpha")
        p.add_argument("--b", default=None, help="beta")
        p.add_argument("--c", action="store_true", help="gamma")
        p.add_argument("--d", nargs="*", default=[], help="delta")
        p.add_argument("--e", default=3, help="eps, Default 3")
        p.add_argument("--f", default=argparse.SUPPRESS, help="phi")
        p.add_argument("--g", default=0, help="the ``g`` knob")
        p.add_argument("where", nargs="?", default="here", help="place")
        p.add_argument("extra", nargs="*", default=["a"], help="more")
        p.add_argument("what", default="thing", help="item")

    page = _page(build)
    assert "alpha (default: 5)" in page
    assert "beta --c" in page and "gamma --d" in page and "delta --e" in page
    assert "eps, Default 3 --f" in page and "phi --g" in page
    # 0 == False: a count's 0 (-v) is not shown as a default, like a flag's False
    assert page.endswith("--g G the 'g' knob")
    assert "place (default: here)" in page
    assert "more (default: ['a'])" in page
    assert "item" in page and "item (default" not in page  # a required positional has none
    assert "Uses 'literal' text." in page and "``" not in page


def test_a_subcommand_without_a_description_shows_its_help_as_a_sentence() -> None:
    top = argparse.ArgumentParser(prog="x")
    sub = top.add_subparsers(dest="command")
    sub.add_parser("one", help="does one thing")
    sub.add_parser("two", help="does two things.")
    sub.add_parser("own", help="a help", description="Its own words.")
    sub.add_parser("none")
    group = sub.add_parser("group", help="the group")
    inner = group.add_subparsers(dest="action")
    inner.add_parser("deep", help="deep down")
    _describe_from_help(top)
    pages = {p.prog: p.description for p in _all_subparsers(top)}
    assert pages == {
        "x one": "Does one thing.",
        "x two": "Does two things.",
        "x own": "Its own words.",
        "x none": None,
        "x group": "The group.",
        "x group deep": "Deep down.",
    }
    assert (
        build_parser().description
        == "Offline ONNX inference agent for ARM boards with a durable MQTT outbox."
    )


def test_every_parser_is_listed_once_in_depth_first_order_aliases_included() -> None:
    top = argparse.ArgumentParser(prog="x")
    sub = top.add_subparsers(dest="command")
    a = sub.add_parser("a", aliases=["alias"])
    a.add_subparsers(dest="inner").add_parser("a1")
    sub.add_parser("b")
    assert [p.prog for p in _all_subparsers(top)] == ["x a", "x a a1", "x b"]
    progs = [p.prog for p in _all_subparsers(build_parser())]
    assert "edge-agent queue stats" in progs and "edge-agent fleet db partition" in progs
    assert len(progs) == len(set(progs))


def test_no_command_prints_the_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["-q"]) == 2
    out = capsys.readouterr().out
    assert out.startswith("usage: edge-agent") and "queue" in out


def test_a_command_error_is_one_line_naming_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = tmp_path / "absent.toml"
    assert cli.main(["queue", "stats", "--config", str(absent)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("edge-agent queue: error: ") and f"{absent}: config file not found" in err
    assert err.count("\n") == 1


def test_the_commands_status_and_the_logging_flags_reach_through(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from edge_agent.app.cli import logsetup

    seen: list[tuple[int, bool]] = []
    monkeypatch.setattr(logsetup, "setup_logging", lambda v, q: seen.append((v, q)))
    monkeypatch.setattr(inspect_cmd, "run", lambda args: 7)
    assert cli.main(["-vv", "inspect", "m.onnx", "-q"]) == 7
    assert seen == [(2, True)]
    assert capsys.readouterr().err == ""


def test_a_reader_that_left_is_exit_141_and_stdout_goes_nowhere(monkeypatch: pytest.MonkeyPatch) -> None:
    def gone(path: str) -> dict[str, object]:
        raise BrokenPipeError(32, "Broken pipe")

    r, w = os.pipe()
    out = os.fdopen(w, "w")
    err = io.StringIO()
    try:
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)
        monkeypatch.setattr(inspect_cmd, "runtime_compat", gone)
        assert cli.main(["-q", "inspect", "m.onnx"]) == 141
        now = os.fstat(w)
        assert stat.S_ISCHR(now.st_mode) and now.st_rdev == os.stat(os.devnull).st_rdev
        assert err.getvalue() == ""
    finally:
        monkeypatch.undo()
        out.close()
        os.close(r)


def test_ctrl_c_inside_a_command_is_one_line_and_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def ctrl_c(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(inspect_cmd, "run", ctrl_c)
    assert cli.main(["-q", "inspect", "m.onnx"]) == 130
    assert capsys.readouterr().err == "edge-agent inspect: interrupted\n"


def test_the_interrupt_line_names_the_command_of_the_real_command_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", boom)
    monkeypatch.setattr(sys, "argv", ["edge-agent", "queue", "stats"])
    assert cli.main() == 130
    assert capsys.readouterr().err == "edge-agent queue: interrupted\n"
    assert cli.main(["-q"]) == 130
    assert capsys.readouterr().err == "edge-agent: interrupted\n"


def test_an_interrupt_with_stderr_gone_still_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stderr", closed)
    assert cli.interrupted(["infer"]) == 130


def _chain(*excs: BaseException, implicit: bool = False) -> BaseException:
    for outer, inner in zip(excs, excs[1:]):
        if implicit:
            outer.__context__ = inner
        else:
            outer.__cause__ = inner
    return excs[0]


def test_an_interrupt_anywhere_down_the_chain_counts_and_a_loop_ends() -> None:
    assert cli._caused_by_interrupt(_chain(ImportError("x"), RuntimeError("y"), KeyboardInterrupt()))
    assert cli._caused_by_interrupt(_chain(ImportError("x"), KeyboardInterrupt(), implicit=True))
    assert not cli._caused_by_interrupt(_chain(ImportError("x"), RuntimeError("y")))
    a, b = ImportError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert not cli._caused_by_interrupt(a)  # a cycle ends, it does not hang
    assert cli._caused_by_interrupt(KeyboardInterrupt())


def _demo(root: Path, *names: str) -> Path:
    root.mkdir(parents=True)
    for n in names:
        (root / n).write_bytes(b"onnx")
    return root


def test_the_demo_folder_is_the_first_one_with_the_fp32_detector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _demo(tmp_path / "a", assets.DEMO_DETECTOR)  # the INT8 one only: no demo folder
    b = _demo(tmp_path / "b", assets.DEMO_DETECTOR_FP32, assets.DEMO_CLASSIFIER_FP32)
    c = _demo(tmp_path / "c", assets.DEMO_DETECTOR_FP32, assets.DEMO_DETECTOR)
    monkeypatch.setattr(assets, "_CANDIDATES", (a, b, c))
    assert assets.demo_dir() == b
    assert assets.demo_file(assets.DEMO_DETECTOR, assets.DEMO_DETECTOR_FP32) == b / assets.DEMO_DETECTOR_FP32
    assert (
        assets.demo_file(assets.DEMO_CLASSIFIER, assets.DEMO_CLASSIFIER_FP32)
        == b / assets.DEMO_CLASSIFIER_FP32
    )
    monkeypatch.setattr(assets, "_CANDIDATES", (c, b))
    assert assets.demo_file(assets.DEMO_DETECTOR, assets.DEMO_DETECTOR_FP32) == c / assets.DEMO_DETECTOR


def test_missing_demo_models_or_samples_are_one_line_naming_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    monkeypatch.setattr(assets, "_CANDIDATES", (a, b))
    assert assets.demo_dir() is None
    with pytest.raises(ModelError) as ei:
        assets.demo_file(assets.DEMO_SENSOR)
    assert str(ei.value) == (
        f"bundled demo model {assets.DEMO_SENSOR} not found (looked in {a}, {b}); pass --model FILE"
    )
    with pytest.raises(ModelError, match=r"^bundled sample images not found; pass image paths$"):
        assets.demo_samples()
    _demo(a, assets.DEMO_DETECTOR_FP32)
    with pytest.raises(ModelError, match=f"bundled demo model {assets.DEMO_SENSOR} not found"):
        assets.demo_file(assets.DEMO_SENSOR)  # the folder is there, the file is not
    with pytest.raises(ModelError, match="sample images not found"):
        assets.demo_samples()
    (a / "samples").write_text("not a folder")
    with pytest.raises(ModelError, match="sample images not found"):
        assets.demo_samples()
    (a / "samples").unlink()
    (a / "samples").mkdir()
    assert assets.demo_samples() == a / "samples"


def test_a_source_checkout_finds_the_bundled_models() -> None:
    repo = Path(__file__).resolve().parents[3]
    assert assets.demo_dir() == repo / "models"
    assert assets.demo_samples() == repo / "models" / "samples"
    assert assets.demo_file(assets.DEMO_SENSOR) == repo / "models" / assets.DEMO_SENSOR
