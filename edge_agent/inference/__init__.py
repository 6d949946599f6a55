"""The inference layer: read a model, know its task/format/preprocessing, run and compare it.

Below both ``app/`` (agent loop, CLI, update gate) and ``tools/`` (quantize, validate, bench), so
each of them runs and judges a model exactly the same way; the rules are in README's layer table.
"""
