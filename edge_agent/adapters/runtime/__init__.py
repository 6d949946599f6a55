"""onnxruntime and the board under it: sessions, the provider plan made once, TensorRT engines,
board detection, model facts."""
