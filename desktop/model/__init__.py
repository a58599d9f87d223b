"""Model layer: loading, tokenisation and chat templates, KV batching, sampling, detokenisation."""
