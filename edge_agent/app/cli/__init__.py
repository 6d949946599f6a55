"""The command line: the dispatcher, the service commands (run, status, doctor, config, queue) and their helpers."""
