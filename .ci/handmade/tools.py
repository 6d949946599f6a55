"""Hand-made bugs in the model tools (convert, quantize, dequantize, graph, bench) and the
onnxruntime adapter (runtime, tensorrt, board): see docs/mutation-ledger.md, "Hand-made bugs"."""

import os

CV = "edge_agent/tools/convert.py"
QU = "edge_agent/tools/quantize.py"
DQ = "edge_agent/tools/dequantize.py"
GR = "edge_agent/tools/graph.py"
BE = "edge_agent/tools/bench.py"
RT = "edge_agent/adapters/runtime/onnx_model.py"
TR = "edge_agent/adapters/runtime/tensorrt_host.py"
BO = "edge_agent/adapters/runtime/board.py"
T_TOOLS = "tests/tools tests/core/runtime/test_ort_compat.py tests/core/vision/test_format_registry.py"
# the files that exist (the "before" round ran without the test files added with this list)
T_RT = " ".join(
    p
    for p in [
        "tests/adapters/runtime/test_runtime.py",
        "tests/adapters/runtime/test_runtime_session.py",
        "tests/adapters/runtime/test_provider_fallback.py",
        "tests/adapters/runtime/test_board_providers.py",
        "tests/adapters/runtime/test_jetson_plan.py",
        "tests/inference/test_guard.py",
        "tests/inference/test_arm_models.py",
        "tests/app/updates/test_model_gate.py",
        "tests/tools/test_bench.py",
    ]
    if os.path.exists(p)
)
BUGS = [
    # convert: the opset bound one off (an opset-17 model is left as is for onnxruntime 1.11)
    ("cv1", CV, "    if opset > limits.opset:", "    if opset > limits.opset + 1:", T_TOOLS),
    # convert: the ai.onnx.ml bound one off (ml opset 4 let through for a runtime reading 3)
    ("cv2", CV, "    if ml > limits.ml_opset:", "    if ml > limits.ml_opset + 1:", T_TOOLS),
    # convert: the IR kept when the opset was lowered (only the opset is converted)
    ("cv3", CV, "    model.ir_version = ir\n", "", T_TOOLS),
    # convert: Cast's opset-19 saturate attribute kept on the lowered node
    ("cv5", CV, '        for name in ("saturate",):\n            _drop_attr(node, name)\n', "", T_TOOLS),
    # quantize: the float tail exclusions ignored
    ("q1", QU, "                nodes_to_exclude=excluded,", "                nodes_to_exclude=[],", T_TOOLS),
    # quantize: --reduce-range ignored
    (
        "q2",
        QU,
        "                reduce_range=reduce_range,\n                activation",
        "                reduce_range=False,\n                activation",
        T_TOOLS,
    ),
    # quantize: --samples takes the first n files, not n spread over the classes
    (
        "q4",
        QU,
        "    return [paths[i] for i in sorted(set(idx.tolist()))]",
        "    return list(paths[:n])",
        T_TOOLS,
    ),
    # quantize: the source's metadata (names, imgsz, stride) not carried to the INT8 model
    ("q5", QU, "    meta.update(src_meta)\n", "", T_TOOLS),
    # dequantize: per-channel scales always broadcast on axis 0
    ("dq1", DQ, "        shape[axis % qf.ndim] = s.size", "        shape[0] = s.size", T_TOOLS),
    # graph: the DFL conv after a Softmax is taken for a learned layer (tail ends early)
    (
        "g1",
        GR,
        '_DISTRIBUTION_OPS = frozenset({"Softmax", "Transpose", "Reshape"})',
        '_DISTRIBUTION_OPS = frozenset({"Transpose", "Reshape"})',
        T_TOOLS,
    ),
    # bench: the warm-up runs are counted as samples
    ("be1", BE, "            if it >= warmup:", "            if it >= 0:", T_TOOLS),
    # runtime: the thread count never reaches onnxruntime
    (
        "r1",
        RT,
        "                so.intra_op_num_threads = plan.intra_op_threads\n",
        "                pass\n",
        T_RT,
    ),
    # runtime: a failing provider drops the last provider (CPU) instead of itself
    ("r2", RT, "                chain = chain[1:]", "                chain = chain[:-1]", T_RT),
    # runtime: no fallback: the first provider's failure is the end
    ("r3", RT, "                if chain[0][0] == CPU or len(chain) == 1:", "                if True:", T_RT),
    # runtime: the pool threads spin again after each run
    ("r4", RT, '"session.intra_op.allow_spinning", "0"', '"session.intra_op.allow_spinning", "1"', T_RT),
    # runtime: a quantized float_model accepted as the TensorRT source
    (
        "r5",
        RT,
        "            if fgraph.quant_kind in QUANTIZED_KINDS:",
        "            if fgraph.quant_kind == 'dynamic_int8':",
        T_RT,
    ),
    # tensorrt: the oldest libnvinfer taken for the newest
    (
        "t1",
        TR,
        "        return max(found, key=_version_key)",
        "        return min(found, key=_version_key)",
        T_RT,
    ),
    # board: SMT siblings counted as cores (threads = logical CPUs)
    (
        "b1",
        BO,
        "    return len(pairs) or processors or logical",
        "    return processors or len(pairs) or logical",
        T_RT,
    ),
]
