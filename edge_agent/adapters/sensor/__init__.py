"""The serial sensor: a pyserial reader thread."""
