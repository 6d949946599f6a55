"""What a camera source means and the pure parts of reading one: source specs, RTSP, MJPEG, motion."""
