from __future__ import annotations

from pathlib import Path

import pytest

from edge_agent.adapters.mqtt.connect import read_password
from edge_agent.core.config.schema import MqttConfig


def test_password_file_from_credentials_dir_and_empty_means_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    (tmp_path / "mqtt-password").write_text("pw\n")
    cfg = MqttConfig(username="dev", password_file="mqtt-password")
    assert read_password(cfg) == "pw"
    # the unit's SetCredential= fallback when no password file is installed: a lone newline
    (tmp_path / "mqtt-password").write_text("\n")
    assert read_password(cfg) is None
    assert read_password(MqttConfig(password_file="mqtt-password")) is None  # no username, no password
