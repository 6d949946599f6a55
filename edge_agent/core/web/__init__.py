"""The device page's pure parts: request limits, the multipart reader, the zone and line editor's checks."""
