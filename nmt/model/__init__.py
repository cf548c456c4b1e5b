"""The RNN encoder-decoder: encoder, decoder (SPEC equations 1-5), the model and its builder."""
