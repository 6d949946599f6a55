"""Hand-made bugs: the model-work commands' flags and file handling (quantize, model convert)."""

QC = "edge_agent/app/workbench/quantize_cmd.py"
MC = "edge_agent/app/workbench/convert_cmd.py"
T_Q = "tests/tools tests/test_durable_writes.py"
T_M = "tests/tools tests/test_durable_writes.py"
BUGS = [
    ("qc1", QC, "            args.reduce_range,\n", "            False,\n", T_Q),
    ("qc2", QC, "            target_ort=args.target_ort,\n", "            target_ort=None,\n", T_Q),
    (
        "qc3",
        QC,
        "    val_root = Path(args.val) if args.val else Path(args.calib)",
        "    val_root = Path(args.calib)",
        T_Q,
    ),
    ("qc4", QC, "    move_durable(out, bad)", "    out.rename(bad)", T_Q),
    (
        "qc5",
        QC,
        "    val_files = pick_samples(image_files(val_root), args.val_max_images)",
        "    val_files = pick_samples(image_files(val_root), 64)",
        T_Q,
    ),
    (
        "qc6",
        QC,
        '    if out.resolve() == src.resolve():\n        raise QuantizeError(f"{out}: output would overwrite the input model")\n',
        "",
        T_Q,
    ),
    (
        "qc7",
        QC,
        "    calib = pick_samples(image_files(Path(args.calib)), args.samples)",
        "    calib = pick_samples(image_files(Path(args.calib)), 128)",
        T_Q,
    ),
    ("mc1", MC, "    with durable_file(dst, MODEL_MODE) as f:", '    with open(dst, "wb") as f:', T_M),
    (
        "mc2",
        MC,
        '    if dst.resolve() == src.resolve():\n        raise EdgeAgentError(f"{dst}: refusing to overwrite the input; choose another -o")\n',
        "",
        T_M,
    ),
    (
        "mc3",
        MC,
        "    files = pick_samples(image_files(root), args.max_images)",
        "    files = pick_samples(image_files(root), 8)",
        T_M,
    ),
    (
        "mc4",
        MC,
        "    if args.no_validate:\n        return 0\n    return _validate",
        "    return _validate",
        T_M,
    ),
    ("mc5", MC, "MODEL_MODE = 0o644", "MODEL_MODE = 0o600", T_M),
    ("mc6", MC, "        return 2\n    return 1", "        return 1\n    return 1", T_M),
]
