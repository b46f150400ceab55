"""rustytorch.text.BPETokenizer: exact round trips of any text, encoding against a naive pure-Python
BPE (merges applied by rank), training against a naive trainer that recounts every pair after each
merge, the text format (save/load, to_str/from_str, pickle), errors and their exception types, and a
King James Bible excerpt when the `bible` command (Debian's bible-kjv) is installed."""
import os
import pickle
import random
import re
import shutil
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import rustytorch as rt
from rustytorch.text import BPETokenizer

# The documented word rule: a single leading space plus a run of letters (ASCII and bytes >= 0x80),
# digits or other non-space bytes; or a whitespace run, which leaves its final space to a following word.
WORD = re.compile(rb" ?[A-Za-z\x80-\xff]+| ?[0-9]+| ?[^\sA-Za-z0-9\x80-\xff]+|\s+?(?= \S)|\s+")

SYLLABLES = ["the", "n", "re", "and", "s", "b", "LORD", "Grü", "ße", "世", "界", "16", "11", "42", "--", "...",
             ",", "!", "'s", "ing", "ed", "er", "qu", "x", "🎉"]
GAPS = [" ", " ", " ", " ", "  ", "\n", "\n\n", "\t", " \n", ""]


def sample_corpus(words, seed):
    rng = random.Random(seed)
    return "".join("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) + rng.choice(GAPS)
                   for _ in range(words))


def random_text(length, seed):
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyzTHE LORD     0123456789.,;:!?'\"-()\n\n\t\r äöüé世界🎉"
    return "".join(rng.choice(alphabet) for _ in range(length))


def split_words(data):
    words = WORD.findall(data)
    assert b"".join(words) == data
    return words


def merge_pair(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def reference_encode(merges, data):
    """Within each word, repeatedly merges every occurrence of the lowest-ranked pair present."""
    rank = {pair: r for r, pair in enumerate(merges)}
    out = []
    for word in split_words(data):
        ids = list(word)
        while len(ids) > 1:
            r = min((rank.get(pair, len(merges)) for pair in zip(ids, ids[1:])))
            if r == len(merges):
                break
            ids = merge_pair(ids, merges[r], 256 + r)
        out.extend(ids)
    return out


def reference_train(data, vocab_size):
    """Recounts all pairs after every merge; the most frequent pair wins, ties to the smallest pair."""
    counts = Counter(split_words(data))
    words = {w: list(w) for w in counts}
    merges = []
    while 256 + len(merges) < vocab_size:
        pairs = Counter()
        for w, n in counts.items():
            for pair in zip(words[w], words[w][1:]):
                pairs[pair] += n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[best] < 2:
            break
        merges.append(best)
        words = {w: merge_pair(s, best, 255 + len(merges)) for w, s in words.items()}
    return merges


@pytest.fixture(scope="module")
def tokenizer():
    return BPETokenizer.train(sample_corpus(6000, 1), 600)


def test_round_trips_exactly(tokenizer):
    assert tokenizer.vocab_size == 600
    for tok in (tokenizer, BPETokenizer()):
        for text in ["In the beginning God created the heaven and the earth.", "Grüße, 世界 🎉", "",
                     "  leading\n\n\ttabs  and trailing  ", random_text(3000, 2), sample_corpus(500, 3)]:
            ids = tok.encode(text)
            assert all(isinstance(i, int) and 0 <= i < tok.vocab_size for i in ids)
            assert tok.decode(ids) == text
            assert tok.encode(text.encode()) == ids
        for data in [bytes(range(256)), b"\xff\xfe\x80 abc \xc3 \xe4\xb8 \xed\xa0\x80 end\xf0", os.urandom(2000)]:
            ids = tok.encode(data)
            assert tok.decode_bytes(ids) == data
            assert tok.decode(ids) == data.decode("utf-8", "replace")
    assert tokenizer.encode("") == []


def test_encode_matches_naive_reference(tokenizer):
    merges = tokenizer.merges
    assert len(merges) == 600 - 256
    for seed in range(5):
        text = random_text(2000, seed) + sample_corpus(300, seed)
        assert tokenizer.encode(text) == reference_encode(merges, text.encode())
    # Long words over a small alphabet, where many merges apply within each word.
    rng = random.Random(7)
    soup = BPETokenizer.train("".join(rng.choice("abcdabcd ") for _ in range(20000)), 400)
    text = "".join(rng.choice("abcdabcd ") for _ in range(5000))
    assert soup.encode(text) == reference_encode(soup.merges, text.encode())
    # Overlapping pairs merge left to right.
    tok = BPETokenizer.train("aaa aaa", 1000)
    assert tok.merges == [(97, 97), (256, 97)]
    assert tok.encode("aaaaaaa") == reference_encode(tok.merges, b"aaaaaaa") == [256, 256, 257]


def test_training_matches_naive_reference():
    for seed, vocab_size in [(4, 400), (5, 330)]:
        corpus = sample_corpus(1500, seed)
        tok = BPETokenizer.train(corpus, vocab_size)
        assert tok.merges == reference_train(corpus.encode(), vocab_size)
    assert BPETokenizer.train("aaab aaab", 1000).merges == [(97, 97), (97, 98), (256, 257)]
    assert BPETokenizer.train("abcdef", 1000).vocab_size == 256


def test_training_is_reproducible():
    corpus = sample_corpus(5000, 6)
    a = BPETokenizer.train(corpus, 500)
    assert a.to_str() == BPETokenizer.train(corpus, 500).to_str()
    assert a.to_str() == BPETokenizer.train(corpus.encode(), 500).to_str()


def test_decode_accepts_sequences_and_integer_tensors(tokenizer):
    text = "the LORD and the sand"
    ids = tokenizer.encode(text)
    assert tokenizer.decode(tuple(ids)) == text
    assert tokenizer.decode(np.array(ids, dtype=np.int64)) == text
    assert tokenizer.decode(rt.tensor(ids)) == text
    assert tokenizer.decode(rt.tensor(ids).to(rt.int32)) == text
    doubled = ids + ids
    assert tokenizer.decode(rt.tensor(doubled)[::2]) == tokenizer.decode(doubled[::2])  # a strided view
    assert tokenizer.decode(rt.tensor([], dtype=rt.int64)) == ""
    with pytest.raises(rt.DTypeError, match="integer dtype"):
        tokenizer.decode(rt.tensor([1.0, 2.0]))
    with pytest.raises(rt.ShapeError, match="1-D"):
        tokenizer.decode(rt.tensor([[1, 2]]))
    with pytest.raises(TypeError):
        tokenizer.decode([1.5])


def test_save_load_and_strings(tokenizer, tmp_path):
    path = tmp_path / "kjv.bpe"
    tokenizer.save(path)
    tokenizer.save(str(path))
    assert os.listdir(tmp_path) == ["kjv.bpe"]
    assert path.read_text().startswith("rtx-bpe 1 344\n")
    loaded = BPETokenizer.load(path)
    assert loaded.to_str() == tokenizer.to_str()
    text = random_text(2000, 9)
    assert loaded.encode(text) == tokenizer.encode(text)
    assert BPETokenizer.from_str(tokenizer.to_str()).merges == tokenizer.merges
    assert pickle.loads(pickle.dumps(tokenizer)).to_str() == tokenizer.to_str()
    assert repr(tokenizer) == "BPETokenizer(vocab_size=600)"
    assert BPETokenizer.__module__ == "rustytorch.text"
    lines = tokenizer.to_str().splitlines()
    assert [tuple(map(int, line.split())) for line in lines[1:]] == tokenizer.merges


def test_errors_have_the_right_types(tokenizer, tmp_path):
    with pytest.raises(rt.IndexError, match=r"\[BpeTokenizer.decode\] id 600 out of range for a vocabulary of 600"):
        tokenizer.decode([5, 600])
    with pytest.raises(IndexError, match="id -1 out of range"):
        tokenizer.decode(rt.tensor([-1]))
    with pytest.raises(IndexError, match=f"id {2**70} out of range"):
        tokenizer.decode([2**70])
    with pytest.raises(rt.IndexError):
        tokenizer.token_bytes(600)
    assert tokenizer.token_bytes(97) == b"a"
    with pytest.raises(rt.ValueError, match="vocab_size 100 is below the 256 byte tokens"):
        BPETokenizer.train("abc", 100)
    with pytest.raises(ValueError, match=f"vocab_size {2**40} exceeds the limit of 1048576"):
        BPETokenizer.train("abc", 2**40)
    with pytest.raises(TypeError, match="text must be str or bytes"):
        tokenizer.encode(123)
    with pytest.raises(rt.CheckpointError, match="<string> line 1: not an rtx-bpe tokenizer"):
        BPETokenizer.from_str("garbage")
    truncated = tmp_path / "truncated.bpe"
    truncated.write_text(tokenizer.to_str()[:200])
    with pytest.raises(rt.CheckpointError, match=re.escape(str(truncated)) + " line "):
        BPETokenizer.load(truncated)
    hostile = tmp_path / "hostile.bpe"
    hostile.write_bytes(b"rtx-bpe 1 2\n97 97\n300 97\n")
    with pytest.raises(rt.CheckpointError, match="line 3: merge refers to token 300, which is not defined"):
        BPETokenizer.load(hostile)
    with pytest.raises(rt.CheckpointError, match="cannot open"):
        BPETokenizer.load(tmp_path / "missing.bpe")


def test_encodes_long_texts_from_several_threads(tokenizer):
    text = sample_corpus(20000, 10)
    expected = tokenizer.encode(text)
    with ThreadPoolExecutor(4) as pool:
        assert all(r == expected for r in pool.map(tokenizer.encode, [text] * 4))


def test_king_james_bible_excerpt():
    if shutil.which("bible") is None:
        pytest.skip("the `bible` command (Debian package bible-kjv) is not installed")
    kjv = subprocess.run(["bible", "gen1:1-rev22:21"], capture_output=True, check=True).stdout
    assert len(kjv) > 4_000_000
    text = kjv[:200_000].decode("utf-8")
    tok = BPETokenizer.train(text, 2048)
    assert tok.vocab_size == 2048
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert len(text.encode()) / len(ids) > 2.5
    assert tok.encode(text[:20_000]) == reference_encode(tok.merges, text[:20_000].encode())
    later = kjv[2_000_000:2_100_000].decode("utf-8")
    assert tok.decode(tok.encode(later)) == later
