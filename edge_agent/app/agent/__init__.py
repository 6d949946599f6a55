"""The running agent: the loop, a camera pipeline per camera, output steps, prefetch, health, the model set, the sensor models' workers."""
