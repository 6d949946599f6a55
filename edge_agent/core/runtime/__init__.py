"""Which runtime runs a model, pure: provider plans, TensorRT choices, ORT compatibility, ONNX wire."""
