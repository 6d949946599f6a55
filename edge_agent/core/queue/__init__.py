"""The outbox's pure decisions: admission, full-disk steps, reconnect backoff."""
