"""Hand-made bugs of issue 36 ("tests that should bite harder", bite1, 2026-12-03): the tracker's
config keys, zone exit hysteresis, the queue marks' torn-write and failed-commit paths, the
collector's database URL forms, fleet commands given an unknown device, a camera started twice.

The new test files are added to a bug's tests only when present: the as-landed run had none."""

import pathlib


def _tests(*paths: str) -> str:
    return " ".join(p for p in paths if pathlib.Path(p).exists())


OS = "edge_agent/app/agent/objects_step.py"
LC = "edge_agent/core/objects/lifecycle.py"
TC = "edge_agent/app/workbench/track_cmd.py"
ZN = "edge_agent/core/objects/zones.py"
MK = "edge_agent/adapters/outbox/marks.py"
CC = "edge_agent/core/config/collector.py"
DB = "edge_agent/adapters/collector/db.py"
FC = "edge_agent/app/collector/fleet_cmd.py"
HI = "edge_agent/adapters/collector/history.py"
CAP = "edge_agent/adapters/camera/capture.py"
CP = "edge_agent/app/agent/camera_pipeline.py"

T_KEYS = _tests(
    "tests/app/agent/test_objects_step.py",
    "tests/app/agent/test_objects_keys.py",  # added with this list
    "tests/core/objects",
    "tests/app/workbench/test_track_inproc.py",
)
T_ZONE = _tests("tests/core/objects")
T_MARKS = _tests(
    "tests/adapters/outbox/test_outbox_marks.py",
    "tests/adapters/outbox/test_marks_torn.py",  # added with this list
    "tests/adapters/outbox/test_full_disk.py",
    "tests/adapters/outbox/test_loss_visible.py",
)
T_URL = _tests(
    "tests/core/config/test_collector_config.py",
    "tests/adapters/collector/test_db_urls.py",  # added with this list
    "tests/adapters/collector/test_collector_db.py",
    "tests/app/collector/test_fleet_cmd.py",
    "tests/app/collector/test_collect_cmd_wiring.py",
)
T_FLEET = _tests(
    "tests/app/collector/test_fleet_cmd.py",
    "tests/app/collector/test_fleet_unknown.py",  # added with this list
    "tests/app/collector/test_fleet_history_cmd.py",
    "tests/adapters/collector/test_fleet_retire.py",
)
T_CAM = _tests(
    "tests/adapters/camera/test_camera.py",
    "tests/adapters/camera/test_camera_restart.py",  # added with this list
    "tests/app/agent/test_camera_pipeline.py",
)

BUGS = [
    # ---- [tracker] keys: read but ignored, or a default used instead
    ("k1", LC, "                if t.hits < self.cfg.min_hits:", "                if t.hits < 3:", T_KEYS),
    (
        "k2",
        LC,
        "p = anchor_point(t.box, w, h, self.cfg.anchor)",
        'p = anchor_point(t.box, w, h, "bottom_center")',
        T_KEYS,
    ),
    ("k3", LC, "line_step(st, p, a, b, self.cfg.line_margin, ", "line_step(st, p, a, b, 0.02, ", T_KEYS),
    ("k4", LC, "z.min_dwell_s, self.cfg.zone_exit_frames)", "z.min_dwell_s, 3)", T_KEYS),
    ("k5", OS, "        lost_frames=t.lost_frames,\n", "        lost_frames=30,\n", T_KEYS),
    ("k6", OS, "        low=t.low,\n", "        low=t.high,\n", T_KEYS),
    ("k7", OS, "        new_track=t.new_track,\n", "        new_track=t.high,\n", T_KEYS),
    ("k8", OS, "        per_class=t.per_class,\n", "        per_class=False,\n", T_KEYS),
    ("k9", TC, "        match_iou=args.match_iou,\n", "        match_iou=0.2,\n", T_KEYS),
    ("k10", TC, "        lost_frames=args.lost_frames,\n", "        lost_frames=30,\n", T_KEYS),
    # ---- zone exit hysteresis
    ("z1", ZN, "    if state.outside < exit_frames:\n", "    if state.outside <= exit_frames:\n", T_ZONE),
    (
        "z2",
        ZN,
        "    if inside:\n        state.outside = 0\n",
        "    if inside:\n",
        T_ZONE,
    ),  # outside frames add up
    (
        "z3",
        ZN,
        "    if state.outside < exit_frames:\n        return None\n",
        "    if state.outside < exit_frames:\n        state.entered = False\n        return None\n",
        T_ZONE,
    ),  # a flicker out restarts the stay: entered again
    ("z4", ZN, "    state.outside += 1\n", "    state.outside += 1\n    state.last_inside = ts\n", T_ZONE),
    ("z5", ZN, "ts - state.since >= min_dwell_s:", "ts - state.since > min_dwell_s:", T_ZONE),
    (
        "z6",
        LC,
        "            got = zone_end(zst)\n",
        "            got = None\n",
        T_ZONE,
    ),  # an ended track never leaves
    (
        "z7",
        ZN,
        "    if state.since is None:\n        return None\n    state.outside += 1\n",
        "    if state.since is None or not state.entered:\n        state.since = None\n        return None\n"
        "    state.outside += 1\n",
        T_ZONE,
    ),  # the exit hysteresis only once entered: a flicker during min_dwell_s restarts the stay
    # ---- the marks file: torn write, failed commit
    ("m1", MK, 'ljust(SLOT, b"\\0"), (self._gen % 2) * SLOT)', 'ljust(SLOT, b"\\0"), 0)', T_MARKS),
    (
        "m2",
        MK,
        "    return max(found, key=lambda d: d[0])[1] if found else None",
        "    return found[0][1] if found else None",
        T_MARKS,
    ),
    (
        "m3",
        MK,
        '    if zlib.crc32(body).to_bytes(4, "big") != crc:\n        return None\n',
        "    if not crc:\n        return None\n",
        T_MARKS,
    ),
    (
        "m4",
        MK,
        "            self._put(self._fd, m)\n            _datasync(self._fd)\n",
        "            self._put(self._fd, m)\n",
        T_MARKS,
    ),
    (
        "m5",
        MK,
        "            self._put(self._fd, m)\n            _datasync(self._fd)\n            self._before, self.last = self.last, m\n",
        "            self._before, self.last = self.last, m\n            self._put(self._fd, m)\n            _datasync(self._fd)\n",
        T_MARKS,
    ),  # the mark believed before it is on disk
    (
        "m6",
        MK,
        "        except sqlite3.Error:\n            self.marks.undo()\n",
        "        except sqlite3.Error:\n            pass\n",
        T_MARKS,
    ),
    (
        "m7",
        MK,
        "        except sqlite3.Error:\n            self.marks.undo()\n",
        "        except sqlite3.IntegrityError:\n            self.marks.undo()\n",
        T_MARKS,
    ),
    (
        "m8",
        MK,
        '            raise sqlite3.OperationalError(f"cannot write {self.marks.path}: {exc.strerror}") from None\n',
        '            log.warning("cannot write %s: %s", self.marks.path, exc.strerror)\n',
        T_MARKS,
    ),  # a marks write error swallowed: the commit goes ahead uncovered
    (
        "m9",
        MK,
        "exc.strerror\n            )\n            return\n        with s.lock:\n            s.seq_reserved",
        "exc.strerror\n            )\n        with s.lock:\n            s.seq_reserved",
        T_MARKS,
    ),  # a reservation the file refused believed
    ("m10", MK, "            self._gen = self._generation(fd)\n", "            self._gen = 0\n", T_MARKS),
    # ---- the collector's database URL forms
    ("u1", DB, '    rest = url[len("sqlite:///") :]\n', '    rest = url[len("sqlite://") :]\n', T_URL),
    (
        "u2",
        DB,
        '    rest = url[len("sqlite:///") :]\n',
        '    rest = url[len("sqlite:///") :].lstrip("/")\n',
        T_URL,
    ),
    (
        "u3",
        DB,
        '    if not url.startswith("sqlite:///") or not rest or rest.endswith("/"):',
        '    if not url.startswith("sqlite:///") or not rest:',
        T_URL,
    ),
    (
        "u4",
        DB,
        '    if not url.startswith("sqlite:///") or not rest or rest.endswith("/"):',
        '    if not url.startswith("sqlite:///") or rest.endswith("/"):',
        T_URL,
    ),
    (
        "u5",
        DB,
        '        elif url.startswith(("postgresql:", "postgres:")):',
        '        elif url.startswith("postgresql:"):',
        T_URL,
    ),
    (
        "u6",
        CC,
        '        if not value.startswith(("sqlite:///", "postgresql://", "postgres://")):',
        '        if not value.startswith(("sqlite:///", "postgresql://")):',
        T_URL,
    ),
    (
        "u7",
        CC,
        '        if not value.startswith(("sqlite:///", "postgresql://", "postgres://")):',
        '        if not value.startswith(("sqlite:", "postgresql:", "postgres:")):',
        T_URL,
    ),
    (
        "u8",
        DB,
        "                    self.conn = psycopg.connect(url, autocommit=True)\n",
        '                    self.conn = psycopg.connect(url.split("?")[0], autocommit=True)\n',
        T_URL,
    ),  # the query (sslmode, application_name, host=/run/...) dropped
    (
        "u9",
        FC,
        '        path = url[len("sqlite:///") :]\n',
        '        path = url[len("sqlite:////") - 1 :].lstrip("/")\n',
        T_URL,
    ),
    ("u10", CC, '    return has or "password=" in parts.query.lower()', "    return has", T_URL),
    # ---- fleet commands given a device the database does not know
    (
        "f1",
        FC,
        "    if counters is None:\n        raise ConfigError",
        "    if False:\n        raise ConfigError",
        T_FLEET,
    ),
    (
        "f2",
        FC,
        'total = next((d["conflicts"] for d in db.devices() if d["device"] == args.device), 0)',
        'total = next((d["conflicts"] for d in db.devices()), 0)',
        T_FLEET,
    ),  # the first device's conflicts
    (
        "f3",
        FC,
        "        known = bool(rows) or bool(verdicts) or history.known(db, args.device)",
        "        known = True",
        T_FLEET,
    ),
    (
        "f4",
        HI,
        '    return db._x("SELECT 1 FROM devices WHERE device = ?", (device,)).fetchone() is not None or (',
        "    return (",
        T_FLEET,
    ),
    (
        "f5",
        DB,
        '            known = self._x("DELETE FROM devices WHERE device = ?", (device,))',
        '            known = self._x("DELETE FROM devices WHERE device LIKE ?", (device,))',
        T_FLEET,
    ),
    ("f6", DB, "            known = known or any(counts)\n", "            known = True\n", T_FLEET),
    (
        "f7",
        FC,
        '        raise ConfigError(f"device {args.device!r}: not in the collector\'s database (nothing retired)")\n',
        '        sys.stderr.write(f"device {args.device!r}: not in the collector\'s database (nothing retired)\\n")\n'
        "        return 0\n",
        T_FLEET,
    ),  # the line said, the exit 0
    (
        "f8",
        DB,
        "f\"SELECT {', '.join(LOSS_COUNTERS)} FROM devices WHERE device = ?\"",
        "f\"SELECT {', '.join(LOSS_COUNTERS)} FROM devices WHERE device LIKE ?\"",
        T_FLEET,
    ),
    (
        "f9",
        FC,
        "    if not known:\n        raise ConfigError",
        "    if not rows and not verdicts:\n        raise ConfigError",
        T_FLEET,
    ),
    # ---- a camera started twice, and again after a stop
    (
        "c1",
        CAP,
        '        if self._thread is not None:\n            raise CameraError("camera already started")\n',
        "",
        T_CAM,
    ),
    (
        "c2",
        CAP,
        '        if self._thread is not None:\n            raise CameraError("camera already started")\n'
        "        source: Optional[FrameSource] = None\n        try:\n            source = self._factory()\n",
        "        source: Optional[FrameSource] = None\n        try:\n            source = self._factory()\n"
        '            if self._thread is not None:\n                raise CameraError("camera already started")\n',
        T_CAM,
    ),  # the check after the open: a second capture opened (and leaked)
    (
        "c3",
        CP,
        "        if self.camera is None:\n            self.camera = Camera(self.cfg.camera)\n",
        "        self.camera = Camera(self.cfg.camera)\n",
        T_CAM,
    ),
    ("c4", CAP, "            self._thread.join(timeout_s)\n", "            pass\n", T_CAM),
    # the same, on the code after the restart fix (each applies to one version of capture.py only)
    (
        "c1a",
        CAP,
        '        if not self._stop.is_set():\n            raise CameraError(f"camera {self.name!r}: already started")\n',
        "",
        T_CAM,
    ),
    (
        "c2a",
        CAP,
        "        self._fresh_start()\n        source: Optional[FrameSource] = None\n        try:\n            source = self._factory()\n",
        "        source: Optional[FrameSource] = None\n        try:\n            source = self._factory()\n            self._fresh_start()\n",
        T_CAM,
    ),
    (
        "c5a",
        CAP,
        "        self._stop.clear()\n        self._slot = LatestFrame()\n",
        "        self._slot = LatestFrame()\n",
        T_CAM,
    ),
    (
        "c6a",
        CAP,
        "        self._stop.clear()\n        self._slot = LatestFrame()\n",
        "        self._stop.clear()\n",
        T_CAM,
    ),
    (
        "c7a",
        CAP,
        "        if self._thread.is_alive():  # stop() gave up",
        "        if False:  # stop() gave up",
        T_CAM,
    ),
]
