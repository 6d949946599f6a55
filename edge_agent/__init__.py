"""edge-agent: offline ONNX inference on ARM boards with a durable outbox synced over MQTT."""

__version__ = "0.1.0"
