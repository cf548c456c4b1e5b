"""Decoding: beam search (`search`, greedy as its K = 1 case), whole splits in batches (`splits`),
lines of text (`text`), and BLEU / chrF of a checkpoint (`scoring`)."""
