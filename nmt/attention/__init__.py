"""The attention block: a score function a(s, h_j) composed with a normaliser (mode)."""
