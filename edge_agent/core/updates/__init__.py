"""Model updates, pure: package manifests, the store's state, trial verdicts."""
