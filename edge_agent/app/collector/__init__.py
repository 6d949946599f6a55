"""The collector's loop and its commands (collect, fleet)."""
