"""The device page wired to the agent: live view, counts, events, status, inference and the editor."""
