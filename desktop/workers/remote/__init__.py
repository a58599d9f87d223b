"""Remote workers: OpenAI-compatible servers (llama.cpp, vLLM, SGLang) in the worker pool."""
