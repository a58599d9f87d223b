"""Voice and video calls: the call, its state, ducking, its parts (mic, VAD, ASR), video, the call's transcript, and the factory."""
