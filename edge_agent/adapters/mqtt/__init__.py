"""The device's MQTT clients: connection settings, the sync, its session, the doctor's probe."""
