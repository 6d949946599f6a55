"""Detection and classification, pure: preprocessing, output formats, NMS, accuracy arithmetic."""
