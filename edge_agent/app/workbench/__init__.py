"""Commands on files and models: infer, track, inspect, quantize, validate, bench, export-check, convert."""
