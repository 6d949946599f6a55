"""onnxruntime and the board under it: sessions, TensorRT engines, board detection, model facts."""
