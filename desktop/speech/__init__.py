"""Speech out: the Voice (the speaker's owner), the TTS pipeline and segmenter, a spoken reply, what the user heard."""
