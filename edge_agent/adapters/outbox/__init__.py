"""The durable on-device queue over SQLite: one Outbox made of small parts (docs/architecture.md)."""
