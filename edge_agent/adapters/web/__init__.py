"""The device page's HTTP server: routing, the token and same-origin checks, static files (stdlib http.server)."""
