"""Hand-made bugs: queue and status commands."""

QC = "edge_agent/app/cli/queue_cmd.py"
ST = "edge_agent/app/cli/status_cmd.py"
T_Q = "tests/app/cli/test_queue_cli.py tests/test_durable_writes.py tests/adapters/outbox/test_salvage.py"
T_S = "tests/app/cli/test_status_view.py tests/app/cli/test_commands.py"
BUGS = [
    ("q1", QC, "            if not sys.stdin.isatty():", "            if sys.stdin.isatty():", T_Q),
    (
        "q2",
        QC,
        '            if answer.strip().lower() not in ("y", "yes"):',
        '            if answer.strip().lower() in ("n", "no"):',
        T_Q,
    ),
    (
        "q3",
        QC,
        '        return _dump(path, args.n if action == "peek" else None, getattr(args, "output", None))',
        '        return _dump(path, args.n if action == "peek" else 10, getattr(args, "output", None))',
        T_Q,
    ),
    (
        "q4",
        QC,
        '        return 0\n    reason = f" (last error',
        '        return 0\n    return 0\n    reason = f" (last error',
        T_Q,
    ),
    ("q5", QC, "EXPORT_MODE = 0o600", "EXPORT_MODE = 0o644", T_Q),
    (
        "q6",
        QC,
        '    if not cfg.mqtt.enabled:\n        raise SyncError("mqtt.enabled = false: nothing to drain to")\n',
        "",
        T_Q,
    ),
    (
        "q7",
        QC,
        '        sys.stderr.write(f"drained {before - left} messages',
        '        sys.stderr.write(f"drained {before} messages',
        T_Q,
    ),
    (
        "st1",
        ST,
        '    stale = state == "running" and age_s > max_age',
        '    stale = state == "running" and age_s > 2 * max_age',
        T_S,
    ),
    (
        "st2",
        ST,
        '    if d.get("state") == "running" and snap.is_stale(args.max_age):',
        "    if snap.is_stale(args.max_age):",
        T_S,
    ),
    ("st4", ST, "    if s < 5400:", "    if s < 3600:", T_S),
    ("st5", ST, "    same_day = time.localtime(now)[:3] == local[:3]", "    same_day = True", T_S),
]
