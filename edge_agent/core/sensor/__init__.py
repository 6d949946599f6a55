"""Serial sensor readings, pure: line parsers and trigger expressions, readings -> windows for sensor models."""
