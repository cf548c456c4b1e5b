"""Plumbing: the command lines' one-line errors (`cli`), atomic writes and locks (`files`), seeds,
threads and devices (`runtime`), torch.distributed (`distributed`), the error types (`errors`)."""
