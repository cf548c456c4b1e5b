"""Data: corpora (Multi30k, local files, hub datasets, toy tasks), sentencepiece, batching."""
