"""Model updates on the device: the MQTT receiver, transfers on disk, the store, packages, signatures."""
