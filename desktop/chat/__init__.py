"""Chats and their store: a reply turn, reply versions and branches, the conversation store, presets, search, export, the image store."""
