"""A stand-in for tiktoken in tests (which have no network for its GPT-2
ranks): a byte-level vocabulary (every byte, a few words of the sonnets,
and an end-of-text token last, as GPT-2's), encoded longest match first."""

_WORDS = [b" the", b" thee", b" thou", b" thy", b" and", b" love", b" my", b" of", b" to",
          b"Shall", b"When", b"ing", b"\n\n"]


class _Encoding:
    def __init__(self):
        self._tokens = [bytes([b]) for b in range(256)] + _WORDS + [b"<|endoftext|>"]
        self.n_vocab = len(self._tokens)
        self.eot_token = self.n_vocab - 1
        self._ids = {t: i for i, t in enumerate(self._tokens[:-1])}

    def encode_ordinary(self, text):
        data, ids, at = text.encode("utf-8"), [], 0
        while at < len(data):
            for length in range(min(8, len(data) - at), 0, -1):
                if data[at:at + length] in self._ids:
                    ids.append(self._ids[data[at:at + length]])
                    at += length
                    break
        return ids

    def decode_single_token_bytes(self, i):
        return self._tokens[i]


def get_encoding(name):
    assert name == "gpt2"
    return _Encoding()
