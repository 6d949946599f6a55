"""The inference layer: read a model, know its task/format/preprocessing, decode its output.

Below both ``app/`` (agent loop, CLI) and ``tools/`` (quantize, validate, bench), so each of them
runs a model exactly the same way and ``tools/`` never imports ``app/``.
"""
