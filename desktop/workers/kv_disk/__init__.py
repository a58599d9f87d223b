"""KV snapshots on disk beneath the RAM slots: the folder (files.py), the file format, the store."""
