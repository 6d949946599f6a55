"""The far end's outside things: the database (SQLite/PostgreSQL) and the MQTT subscriber."""
