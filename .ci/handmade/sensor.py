"""Hand-made bugs: the serial sensor reader."""

S = "edge_agent/adapters/sensor/serial_reader.py"
T = "tests/adapters/sensor/test_sensor_serial.py tests/core/sensor/test_sensor_properties.py tests/app/agent/test_agent_parts.py tests/core/sensor/test_sensor_parse.py"
BUGS = [
    (
        "se1",
        S,
        "        if self.triggered.wait(timeout_s):\n            self.triggered.clear()\n",
        "        if self.triggered.wait(timeout_s):\n",
        T,
    ),
    ("se2", S, "            self._latest.update(reading)", "            self._latest = dict(reading)", T),
    (
        "se3",
        S,
        '            if skipping:\n                skipping = not chunk.endswith(b"\\n")\n                continue',
        "            if skipping:\n                skipping = False\n                continue",
        T,
    ),
    (
        "se4",
        S,
        "            elif len(buf) > MAX_LINE_BYTES:",
        "            elif len(buf) > 2 * MAX_LINE_BYTES:",
        T,
    ),
    (
        "se5",
        S,
        "        if not line:\n            return None\n        self.lines += 1",
        "        self.lines += 1\n        if not line:\n            return None",
        T,
    ),
    ("se6", S, '        self._state = "stopped"\n\n    def latest', "\n    def latest", T),
    (
        "se7",
        S,
        '            attempts = 0\n            self._state = "reading"',
        '            self._state = "reading"',
        T,
    ),
]
