"""Cameras and image files: the capture thread and its backends (V4L2, RTSP, MJPEG, folders)."""
