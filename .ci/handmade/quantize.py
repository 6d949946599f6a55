"""Hand-made bugs in quantize.py and dequantize.py (issue 19, 2026-12-01): flags that never reach
the quantizer, a boundary moved, the calibration off by one, per-channel axes wrong, a zero point or
a clamp dropped, FP16 left somewhere. See docs/mutation-ledger.md, "Model tools and the onnxruntime
adapter". ``tools.py`` has the first round (exclusions, --reduce-range, --samples, metadata)."""

QU = "edge_agent/tools/quantize.py"
DQ = "edge_agent/tools/dequantize.py"
T = (
    "tests/tools/test_quantize.py tests/tools/test_quantize_errors.py tests/tools/test_quantize_inputs.py "
    "tests/tools/test_quantize_flags.py tests/tools/test_quantize_calls.py tests/tools/test_dequantize_rules.py "
    "tests/tools/test_dequantize_kinds.py tests/app/workbench/test_model_cmd_flags.py tests/tools/test_classifier.py "
    "tests/tools/test_model_convert.py"
)
BUGS = [
    # per-tensor weights: one scale for a whole Conv
    ("h1", QU, "                per_channel=True,", "                per_channel=False,", T),
    # --method entropy and percentile swapped
    (
        "h2",
        QU,
        '"entropy": CalibrationMethod.Entropy,\n                "percentile": CalibrationMethod.Percentile,',
        '"entropy": CalibrationMethod.Percentile,\n                "percentile": CalibrationMethod.Entropy,',
        T,
    ),
    # percentile calibration without its 99.999 (onnxruntime's default 99.999 too: the option dropped)
    (
        "h3",
        QU,
        '                extra["CalibPercentile"] = 99.999',
        '                extra["CalibPercentile"] = 99.9',
        T,
    ),
    # the last calibration image never picked by --samples
    ("h4", QU, "np.linspace(0, len(paths) - 1, n)", "np.linspace(0, len(paths) - 2, n)", T),
    # the calibration skips the first image (sample count off by one)
    (
        "h5",
        QU,
        "        self.input_name = input_name\n        self.files = files\n        self.preprocess = preprocess\n        self.i = 0",
        "        self.input_name = input_name\n        self.files = files\n        self.preprocess = preprocess\n        self.i = 1",
        T,
    ),
    # arm64 gets signed activations
    ("h6", QU, '"arm64": ("QUInt8", "QInt8")', '"arm64": ("QInt8", "QInt8")', T),
    # the opset bound moved: opset 12 models left for per-channel QDQ
    ("h7", QU, "MIN_OPSET = 13", "MIN_OPSET = 12", T),
    # image suffixes matched case-sensitively (.JPG skipped)
    ("h8", QU, "p.suffix.lower() in IMAGE_SUFFIXES", "p.suffix in IMAGE_SUFFIXES", T),
    # class-per-folder layouts: subfolders not searched
    ("h9", QU, 'folder.rglob("*")', 'folder.glob("*")', T),
    # RT-DETR calibrated on letterboxed images
    (
        "h10",
        QU,
        "preprocess_detector(img, hw, dtype, stretch=stretch)",
        "preprocess_detector(img, hw, dtype)",
        T,
    ),
    # the writable check dropped
    (
        "h11",
        QU,
        "    if not os.access(parent, os.W_OK | os.X_OK):",
        "    if not os.access(parent, os.F_OK):",
        T,
    ),
    # the INT8 model not lowered again for --target-ort (the quantizer's ai.onnx.ml stamps stay)
    (
        "h12",
        QU,
        "                onnx.save(convert_model(onnx.load(str(part)), target_ort, log.info), str(part))\n",
        "",
        T,
    ),
    # --naive ignored
    ("h13", QU, "excluded = [] if naive else", "excluded = [] if False else", T),
    # the FP32 copy of a quantized source never written
    ("h14", QU, "                if float_copy is not None:", "                if float_copy is None:", T),
    # the retry after a failed symbolic pass runs the symbolic pass again
    (
        "h15",
        QU,
        '            log.warning("symbolic shape inference failed (%s); pre-processing without it", first)\n'
        "            quant_pre_process(str(upgraded), str(dst), skip_symbolic_shape=True)",
        '            log.warning("symbolic shape inference failed (%s); pre-processing without it", first)\n'
        "            quant_pre_process(str(upgraded), str(dst))",
        T,
    ),
    # the failure's hint given for an FP32 source too
    (
        "h16",
        QU,
        '            if src_kind != "fp32"\n            else ""',
        '            if True\n            else ""',
        T,
    ),
    # dequantize: the weight zero point ignored
    (
        "d1",
        DQ,
        "z = np.zeros((), np.float32) if zp is None else np.asarray(zp, np.float32)",
        "z = np.zeros((), np.float32)",
        T,
    ),
    # dequantize: MatMulInteger's per-column scales taken per row
    ("d2", DQ, 'integer_op(node, "MatMul", 1)', 'integer_op(node, "MatMul", 0)', T),
    # dequantize: QLinearConv's int32 bias scaled by the weight scale only
    ("d3", DQ, "np.float32(x_scale) * ws.astype(np.float32)", "ws.astype(np.float32)", T),
    # dequantize: the Relu fused into a QLinearConv not put back
    (
        "d4",
        DQ,
        '            emit("Conv", conv_in, outs[0], node)\n            fused_relu(node, outs[0], ins[6], ins[7])',
        '            emit("Conv", conv_in, outs[0], node)',
        T,
    ),
    # FP16: value_info left at float16
    (
        "d5",
        DQ,
        "    for v in list(g.input) + list(g.output) + list(g.value_info):",
        "    for v in list(g.input) + list(g.output):",
        T,
    ),
    # has_fp16 looks at the initializers only
    (
        "d6",
        DQ,
        "        v.type.tensor_type.elem_type == f16 for v in list(g.input) + list(g.output)",
        "        False for v in list(g.input) + list(g.output)",
        T,
    ),
    # QGemm's bias without the activation scale
    ("d7", DQ, '                    * np.float32(const(ins[1], "scale"))\n', "", T),
    # a QuantizeLinear without zero point (uint8 0) not taken as a clamp
    ("d8", DQ, "    if zp is None:\n        return True", "    if zp is None:\n        return False", T),
    # QLinearConcat's first input dropped
    ("d9", DQ, "for i in range(2, len(ins), 3)]", "for i in range(5, len(ins), 3)]", T),
    # a "mixed" model not dequantized
    (
        "d10",
        DQ,
        '("dynamic_int8", "qoperator_int8", "qdq_int8", "mixed")',
        '("dynamic_int8", "qoperator_int8", "qdq_int8")',
        T,
    ),
    # Constant tensors in FP16 left as they are
    (
        "d11",
        DQ,
        "            if a.type == onnx.AttributeProto.TENSOR:\n                fix_tensor(a.t)",
        "            if False:\n                fix_tensor(a.t)",
        T,
    ),
    # the dynamic Conv's weight per input channel
    ("d12", DQ, 'integer_op(node, "Conv", 0)', 'integer_op(node, "Conv", 1)', T),
]
