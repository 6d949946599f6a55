"""The host system: durable file writes, systemd notify, the status file, probes, /metrics."""
