"""The broker's identity files on disk: the enrollment directory `edge-agent fleet enroll` keeps
(mosquitto's passwd, acl and config snippet, enrolled.json, one password file per identity)."""
