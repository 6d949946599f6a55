"""Serial sensor readings, pure: line parsers and trigger expressions."""
