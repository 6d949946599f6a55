"""The running agent: the loop, its per-frame steps, prefetch, health, the model set."""
