"""Gateway and output pipeline: the async core between the UI and the workers."""
