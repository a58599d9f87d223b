"""The models on disk and from the Hub, without Qt or torch: what each model is (facts.py,
gguf_facts.py), where they are found (catalog.py, places.py), whether one fits this machine
(fit.py), downloads from the Hugging Face Hub (hub.py, download.py) and idle unloading (idle.py)."""
