"""Hand-made bugs: cameras (adapters/camera/capture.py, mjpeg_http.py), sd_notify, the status file."""

CA = "edge_agent/adapters/camera/capture.py"
MJ = "edge_agent/adapters/camera/mjpeg_http.py"
SD = "edge_agent/adapters/host/sdnotify.py"
SF = "edge_agent/adapters/host/statusfile.py"
T_CA = "tests/adapters/camera/test_camera.py tests/adapters/camera/test_mjpeg.py tests/adapters/camera/test_rtsp.py"
T_MJ = "tests/adapters/camera/test_mjpeg.py tests/adapters/camera/test_decode_bounds.py tests/adapters/camera/test_decode_and_grant.py tests/adapters/camera/test_bounded_input.py"
T_SD = "tests/adapters/host/test_sdnotify.py tests/app/agent/test_ready_and_stop.py"
T_SF = (
    "tests/adapters/host/test_statusfile.py tests/app/cli/test_status_view.py tests/app/cli/test_commands.py"
)
BUGS = [
    ("ca1", CA, "            if self._frame is not None:\n                self.dropped += 1\n", "", T_CA),
    (
        "ca2",
        CA,
        "        self.drop_stale = (not self.kind.finite) if drop_stale is None else drop_stale",
        "        self.drop_stale = True if drop_stale is None else drop_stale",
        T_CA,
    ),
    (
        "ca3",
        CA,
        "                if self.max_reconnects is not None and attempts > self.max_reconnects:",
        "                if self.max_reconnects is not None and attempts > self.max_reconnects + 1:",
        T_CA,
    ),
    (
        "ca4",
        CA,
        "                    if repeats >= self.repeat_limit or now - last_new >= self.cfg.stall_timeout_s:",
        "                    if repeats > self.repeat_limit:",
        T_CA,
    ),
    (
        "ca5",
        CA,
        '                if now - last_new >= self.cfg.stall_timeout_s:\n                    return f"no new frame',
        '                if now - last_new >= 10 * self.cfg.stall_timeout_s:\n                    return f"no new frame',
        T_CA,
    ),
    (
        "ca6",
        CA,
        "            except ImageError as exc:\n                self.skipped += 1\n",
        "            except ImageError as exc:\n",
        T_CA,
    ),
    (
        "ca7",
        CA,
        "        self.reconnect_min_s = min(reconnect_min_s, cfg.reconnect_max_s)",
        "        self.reconnect_min_s = reconnect_min_s",
        T_CA,
    ),
    (
        "ca8",
        CA,
        "                else:\n                    repeats, last_digest, last_new = 0, digest, now",
        "                else:\n                    repeats, last_digest = 0, digest",
        T_CA,
    ),
    (
        "ca9",
        CA,
        '        return self._state in ("ended", "failed") and self._slot.empty',
        '        return self._state in ("ended", "failed")',
        T_CA,
    ),
    ("mj1", MJ, "        if resp.status == 401:", "        if resp.status == 403:", T_MJ),
    ("mj2", MJ, "            while len(self._ready) > 1:\n                self._ready.popleft()\n", "", T_MJ),
    (
        "mj3",
        MJ,
        "        if part.truncated or not is_complete_jpeg(part.body):",
        "        if part.truncated:",
        T_MJ,
    ),
    (
        "mj4",
        MJ,
        "        if credentials_file:\n            user, password = read_credentials(credentials_file)\n",
        "",
        T_MJ,
    ),
    (
        "mj5",
        MJ,
        "    problem = pixel_problem(size, max_pixels)",
        "    problem = pixel_problem(size, DEFAULT_MAX_PIXELS)",
        T_MJ,
    ),
    (
        "mj6",
        MJ,
        '        path = parts.path or "/"\n        if parts.query:\n            path += "?" + parts.query\n',
        '        path = parts.path or "/"\n',
        T_MJ,
    ),
    (
        "sd1",
        SD,
        '        addr = "\\0" + addr[1:]  # abstract namespace',
        "        addr = addr[1:]  # abstract namespace",
        T_SD,
    ),
    (
        "sd2",
        SD,
        "    return usec / 2_000_000 if usec > 0 else None",
        "    return usec / 1_000_000 if usec > 0 else None",
        T_SD,
    ),
    ("sd3", SD, "    if pid and pid.strip() != str(os.getpid()):\n        return None\n", "", T_SD),
    (
        "sd4",
        SD,
        '    return notify("STATUS=" + " ".join(text.splitlines()), env)',
        '    return notify("STATUS=" + text, env)',
        T_SD,
    ),
    ("sf1", SF, "        os.chmod(tmp, 0o644)\n", "", T_SF),
    (
        "sf2",
        SF,
        "    return StatusSnapshot(data=data, written_at=written, age_s=max(0.0, t - written))",
        "    return StatusSnapshot(data=data, written_at=written, age_s=t - written)",
        T_SF,
    ),
    ("sf3", SF, "        return self.age_s > max_age_s", "        return self.age_s > 2 * max_age_s", T_SF),
]
