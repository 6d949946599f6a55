"""The device page in a real browser (Debian's chromium + chromium-driver, selenium from PyPI):
``edge-agent run`` with [web] on a folder camera replaying a clip where an object crosses the
middle of the picture every 3.2 s; the page loads, its live frame updates, a line drawn with the
mouse lands in the drop-in the config includes (``config check`` passes on it) and the crossings
of the following frames count on it, "in" on the side clicked.

``EDGE_AGENT_DOCS_SCREENSHOT=1`` also writes the screenshot to docs/web-page.png."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from support.clip import REPO, noisy, paste
from support.objects import background, square
from support.ports import free_port
from support.runner import cli
from support.waiting import wait_until
from support.world import agent_toml

from edge_agent.core.config.schema import toml_data

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
try:
    import selenium  # noqa: F401

    HAVE_SELENIUM = True
except ImportError:
    HAVE_SELENIUM = False
if not (CHROMIUM and DRIVER and HAVE_SELENIUM):
    pytest.skip(
        "needs chromium, chromedriver (apt: chromium chromium-driver) and selenium (pip: the dev extra)",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402


def make_crossing_clip(out: Path) -> None:
    """32 frames: 10 empty, then one object walking left -> right across x = 0.5 in 16 steps, 6 empty."""
    bg, obj = background(), square()
    rng = np.random.default_rng(3)
    frames: list[list[int]] = [[]] * 10 + [[x] for x in range(5, 262, 17)] + [[]] * 6
    for i, xs in enumerate(frames):
        img = bg
        for x in xs:
            img = paste(img, obj, x, 30)
        cv2.imwrite(str(out / f"{i:04d}.jpg"), noisy(img, rng, 2.0), [cv2.IMWRITE_JPEG_QUALITY, 92])


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


@pytest.fixture
def agent(tmp_path: Path) -> Any:
    cam = tmp_path / "cam"
    cam.mkdir()
    make_crossing_clip(cam)
    port = free_port()
    cfg = tmp_path / "agent.toml"
    cfg.write_text(
        agent_toml(
            tmp_path / "state",
            cam,
            REPO / "models" / "demo-detector.onnx",
            camera={"fps": 10.0, "loop": True},
            detector={"conf_threshold": 0.5},
            output={"mode": "objects", "counts_interval_s": 60},
            web={"enabled": True, "port": port},
        )
    )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return bool(get(base + "/api/v1/status").get("ready_s"))
        except OSError:
            return False

    with open(tmp_path / "agent.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "edge_agent", "run", "--config", str(cfg)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(up, 60, lambda: (tmp_path / "agent.log").read_text())
            yield base, cfg, tmp_path
        finally:
            proc.terminate()
            proc.wait(30)


def browser() -> webdriver.Chrome:
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=str(DRIVER)), options=opts)


def test_a_line_drawn_in_the_browser_is_saved_checked_and_counts(agent: Any) -> None:
    base, cfg, tmp = agent
    drv = browser()
    try:
        drv.get(base + "/")
        live = drv.find_element(By.ID, "live")
        # the live frame updates: the page has shown at least three different frames
        wait_until(lambda: int(live.get_attribute("data-frames") or 0) >= 3, 30, "three live frames")
        seq1 = int(live.get_attribute("data-seq"))
        wait_until(lambda: int(live.get_attribute("data-seq")) != seq1, 10, "a newer frame")
        overlay = drv.find_element(By.ID, "overlay")
        w, h = overlay.size["width"], overlay.size["height"]
        assert w > 100 and h > 50

        def at(fx: float, fy: float) -> tuple[int, int]:  # selenium 4: offsets from the element's centre
            return int((fx - 0.5) * w), int((fy - 0.5) * h)

        drv.find_element(By.ID, "new-line").click()
        x0, y0 = at(0.5, 0.02)
        x1, y1 = at(0.5, 0.62)
        (
            ActionChains(drv)
            .move_to_element_with_offset(overlay, x0, y0)
            .click_and_hold()
            .move_by_offset(0, (y1 - y0) // 2)
            .move_by_offset(x1 - x0, (y1 - y0) - (y1 - y0) // 2)
            .release()
            .perform()
        )
        # the "in" side: the right half of the picture (the crosser walks into it)
        ActionChains(drv).move_to_element_with_offset(overlay, *at(0.8, 0.3)).click().perform()
        name = drv.find_element(By.CSS_SELECTOR, "input.item-name")
        name.clear()
        name.send_keys("door")
        drv.find_element(By.ID, "save").click()
        message = drv.find_element(By.ID, "message")
        wait_until(
            lambda: "saved" in message.text or "error" in (message.get_attribute("class") or ""), 15, "saved"
        )
        assert "saved" in message.text, message.text

        drop_in = tmp / "state" / "scene.toml"
        scene = toml_data(drop_in.read_text())
        (line,) = scene["lines"]
        assert line["name"] == "door" and line["in_side"] == "left"  # right of the picture, drawn downwards
        (ax, ay), (bx, by) = line["points"]
        assert abs(ax - 0.5) < 0.03 and abs(bx - 0.5) < 0.03 and ay < 0.06 and abs(by - 0.62) < 0.03
        checked = cli("config", "check", "--config", str(cfg))
        assert checked.returncode == 0, checked.stderr

        # the crossings of the following frames count on it, in the clicked direction
        def counted() -> Any:
            c = get(base + "/api/v1/counts")["cameras"]["default"]["lines"].get("door", {})
            return c if c.get("in", 0) >= 1 else None

        c = wait_until(counted, 30, lambda: f"a crossing on 'door': {get(base + '/api/v1/counts')}")
        assert c["out"] == 0
        wait_until(
            lambda: (
                "in 1" in drv.find_element(By.ID, "counts").text
                or "in 2" in drv.find_element(By.ID, "counts").text
            ),
            10,
            "the page's counts table",
        )
        shot = tmp / "web-page.png"
        drv.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        if os.environ.get("EDGE_AGENT_DOCS_SCREENSHOT") == "1":
            shutil.copy(shot, REPO / "docs" / "web-page.png")
    finally:
        drv.quit()
    # the config file itself is untouched: the drop-in holds the line
    assert "door" not in cfg.read_text()
