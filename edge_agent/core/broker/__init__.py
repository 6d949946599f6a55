"""Broker identity, pure: who is enrolled (devices, collectors, operators), the broker user names of
each one's connections, and the text of mosquitto's password file, ACL and config snippet."""
