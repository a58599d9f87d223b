"""The local OpenAI-compatible HTTP API (/v1/models, /v1/chat/completions) and Prometheus /metrics,
served by uvicorn on the app's own asyncio loop through the same gateway as the window. Qt-free."""
