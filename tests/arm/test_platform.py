"""What must hold on the board's CPU: native wheels load and compute the right numbers.

Run natively these check the same arithmetic on x86; under ``cross-build/qemu-test.sh`` they run
on Debian's aarch64 python3.11 with the aarch64 wheels on an exact emulated core (Cortex-A72 Pi 4,
A57 Jetson Nano, A76 Pi 5), which is where onnxruntime 1.21 once died with "Illegal instruction"
while default emulation passed. Results are compared with numpy, not with constants.
"""

from __future__ import annotations

import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from support import free_port
from support.cpu import int8_saturates_here

pytestmark = pytest.mark.arm_smoke

# set by cross-build/qemu-test.sh; absent in a native run
EMULATED_CORE = os.environ.get("EDGE_AGENT_QEMU_CPU")
CPU_PART = {"cortex-a53": "0xd03", "cortex-a57": "0xd07", "cortex-a72": "0xd08", "cortex-a76": "0xd0b"}
needs_emulator = pytest.mark.skipif(
    EMULATED_CORE is None, reason="aarch64-only assertion: run under cross-build/qemu-test.sh"
)


def cpuinfo(field: str) -> set[str]:
    values: set[str] = set()
    for line in Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == field:
            values.add(value.strip())
    return values


@needs_emulator
def test_interpreter_is_debian_aarch64_python311_on_the_requested_core() -> None:
    assert platform.machine() == "aarch64"
    assert sys.version_info[:2] == (3, 11)
    # the board's kernel reports its core in /proc/cpuinfo; onnxruntime's cpuinfo reads it
    assert cpuinfo("CPU part") == {CPU_PART[str(EMULATED_CORE)]}
    features = set(" ".join(cpuinfo("Features")).split())
    assert {"fp", "asimd"} <= features
    # dot product exists on the Pi 5's A76 only: a kernel that assumes it must not run on A72/A57
    assert ("asimddp" in features) == (EMULATED_CORE == "cortex-a76")


# sdot v0.4s, v1.16b, v2.16b ; ret -- an ARMv8.2 dot-product instruction (Cortex-A76 has it,
# A72/A57 do not): the class of instruction that made onnxruntime 1.21 die on a Pi 4
SDOT_THEN_RET = bytes.fromhex("2094824ec0035fd6")
RUN_RAW_CODE = f"""
import ctypes, mmap
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write({SDOT_THEN_RET!r})
ctypes.CFUNCTYPE(None)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
print("executed")
"""


@pytest.mark.skipif(platform.machine() != "aarch64", reason="executes an aarch64 instruction")
def test_emulated_core_traps_instructions_it_does_not_have(tmp_path: Path) -> None:
    """The core is enforced, not just described by cpuinfo: sdot is SIGILL on A72/A57."""
    import ctypes
    import signal

    hwcap = ctypes.CDLL(None).getauxval
    hwcap.restype = ctypes.c_ulong
    has_dotprod = bool(hwcap(16) & (1 << 20))  # AT_HWCAP, HWCAP_ASIMDDP
    if EMULATED_CORE is not None:  # on a real board HWCAP is the kernel's word for it
        assert has_dotprod == (EMULATED_CORE == "cortex-a76")
    # cwd: qemu drops a qemu_*.core file there when core dumps are enabled
    run = subprocess.run(
        [sys.executable, "-c", RUN_RAW_CODE], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    if has_dotprod:
        assert (run.returncode, run.stdout.strip()) == (0, "executed"), run.stderr
    else:
        assert run.returncode == -signal.SIGILL, (run.returncode, run.stdout, run.stderr)


def test_subprocess_of_sys_executable_runs_the_same_architecture() -> None:
    """Tests that spawn ``sys.executable`` (CLI tests) must stay on the emulated core."""
    code = "import os, platform; print(platform.machine(), os.environ.get('EDGE_AGENT_QEMU_CPU'))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    assert out == [platform.machine(), str(EMULATED_CORE)]


def _conv_model(weight: np.ndarray, bias: np.ndarray) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    node_conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1])
    node_relu = helper.make_node("Relu", ["c"], ["y"])
    graph = helper.make_graph(
        [node_conv, node_relu],
        "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])],
        initializer=[numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # loadable by every onnxruntime the project supports (>= 1.17)
    return bytes(model.SerializeToString())


def _conv_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    # windows[n, c, h, w, kh, kw] -> contract over c, kh, kw
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    y = np.einsum("nchwij,ocij->nohw", windows.astype(np.float64), w.astype(np.float64))
    y += b.astype(np.float64)[None, :, None, None]
    return np.asarray(np.maximum(y, 0.0))


def _session(model: bytes):  # type: ignore[no-untyped-def]
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1  # deterministic and cheap under emulation
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def test_onnxruntime_conv_relu_matches_numpy() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 3, 16, 16), dtype=np.float32)
    w = rng.standard_normal((8, 3, 3, 3), dtype=np.float32)
    b = rng.standard_normal(8, dtype=np.float32)
    (y,) = _session(_conv_model(w, b)).run(None, {"x": x})
    assert y.shape == (1, 8, 16, 16)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, _conv_reference(x, w, b), rtol=1e-4, atol=1e-4)
    assert (y > 0).any() and (y == 0).any()  # ReLU really clipped something


def test_onnxruntime_int8_matmul_is_exact() -> None:
    """MatMulInteger picks per-core int8 kernels (dot-product ones on A76): results must be exact.
    On an x86 host without VNNI the activations stay below 128: its u8 x s8 kernel adds product
    pairs in a saturating int16 (support.cpu), which full-range activations overflow."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(11)
    a = rng.integers(0, 128 if int8_saturates_here() else 256, size=(37, 64), dtype=np.uint8)
    bmat = rng.integers(-128, 128, size=(64, 29), dtype=np.int8)
    a_zero = np.uint8(128)
    node = helper.make_node("MatMulInteger", ["a", "b", "a_zero"], ["y"])
    graph = helper.make_graph(
        [node],
        "mmi",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [37, 64])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [37, 29])],
        initializer=[numpy_helper.from_array(bmat, "b"), numpy_helper.from_array(np.array(a_zero), "a_zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (y,) = _session(bytes(model.SerializeToString())).run(None, {"a": a})
    expected = (a.astype(np.int32) - int(a_zero)) @ bmat.astype(np.int32)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, expected)


def test_opencv_and_pillow_agree_on_a_lossless_roundtrip() -> None:
    import io

    import cv2
    from PIL import Image

    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 256, size=(48, 64, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    bgr = cv2.imdecode(np.frombuffer(buf.getvalue(), dtype=np.uint8), cv2.IMREAD_COLOR)
    assert bgr is not None
    np.testing.assert_array_equal(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), rgb)
    # NEON resize path vs. a plain numpy 2x2 box average
    small = cv2.resize(rgb, (32, 24), interpolation=cv2.INTER_AREA)
    box = rgb.reshape(24, 2, 32, 2, 3).astype(np.float64).mean(axis=(1, 3))
    assert np.abs(small.astype(np.float64) - box).max() <= 1.0


def test_config_schema_validates_with_the_aarch64_pydantic_core() -> None:
    from edge_agent.core.config.schema import parse_config
    from edge_agent.errors import ConfigError

    cfg = parse_config('[mqtt]\nport = 8883\n[device]\nid = "pi-4"\n')
    assert (cfg.mqtt.port, cfg.device.id) == (8883, "pi-4")
    with pytest.raises(ConfigError, match="hots"):
        parse_config('[mqtt]\nhots = "x"\n')


def test_sqlite_wal_outbox_prerequisites(tmp_path: Path) -> None:
    """The outbox relies on WAL and RETURNING (SQLite >= 3.35), from the board's libsqlite3."""
    assert sqlite3.sqlite_version_info >= (3, 35)
    con = sqlite3.connect(tmp_path / "q.db")
    try:
        assert con.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
        con.execute("CREATE TABLE q (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        insert = "INSERT INTO q (body) VALUES (?) RETURNING id"
        ids = [con.execute(insert, (b"x" * n,)).fetchone()[0] for n in (1, 2)]
        con.commit()
        assert ids == [1, 2]
        assert con.execute("SELECT sum(length(body)) FROM q").fetchone() == (3,)
    finally:
        con.close()


def test_host_mosquitto_serves_the_emulated_paho_client(tmp_path: Path) -> None:
    """Host x86 binaries spawned from the emulated python run natively (no binfmt needed)."""
    # Debian puts it in /usr/sbin, which is not on a non-root PATH
    mosquitto = shutil.which("mosquitto", path=f"{os.environ.get('PATH', '')}:/usr/sbin")
    if mosquitto is None:
        pytest.skip("mosquitto not installed (apt-get install mosquitto)")
    import paho.mqtt.client as mqtt

    port = free_port()
    conf = tmp_path / "m.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n", encoding="ascii")
    broker = subprocess.Popen([mosquitto, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        got: list[bytes] = []
        subscribed = threading.Event()
        received = threading.Event()
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="arm-smoke")

        def on_message(_c: object, _u: object, msg: mqtt.MQTTMessage) -> None:
            got.append(msg.payload)
            received.set()

        client.on_message = on_message
        client.on_subscribe = lambda *_args: subscribed.set()
        deadline = time.monotonic() + 30
        while True:
            try:
                client.connect("127.0.0.1", port, keepalive=30)
                break
            except ConnectionRefusedError:
                assert broker.poll() is None, broker.stderr.read() if broker.stderr else "broker died"
                assert time.monotonic() < deadline, "mosquitto did not listen within 30 s"
                time.sleep(0.1)
        client.loop_start()
        try:
            client.subscribe("arm/smoke", qos=1)
            assert subscribed.wait(30), "no SUBACK within 30 s"
            client.publish("arm/smoke", b"\x00\xffhello", qos=1).wait_for_publish(timeout=30)
            assert received.wait(30), "own message not delivered within 30 s"
        finally:
            client.loop_stop()
            client.disconnect()
        assert got == [b"\x00\xffhello"]
    finally:
        broker.terminate()
        broker.wait(timeout=10)
