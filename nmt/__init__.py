"""nmt: an RNN encoder-decoder translation trainer whose attention block is chosen from config."""

__version__ = "0.1.0"
