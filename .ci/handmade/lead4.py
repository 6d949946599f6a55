"""Hand-made bugs: argparse ranges and `config check` (lead, 2026-12-01)."""

AG = "edge_agent/app/cli/argtypes.py"
CF = "edge_agent/app/cli/config_cmd.py"
T = "tests/app/cli tests/core/config/test_config_example.py tests/core/config/test_config_rules.py tests/app/updates/test_update_security.py"
BUGS = [
    ("ag1", AG, "        if not (lo <= value <= hi) or", "        if not (lo < value <= hi) or", T),
    (
        "ag2",
        AG,
        "        if not (lo <= value <= hi) or (isinstance(value, float) and math.isnan(value)):",
        "        if not (lo <= value <= hi):",
        T,
    ),
    (
        "ag3",
        AG,
        'positive_int = _ranged(int, 1, 2**31 - 1, "a whole number >= 1")',
        'positive_int = _ranged(int, 0, 2**31 - 1, "a whole number >= 1")',
        T,
    ),
    (
        "ag4",
        AG,
        'unit_interval = _ranged(float, 0.0, 1.0, "a number from 0 to 1")',
        'unit_interval = _ranged(float, 0.0, 100.0, "a number from 0 to 1")',
        T,
    ),
    (
        "cf1",
        CF,
        '        ("classifier.model", cfg.classifier.model if cfg.classifier else ""),\n',
        "",
        T,
    ),
    (
        "cf2",
        CF,
        "    camera = repr(redact_source(src)) if isinstance(src, str) else repr(src)",
        "    camera = repr(src)",
        T,
    ),
    ("cf3", CF, '    warnings += [f"{path}: {w}" for w in update_warnings(cfg)]\n', "", T),
    (
        "cf4",
        CF,
        '    if low is not None:\n        warnings.append(f"{path}: {low}")\n',
        "",
        T,
    ),
    ("cf5", CF, "    require_detector(cfg, str(path))\n", "", T),
    (
        "cf6",
        CF,
        "        path = config_path(args.file or args.config)",
        "        path = config_path(args.file)",
        T,
    ),
    (
        "cf7",
        CF,
        "f\"{cfg.mqtt.host}:{cfg.mqtt.port if cfg.mqtt.enabled else 'disabled'})\\n\"",
        'f"{cfg.mqtt.host}:{cfg.mqtt.port})\\n"',
        T,
    ),
]
