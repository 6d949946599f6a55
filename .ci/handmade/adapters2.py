"""Hand-made bugs in modules no mutation area covered before the 2026-11-30 late-night round: the
collector's MQTT side, the broker credentials and TLS, image files, frame sources, the model set
and the config file (the outside input and trust paths)."""

from pathlib import Path


def _have(tests: str) -> str:
    """Only the test paths present (the "before" run has not got the files written for these bugs)."""
    return " ".join(t for t in tests.split() if Path(t.split("::")[0]).exists())


CM = "edge_agent/adapters/collector/subscriber.py"
MC = "edge_agent/adapters/mqtt/connect.py"
IM = "edge_agent/adapters/camera/images.py"
CS = "edge_agent/adapters/camera/backends.py"
MS = "edge_agent/app/agent/modelset.py"
CF = "edge_agent/app/cli/configfile.py"
T_CM = (
    "tests/adapters/collector/test_collector_mqtt.py tests/adapters/collector/test_collector_subscriber.py "
    "tests/app/collector tests/adapters/collector"
)
T_MC = (
    "tests/adapters/mqtt/test_credentials.py tests/adapters/mqtt/test_mqtt_connect.py "
    "tests/adapters/collector/test_collector_subscriber.py tests/adapters/mqtt/test_mqtt_sync.py tests/app/cli/test_doctor.py"
)
T_IM = (
    "tests/adapters/camera/test_images.py tests/adapters/camera/test_bounded_input.py tests/adapters/camera/test_decode_bounds.py "
    "tests/adapters/camera/test_bounded_properties.py tests/app/cli/test_commands.py"
)
T_CS = (
    "tests/adapters/camera/test_folder_source.py tests/adapters/camera/test_camera.py tests/adapters/camera/test_decode_bounds.py "
    "tests/adapters/camera/test_bounded_input.py tests/adapters/camera/test_decode_and_grant.py tests/adapters/camera/test_mjpeg.py"
)
T_MS = (
    "tests/app/agent/test_modelset.py tests/inference/test_guard.py tests/adapters/runtime/test_provider_fallback.py "
    "tests/app/agent/test_agent_inproc.py"
)
T_CF = "tests/app/cli/test_configfile.py tests/app/cli/test_cli_manners.py tests/app/cli/test_doctor.py"
T_CM, T_MC, T_IM, T_CS, T_MS, T_CF = map(_have, (T_CM, T_MC, T_IM, T_CS, T_MS, T_CF))
BUGS = [
    # the collector: exactly-once needs manual acks after the commit, a persistent session, QoS 1
    ("cm1", CM, "protocol=mqtt.MQTTv5, manual_ack=True", "protocol=mqtt.MQTTv5, manual_ack=False", T_CM),
    (
        "cm2",
        CM,
        "self.host, self.port, self.keepalive_s, clean_start=False,",
        "self.host, self.port, self.keepalive_s, clean_start=True,",
        T_CM,
    ),
    (
        "cm3",
        CM,
        "if m.qos > 0 and m.conn == self.conn and self.connected.is_set():",
        "if m.qos > 0 and self.connected.is_set():",
        T_CM,
    ),
    (
        "cm5",
        CM,
        "client.subscribe([(f, 1) for f in self.filters])",
        "client.subscribe([(f, 0) for f in self.filters])",
        T_CM,
    ),
    (
        "cm7",
        CM,
        "            c.username_pw_set(username, password)",
        "            c.username_pw_set(username)",
        T_CM,
    ),
    # the broker's credentials and TLS
    # CREDENTIALS_DIRECTORY misspelt: a relative password_file is looked up in the cwd
    (
        "mc1",
        MC,
        'creds = os.environ.get("CREDENTIALS_DIRECTORY")',
        'creds = os.environ.get("CREDENTIALS_DIR")',
        T_MC,
    ),
    ("mc3", MC, "    if not (cfg.tls_ca or cfg.tls_cert):", "    if not cfg.tls_ca:", T_MC),
    (
        "mc4",
        MC,
        "        ctx = ssl.create_default_context(cafile=cfg.tls_ca)",
        "        ctx = ssl._create_unverified_context(cafile=cfg.tls_ca)",
        T_MC,
    ),
    # image files: the pixel cap is outside input's only bound before a decode
    (
        "im1",
        IM,
        "    problem = pixel_problem(dims, max_pixels)",
        "    problem = pixel_problem(dims, DEFAULT_MAX_PIXELS)",
        T_IM,
    ),
    # folder replay
    ("cs1", CS, "bisect.bisect_right(self._files, last)", "bisect.bisect_left(self._files, last)", T_CS),
    (
        "cs3",
        CS,
        "FolderSourceFactory(str(src), cfg.loop, cfg.fps, target, max_pixels=cfg.max_pixels)",
        "FolderSourceFactory(str(src), cfg.loop, cfg.fps, target)",
        T_CS,
    ),
    # the model set: config keys of the detector and the classifier
    ("ms1", MS, "provider=c.provider or d.provider,", "provider=d.provider,", T_MS),
    (
        "ms2",
        MS,
        "        if d.classes:\n            detector.params.classes = detector.class_ids(d.classes)\n",
        "",
        T_MS,
    ),
    ("ms3", MS, "c.crop_padding if c else CROP_PADDING)", "CROP_PADDING)", T_MS),
    # the config file: the flag, then $EDGE_AGENT_CONFIG, then the system path
    (
        "cf1",
        CF,
        "    return Path(env) if env else DEFAULT_CONFIG_PATH",
        "    return DEFAULT_CONFIG_PATH",
        T_CF,
    ),
]
