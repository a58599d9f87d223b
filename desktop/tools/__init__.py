"""MCP tools for the chat, without Qt: server configs (config.py), the servers run with the
official SDK on a thread of their own (manager.py), and what the others read of them (results.py)."""
