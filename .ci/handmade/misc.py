"""Hand-made bugs: the MQTT sync session and the frame ring."""

SS = "edge_agent/adapters/mqtt/session.py"
FR = "edge_agent/adapters/updates/frame_ring.py"
T_SS = "tests/adapters/mqtt/test_sync_session.py tests/adapters/mqtt/test_sync_accounting.py tests/adapters/mqtt/test_sync_guarantees.py"
T_FR = "tests/adapters/updates/test_frame_ring.py tests/adapters/updates/test_store_state.py tests/app/updates/test_model_switch.py"
BUGS = [
    (
        "ss1",
        SS,
        "                if early:  # matched by the next take_acks\n                    self.acks.append(mid)\n",
        "",
        T_SS,
    ),
    (
        "ss2",
        SS,
        "            elif not early:\n                self.status_mids.add(mid)",
        "            else:\n                self.status_mids.add(mid)",
        T_SS,
    ),
    ("ss3", SS, "                else:\n                    self.early.add(mid)\n", "", T_SS),
    (
        "ss4",
        SS,
        "            return [r for rows in self.mids.values() for r in rows]",
        "            return [rows[0] for rows in self.mids.values()]",
        T_SS,
    ),
    ("ss5", SS, "                    self.batch_mids.discard(mid)\n", "", T_SS),
    (
        "fr1",
        FR,
        "        if self._last is not None and now - self._last < self.interval_s:",
        "        if self._last is not None and now - self._last < self.interval_s / 10:",
        T_FR,
    ),
    ("fr2", FR, "            if age <= self.max_age_s:", "            if age <= 2 * self.max_age_s:", T_FR),
    (
        "fr3",
        FR,
        "        return out[-self.max_frames :] if self.max_frames > 0 else []",
        "        return out[: self.max_frames] if self.max_frames > 0 else []",
        T_FR,
    ),
    ("fr4", FR, "                os.fchmod(f.fileno(), 0o600)\n", "", T_FR),
    ("fr5", FR, "            self.prune(now)\n", "", T_FR),
]
