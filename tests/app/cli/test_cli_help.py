"""The CLI's help and usage as an operator meets them, in process (``build_parser``/``cli.main``).

A default written into a help text by hand ("chunk size in KiB (default 256)") turns off the
formatter's own "(default: ...)" and so is never checked against the code: change the code's
default and the help goes on saying the old one. Each command group lists its actions with what
they do, and a group named without an action is a usage error (exit 2), never a traceback.
"""

from __future__ import annotations

import argparse
import re

import pytest

from edge_agent.app.cli import main as cli
from edge_agent.app.cli.main import _all_subparsers, build_parser

STATED = re.compile(r"\(default:? ([^;)]+)[;)]")
PLACEHOLDER = re.compile(r"(?<![\w$<-])([A-Z])(?![\w>])")  # "S" in "up to S seconds"


def _parsers() -> list[argparse.ArgumentParser]:
    top = build_parser()
    return [top, *_all_subparsers(top)]


def _same(stated: str, default: object) -> bool:
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        try:
            return float(stated) == float(default)
        except ValueError:
            return False
    return stated == str(default)


def test_a_default_written_in_a_help_text_is_the_default_the_code_uses() -> None:
    checked: dict[tuple[str, str], str] = {}
    wrong: list[str] = []
    for p in _parsers():
        for a in p._actions:
            m = STATED.search(a.help or "")
            # default None: the help describes a fallback the command computes (prose, not a value)
            if m is None or a.default is None or a.default == argparse.SUPPRESS:
                continue
            name = a.option_strings[-1] if a.option_strings else a.dest
            checked[(p.prog, name)] = m.group(1)
            if not _same(m.group(1).strip(), a.default):
                wrong.append(f"{p.prog} {name}: help says {m.group(1)!r}, the code uses {a.default!r}")
    assert wrong == []
    # the test looks at the hand-written ones it is about, not at nothing
    assert checked[("edge-agent model pack", "--chunk-kb")] == "256"
    assert checked[("edge-agent queue drain", "--timeout")] == "60"
    assert len(checked) >= 8


def test_a_help_text_names_the_value_as_the_usage_line_shows_it() -> None:
    # "--wait S  wait up to S seconds", not "--wait WAIT  wait up to S seconds"; the error lines
    # use the same names ("--expect N needs --wait S"). A spelled-out shape (N,C,H,W) is no name
    named: dict[tuple[str, str], str] = {}
    wrong: list[str] = []
    for p in _parsers():
        for a in p._actions:
            letters = set(PLACEHOLDER.findall(a.help or ""))
            if not a.option_strings or len(letters) != 1:
                continue
            (letter,) = letters
            name = a.option_strings[-1]
            named[(p.prog, name)] = letter
            if a.metavar != letter:
                wrong.append(
                    f"{p.prog} {name}: the help says {letter}, the usage line {a.metavar or a.dest.upper()}"
                )
    assert wrong == []
    assert named[("edge-agent model push", "--wait")] == "S"
    assert named[("edge-agent model push", "--expect")] == "N"
    assert named[("edge-agent run", "--max-frames")] == "N"


def test_every_action_of_a_command_group_is_listed_with_what_it_does() -> None:
    groups = 0
    for p in _parsers():
        for a in p._actions:
            if not isinstance(a, argparse._SubParsersAction):
                continue
            groups += 1
            said = {c.dest: c.help for c in a._choices_actions}
            text = " ".join(p.format_help().split())
            for name in a.choices:
                assert said.get(name), f"{p.prog} {name}: no line saying what it does"
                assert f"{name} {' '.join(str(said[name]).split())}" in text, (p.prog, name)
    assert groups >= 5  # the top level, config, queue, model, fleet


@pytest.mark.parametrize("group", ["model", "queue", "config", "fleet"])
def test_a_command_group_without_its_action_is_a_usage_error(
    group: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ei:
        cli.main([group])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert f"edge-agent {group}: error: the following arguments are required" in err
    assert "Traceback" not in err


def test_every_model_action_is_offered(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        cli.main(["model", "--help"])
    assert ei.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for action in ("pack", "keygen", "install", "status", "rollback", "push", "convert"):
        assert re.search(rf"\b{action} \w", out), action
    assert "docs/model-updates.md" in out  # where the whole story is


@pytest.mark.parametrize(
    ("targets", "says"),
    [
        ([], "one of the arguments --device --group is required"),
        (["--device", "cam-1", "--group", "g1"], "argument --group: not allowed with argument --device"),
    ],
)
def test_a_push_names_exactly_one_kind_of_target_before_anything_is_read(
    targets: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # the config does not exist: a push past the usage check would fail on it with exit 1
    with pytest.raises(SystemExit) as ei:
        cli.main(["model", "push", "x.pkg", "-c", "/nonexistent/c.toml", *targets])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert says in err and "nonexistent" not in err


def test_every_help_page_says_what_its_command_does() -> None:
    """Nine ``--help`` pages were a usage line and the options only: each has a description now,
    its own or its one-line help from the parent's list."""
    bare = [p.prog for p in _parsers() if len((p.description or "").strip()) < 12]
    assert bare == []
    page = next(p for p in _parsers() if p.prog == "edge-agent model push").format_help()
    assert "\nSend a package over MQTT to devices or a group.\n" in page
