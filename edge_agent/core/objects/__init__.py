"""Objects mode, pure: the tracker, its matching, object lifecycle, zones and lines, MOT files."""
