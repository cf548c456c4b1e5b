"""The RNN encoder-decoder: encoder, decoder (equations 1-5 of Bahdanau et al. 2015), the model and its builder."""
