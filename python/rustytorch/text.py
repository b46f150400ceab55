"""rustytorch.text: text tokenization.

BPETokenizer is a byte-level byte-pair-encoding tokenizer: ids 0..255 are the byte values, so any
str or bytes encodes, and decode(encode(s)) == s for every str (decode_bytes for any bytes).

    tok = BPETokenizer.train(corpus, vocab_size=4096)   # str or bytes; reproducible bit for bit
    ids = tok.encode("In the beginning")                 # list of ints
    tok.decode(ids)                                      # ints or a 1-D integer Tensor -> str
    tok.save("kjv.bpe"); tok = BPETokenizer.load("kjv.bpe")
    meta = {"tokenizer": tok.to_str()}; BPETokenizer.from_str(meta["tokenizer"])

Merges never cross words: a word is an optional single leading space followed by a run of letters
(ASCII letters and non-ASCII bytes), digits or other non-space bytes, or a run of whitespace.
Files and strings that are not valid tokenizers raise rustytorch.CheckpointError; ids out of range
raise rustytorch.IndexError."""
from ._C import _text

BPETokenizer = _text.BPETokenizer
BPETokenizer.__module__ = __name__  # so that pickle finds it here

__all__ = ["BPETokenizer"]
