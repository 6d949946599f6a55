"""Hand-made bugs: config keys that no test set."""

BUGS = [
    (
        "k1",
        "edge_agent/adapters/sensor/serial_reader.py",
        "port = self._factory(self.cfg.port, self.cfg.baudrate, self.read_timeout_s)",
        "port = self._factory(self.cfg.port, 9600, self.read_timeout_s)",
        "tests/adapters/sensor/test_sensor_serial.py",
    ),
    (
        "k2",
        "edge_agent/core/objects/lifecycle.py",
        "self.cfg.line_margin,",
        "0.02,",
        "tests/core/objects/test_object_events.py",
    ),
    (
        "k3",
        "edge_agent/app/updates/switch.py",
        '    ring = FrameRing(store.root / "ring", mu.ring_frames, mu.ring_interval_s, mu.ring_max_age_h)',
        '    ring = FrameRing(store.root / "ring", mu.ring_frames, mu.ring_interval_s, 72.0)',
        "tests/app/updates/test_model_switch.py",
    ),
]
