"""GGUF models on llama.cpp: a local llama.cpp server as a worker (host.py)."""
