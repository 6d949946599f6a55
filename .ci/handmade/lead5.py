"""Hand-made bugs: `validate` (the premise's accuracy check) and `run`/`demo` (lead, 2026-12-01).

The new test files are added to a bug's tests only when present: the as-landed run had neither."""

import pathlib

VT = "edge_agent/tools/validate.py"
VC = "edge_agent/app/workbench/validate_cmd.py"
RC = "edge_agent/app/cli/run_cmd.py"
TV = (
    "tests/app/workbench/test_validate_cmd.py "
    if pathlib.Path("tests/app/workbench/test_validate_cmd.py").exists()
    else ""
) + (
    "tests/tools/test_validate_any.py tests/tools/test_classifier.py tests/tools/test_quantize.py "
    "tests/inference/test_presets.py tests/app/cli/test_cli_manners.py tests/tools/test_shared_yolov8n.py"
)
TR = " ".join(
    t
    for t in (
        "tests/app/cli/test_run_cmd.py",  # added with this list: absent in the as-landed run
        "tests/app/cli/test_runtime_imports.py",
        "tests/app/cli/test_stranger_cli.py",
        "tests/app/cli/test_commands.py",
        "tests/app/cli/test_hostile_cli.py",
    )
    if pathlib.Path(t).exists()
)
BUGS = [
    ("v1", VT, "    if kind != ckind:\n", "    if False:\n", TV),
    (
        "v2",
        VT,
        "    cand = OnnxModel(cand_path, provider=provider",
        "    cand = OnnxModel(ref_path, provider=provider",
        TV,
    ),
    (
        "v3",
        VT,
        "    cand = OnnxModel(cand_path, provider=provider, threads=threads",
        "    cand = OnnxModel(cand_path, provider=None, threads=threads",
        TV,
    ),
    ("v4", VT, "    th = thresholds or Thresholds()", "    th = Thresholds()", TV),
    (
        "v5",
        VC,
        "        max_conf_delta=args.max_conf_delta,",
        "        max_conf_delta=args.max_map_drop,",
        TV,
    ),
    ("v6", VC, "        max_top1_drop=args.max_top1_drop,", "        max_top1_drop=0.02,", TV),
    ("v7", VC, "        Path(args.labels) if args.labels else None,", "        None,", TV),
    (
        "v8",
        VC,
        "    return 0 if report.passed else 2 if report.no_verdict else 1",
        "    return 0 if report.passed else 1",
        TV,
    ),
    (
        "v9",
        VC,
        "    files = pick_samples(image_files(root), args.max_images)",
        "    files = image_files(root)",
        TV,
    ),
    ("v10", VC, "        args.threads,\n    )", "        None,\n    )", TV),
    (
        "v11",
        "edge_agent/core/vision/thresholds.py",
        "    min_recall: float = 0.9",
        "    min_recall: float = 0.8",
        TV,
    ),
    (
        "r1",
        RC,
        "    agent = Agent(cfg, path, max_frames=args.max_frames)",
        "    agent = Agent(cfg, path, max_frames=None)",
        TR,
    ),
    ("r2", RC, "    require_detector(cfg, str(path))\n", "", TR),
    (
        "r3",
        RC,
        '        "camera": {"source": str(demo_samples()), "loop": loop},',
        '        "camera": {"source": str(demo_samples()), "loop": False},',
        TR,
    ),
    (
        "r4",
        RC,
        '        "queue": {"path": str(state_dir / "outbox.db")},',
        '        "queue": {"path": "outbox.db"},',
        TR,
    ),
    ("r5", RC, '        "output": {"mode": "every_frame"},\n', "", TR),
    (
        "r6",
        RC,
        "    agent = Agent(cfg, None, max_frames=args.frames, on_result=show)",
        "    agent = Agent(cfg, None, max_frames=None, on_result=show)",
        TR,
    ),
    (
        "r7",
        RC,
        '        data["classifier"] = {"model": str(cls), "crop_padding": 0.15}',
        '        data["classifier"] = {"model": str(cls)}',
        TR,
    ),
    (
        "r8",
        RC,
        "    if not os.access(state, os.W_OK | os.X_OK):",
        "    if not os.access(state, os.R_OK):",
        TR,
    ),
    ("r9", RC, '        "mqtt": {"enabled": False},', '        "mqtt": {"enabled": True},', TR),
]
