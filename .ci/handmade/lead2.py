"""Hand-made bugs: the package author's commands (model pack) and the fleet views (lead, 2026-12-01)."""

PK = "edge_agent/app/updates/pack_cmd.py"
FL = "edge_agent/app/collector/fleet_cmd.py"
T_PK = (
    "tests/app/updates/test_packages.py tests/app/updates/test_model_cli_manners.py tests/core/updates/test_package_rules.py "
    "tests/app/updates/test_update_security.py tests/core/updates/test_manifest_rules.py tests/adapters/updates/test_package_file.py"
)
T_FL = "tests/adapters/collector/test_fleet_retire.py tests/app/collector/test_collector_e2e.py tests/app/collector/test_acceptance_agent.py"
CC = "edge_agent/app/collector/collect_cmd.py"
T_CC = "tests/app/collector/test_collect_cmd.py tests/app/collector/test_collect_leave.py tests/core/config/test_collector_config.py"
BUGS = [
    ("pk1", PK, "    if problems and not args.skip_guard:", "    if problems and args.skip_guard:", T_PK),
    ("pk2", PK, "        for p in imgs[:32]:", "        for p in imgs[:8]:", T_PK),
    (
        "pk3",
        PK,
        '            need = max(need, row.name, key=lambda v: tuple(int(x) for x in v.split(".")))',
        "            need = row.name",
        T_PK,
    ),
    ("pk4", PK, '        if name.endswith(".onnx"):', '        if name == "detector.onnx":', T_PK),
    ("pk5", PK, "        force=args.force,", "        force=False,", T_PK),
    (
        "pk6",
        PK,
        "        min_agent_version=args.min_agent_version or __version__,",
        "        min_agent_version=__version__,",
        T_PK,
    ),
    (
        "pk7",
        PK,
        '    parse_manifest(manifest_bytes(m), "pack")  # the same checks a device will make\n',
        "",
        T_PK,
    ),
    (
        "pk8",
        PK,
        '        name=args.name or stem.replace(" ", "_"),',
        '        name=stem.replace(" ", "_"),',
        T_PK,
    ),
    (
        "pk9",
        PK,
        'p.suffix.lower() in (".jpg", ".jpeg", ".png")',
        'p.suffix in (".jpg", ".jpeg", ".png")',
        T_PK,
    ),
    (
        "pk10",
        PK,
        "    if args.float_source:\n",
        "    if args.float_source and args.classifier:\n",
        T_PK,
    ),
    (
        "pk11",
        PK,
        '            raise ConfigError(f"--version: {exc}") from None',
        "            pass",
        T_PK,
    ),
    (
        "pk12",
        PK,
        '        task="detect+classify" if args.classifier else "detect",',
        '        task="detect",',
        T_PK,
    ),
    (
        "fl1",
        FL,
        "    url = args.db or os.environ.get(DB_ENV) or DEFAULT_DB",
        "    url = args.db or DEFAULT_DB",
        T_FL,
    ),
    (
        "fl2",
        FL,
        "    if db.schema_version() == 0:",
        "    if db.schema_version() < 0:",
        T_FL,
    ),
    (
        "fl3",
        FL,
        "    if not DEVICE_RE.match(device):",
        "    if not device:",
        T_FL,
    ),
    (
        "fl4",
        FL,
        "        found = db.retire(args.device, args.purge)",
        "        found = db.retire(args.device, False)",
        T_FL,
    ),
    (
        "fl5",
        FL,
        "        n = g.last - g.first + 1\n",
        "        n = g.last - g.first\n",
        T_FL,
    ),
    (
        "fl6",
        FL,
        '            f"{d[\'gaps\']} ({d[\'missing\']} seq)" if d["gaps"] else "0",',
        '            str(d["gaps"]),',
        T_FL,
    ),
    (
        "fl7",
        FL,
        '            "-" if d["backlog"] is None else str(d["backlog"]),',
        '            str(d["backlog"] or "-"),',
        T_FL,
    ),
    (
        "cc1",
        CC,
        "    if tls is None and broker_address(cfg.broker)[2]:\n        tls = ssl.create_default_context()\n",
        "",
        T_CC,
    ),
    ("cc2", CC, "args.quiet_s if leave else None", "5.0 if leave else None", T_CC),
    ("cc3", CC, "    if leave and not cfg.group:", "    if leave and cfg.group is False:", T_CC),
    (
        "cc4",
        CC,
        'FLAGS = ("broker", "db", "prefix", "client_id", "group", "metrics_port")',
        'FLAGS = ("broker", "db", "prefix", "client_id", "metrics_port")',
        T_CC,
    ),
    ("cc5", CC, "        if not collector.left:", "        if collector.left is None:", T_CC),
    (
        "cc6",
        CC,
        '            raise ConfigError(f"{path}: cannot read the collector config: {exc}") from None\n        return parse_collector_config(text, str(path), overrides)',
        '            text = ""\n        return parse_collector_config(text, str(path), overrides)',
        T_CC,
    ),
]
