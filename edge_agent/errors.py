"""One exception hierarchy for the whole package.

Every error carries a message that names the file/field/value and what was expected, so the
CLI can print exactly one line and the service can log-count-continue without a traceback.
"""

from __future__ import annotations


class EdgeAgentError(Exception):
    """Base of every error edge-agent raises on purpose."""


class ConfigError(EdgeAgentError):
    """A config file is missing, not TOML, or fails validation (names the key path)."""


class ModelError(EdgeAgentError):
    """A model file is missing, truncated, not ONNX, or not the kind of model expected."""


class ProviderError(EdgeAgentError):
    """No requested execution provider could be initialised."""


class ImageError(EdgeAgentError):
    """An image file is missing, empty, corrupt or not an image."""


class CameraError(EdgeAgentError):
    """A camera source cannot be opened or stopped delivering frames."""


class SensorError(EdgeAgentError):
    """A serial sensor cannot be opened or sent a line that does not parse."""


class QueueError(EdgeAgentError):
    """The on-device outbox cannot be opened or written."""


class QueueFullError(QueueError):
    """The outbox is at its cap and the policy is ``reject_new`` (or the disk is full)."""


class SyncError(EdgeAgentError):
    """The MQTT broker cannot be reached or refused us (TLS, auth)."""


class QuantizeError(EdgeAgentError):
    """Quantization failed or produced a model that fails validation."""
