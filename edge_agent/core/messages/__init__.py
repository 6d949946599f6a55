"""Everything that goes on the wire, pure: message builders, topics, batches, status, the collector's parse."""
