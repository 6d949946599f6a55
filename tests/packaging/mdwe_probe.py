"""The runtime imports + one YOLOv8n inference under W^X (what MemoryDenyWriteExecute=yes enforces).

Usage: python mdwe_probe.py MODEL.onnx IMAGE.jpg. prctl(PR_SET_MDWE) (Linux >= 6.3) applies the same
rule as systemd's seccomp filter: no mapping may be writable and executable, and no mapping may gain
PROT_EXEC later. Exit 77 = kernel lacks PR_SET_MDWE (the test skips).
"""

import ctypes
import mmap
import sys

libc = ctypes.CDLL(None, use_errno=True)
PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1
if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
    print(f"prctl(PR_SET_MDWE) failed errno={ctypes.get_errno()}")
    sys.exit(77)
# prove the policy is on: an anonymous RWX mapping must now be refused
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    sys.exit("W+X mapping allowed: MDWE not active")
except PermissionError:
    print("MDWE active: RWX mmap refused")

import sqlite3  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import paho.mqtt.client  # noqa: E402, F401
import PIL.Image  # noqa: E402, F401
import pydantic  # noqa: E402, F401
import serial  # noqa: E402, F401

img = cv2.imread(sys.argv[2])
blob = cv2.dnn.blobFromImage(img, 1 / 255.0, (640, 640), swapRB=True)
so = ort.SessionOptions()
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
out = s.run(None, {s.get_inputs()[0].name: blob.astype(np.float32)})[0]
print("inference ok", out.shape, float(out[0, 4:].max()))
con = sqlite3.connect(":memory:")
print("sqlite ok", con.execute("select 40 + 2").fetchone()[0])
# ctypes callbacks use libffi closures (the classic W^X casualty)
CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)
print("ctypes callback ok", CB(lambda x: x + 1)(41))
