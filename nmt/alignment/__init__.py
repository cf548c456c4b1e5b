"""Attention as alignment: subword->word merging, Pharaoh links, AER, heatmaps, export."""
