"""Hand-made bugs: what a model file says (model_info.py), the receiver's transfers on disk
(adapters/updates/transfers.py), `model`'s options (model_cmd.py) and the loop's config keys (agent.py)."""

MI = "edge_agent/adapters/runtime/model_info.py"
RT = "edge_agent/adapters/runtime/onnx_model.py"
TD = "edge_agent/adapters/updates/transfers.py"
MC = "edge_agent/app/updates/model_cmd.py"
AG = "edge_agent/app/agent/agent.py"
T_MI = "tests/adapters/runtime/test_model_info.py tests/adapters/runtime/test_runtime.py"
T_TD = "tests/adapters/updates/test_receiver_rules.py tests/adapters/updates/test_receiver.py"
T_MC = "tests/app/cli/test_cli_help.py tests/app/updates/test_model_cmd.py"
T_AG = "tests/app/agent/test_agent_inproc.py tests/app/agent/test_agent_inproc_pacing.py"
BUGS = [
    ("mi1", MI, "for ln in text.splitlines() if ln.strip())}", "for ln in text.splitlines())}", T_MI),
    ("mi2", MI, "return (int(val[0]), int(val[1]))", "return (int(val[1]), int(val[0]))", T_MI),
    (
        "mi3",
        RT,
        'names = read_labels_file(labels) if labels else parse_names(meta.get("names"))',
        'names = parse_names(meta.get("names"))',
        T_MI,
    ),
    (
        "mi4",
        MI,
        "    except UnicodeDecodeError as exc:",
        "    except UnicodeError if False else OSError as exc:",
        T_MI,
    ),
    (
        "td1",
        TD,
        "if ok and c.stat().st_size == begin.chunk_len(int(c.name)):",
        "if ok:",
        T_TD,
    ),
    (
        "td2",
        TD,
        "done = [*read_done(workdir), tid][-keep:]",
        "done = [*read_done(workdir), tid][:keep]",
        T_TD,
    ),
    ("td3", TD, "with durable_file(pkg, FILE_MODE) as out:", 'with open(pkg, "wb") as out:', T_TD),
    ("td4", TD, "ok = ok and int(c.name) < begin.chunks", "ok = ok and int(c.name) <= begin.chunks", T_TD),
    (
        "mc1",
        MC,
        'type=int, default=256, help="chunk size in KiB (default 256)"',
        'type=int, default=128, help="chunk size in KiB (default 256)"',
        T_MC,
    ),
    (
        "mc2",
        MC,
        'ins.add_argument("--timeout", type=float, default=900.0,',
        'ins.add_argument("--timeout", type=float,',
        T_MC,
    ),
    (
        "ag1",
        AG,
        "if self.max_frames is not None and self.frames >= self.max_frames:",
        "if self.max_frames is not None and self.frames > self.max_frames:",
        T_AG,
    ),
    (
        "ag2",
        AG,
        "models.classifier, models.classify_ids, models.crop_padding",
        "models.classifier, None, models.crop_padding",
        T_AG,
    ),
    ("ag3", AG, '                    log.info("camera source ended")\n', "", T_AG),
]
