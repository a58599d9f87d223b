"""Media devices: speaker, microphone and camera, each with a fake on a virtual clock."""
