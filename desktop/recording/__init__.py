"""Session recordings on disk (format v1): the writer, the Qt-free reader, listing and retention."""
