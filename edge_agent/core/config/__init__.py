"""Config schema by section: a section's name tells its module (docs/architecture.md has the table)."""
