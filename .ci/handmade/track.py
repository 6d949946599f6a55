"""Hand-made bugs: `infer --track` and `track` (q4, 2026-12-01), the reviewer's kinds: a key or
flag ignored, a boundary moved, a guard limited, the order reversed. Tests: the in-process file
(when present: the as-landed run had only the subprocess ones) and tests/app/workbench/test_track_cli.py."""

import pathlib

TI = "edge_agent/app/workbench/track_infer.py"
TC = "edge_agent/app/workbench/track_cmd.py"
T = " ".join(
    t
    for t in (
        "tests/app/workbench/test_track_inproc.py",
        "tests/app/workbench/test_track_cli.py",
        "tests/app/workbench/test_infer_inproc.py",
    )
    if pathlib.Path(t).exists()
)
BUGS = [
    ("t1", TI, "yield path.stem, n / fps, img", "yield path.stem, n / 10.0, img", T),  # --fps ignored
    ("t2", TI, "rate = rate if 0 < rate <= 1000 else 25.0", "rate = 25.0", T),  # video rate ignored
    (
        "t3",
        TI,
        "    for path in expand_inputs(inputs):",
        "    for path in sorted(expand_inputs(inputs), reverse=True):",
        T,
    ),
    (
        "t4",
        TI,
        "    tracker = Tracker(tracker_params(cfg))",
        "    tracker = Tracker(tracker_params(Config()))",
        T,
    ),
    (
        "t5",
        TI,
        "        if save_dir:\n            shown",
        "        if save_dir and frames == 1:\n            shown",
        T,
    ),
    ("t6", TI, "    return 1 if failures else 0", "    return 0", T),
    (
        "t7",
        TI,
        "    input_set = {\n        p.resolve() for p in expand_inputs(inputs)\n    }",
        "    input_set: set[Path] = set()",
        T,
    ),
    ("t8", TI, "    problem = pixel_problem(size, max_pixels)", "    problem = None", T),
    ("t9", TI, '"objects": tracker.next_id - 1,', '"objects": len(tracker.tracks),', T),
    (
        "t10",
        TI,
        "    for ev in events.end_all(tracker.end_all(), last_ts):",
        "    for ev in events.end_all(tracker.end_all(), 0.0):",
        T,
    ),
    ("t11", TC, "        lost_frames=args.lost_frames,", "        lost_frames=_CFG.lost_frames,", T),
    ("t12", TC, "        per_class=args.per_class,", "        per_class=False,", T),
    (
        "t13",
        TC,
        "            for frame in range(1, last + 1):",
        "            for frame in range(1, last):",
        T,
    ),
    ("t14", TC, "        low=args.low,", "        low=_CFG.low,", T),
]
