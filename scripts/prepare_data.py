#!/usr/bin/env python3
"""A text file -> train.bin and val.bin token files for stepc-run (nanoGPT's
prepare.py): flat little-endian uint16, the last --val-fraction of the text
for validation, and meta.json (the tokenizer, its vocabulary size and, for
characters, the vocabulary itself, which stepc-run --vocab reads to sample).

    scripts/prepare_data.py input.txt OUT_DIR [--tokenizer char|gpt2] [--val-fraction 0.1]

--tokenizer char (the default) numbers the distinct bytes of the text in
sorted order, the rule stepc-run's --corpus uses, so a model trained either
way reads the same ids. --tokenizer gpt2 uses tiktoken's GPT-2 BPE (50,257
tokens: compile a model with V >= 50257, e.g. gpt2-124m's 50,304); tiktoken
is optional and needs its encoder files (downloaded on first use). It also
writes tokenizer.bin, each token's bytes in llm.c's tokenizer format, which
stepc-run --vocab reads to decode samples.
"""
import argparse
import json
import os
import struct
import sys


def write_llmc_tokenizer(path, tokens, end_of_text):
    """llm.c's tokenizer file (its train_gpt2 and stepc-run --vocab read it):
    256 little-endian uint32 (magic 20240328, version 2, the token count,
    the end-of-text id), then each token as a length byte and its bytes."""
    if not 0 <= end_of_text < len(tokens):
        raise ValueError(f"end-of-text id {end_of_text} is not one of {len(tokens)} tokens")
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<256I", 20240328, 2, len(tokens), end_of_text, *([0] * 252)))
        for i, token in enumerate(tokens):
            if not 1 <= len(token) <= 255:
                raise ValueError(f"token {i} has {len(token)} bytes (1 to 255 fit the format)")
            f.write(bytes([len(token)]) + bytes(token))
    os.replace(path + ".tmp", path)  # never a half-written file


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("input")
    p.add_argument("out_dir")
    p.add_argument("--tokenizer", choices=["char", "gpt2"], default="char")
    p.add_argument("--val-fraction", type=float, default=0.1)
    args = p.parse_args()
    if not 0 < args.val_fraction < 1:
        sys.exit("prepare_data: --val-fraction must be in (0, 1)")
    # A FIFO would wait for a writer; a directory has no text.
    if os.path.exists(args.input) and not os.path.isfile(args.input):
        sys.exit(f"prepare_data: '{args.input}' is not a regular file")
    if os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
        sys.exit(f"prepare_data: the output '{args.out_dir}' exists and is not a directory")
    try:
        data = open(args.input, "rb").read()
    except OSError as e:
        sys.exit(f"prepare_data: cannot read '{args.input}': {e.strerror}")
    if args.tokenizer == "char":
        chars = sorted(set(data))
        rank = {c: i for i, c in enumerate(chars)}
        ids = [rank[c] for c in data]
        # The byte of each id, in id order (stepc-run --vocab reads it).
        meta = {"tokenizer": "char", "vocab_size": len(chars), "vocabulary": chars}
    else:
        try:
            import tiktoken
        except ImportError:
            sys.exit("prepare_data: --tokenizer gpt2 needs tiktoken (pip install tiktoken)")
        try:
            # tiktoken downloads the GPT-2 ranks on first use (then caches
            # them): offline and uncached, that is an error, not a traceback.
            enc = tiktoken.get_encoding("gpt2")
        except Exception as e:  # requests' ConnectionError, OSError, ...
            sys.exit("prepare_data: --tokenizer gpt2 could not load tiktoken's GPT-2 encoding "
                     f"({type(e).__name__}: {str(e)[:200]}); it is downloaded on first use: "
                     "run once with network access, or set TIKTOKEN_CACHE_DIR to a directory "
                     "holding it")
        ids = enc.encode_ordinary(data.decode("utf-8", errors="replace"))
        meta = {"tokenizer": "gpt2", "vocab_size": enc.n_vocab, "tokenizer_file": "tokenizer.bin"}
    split = int(len(ids) * (1 - args.val_fraction))
    if split < 2 or len(ids) - split < 2:
        sys.exit(f"prepare_data: {len(ids)} tokens are too few to split")
    os.makedirs(args.out_dir, exist_ok=True)
    for name, part in (("train.bin", ids[:split]), ("val.bin", ids[split:])):
        path = os.path.join(args.out_dir, name)
        with open(path + ".tmp", "wb") as f:
            f.write(struct.pack(f"<{len(part)}H", *part))
        os.replace(path + ".tmp", path)  # never a half-written file
    if args.tokenizer == "gpt2":
        write_llmc_tokenizer(os.path.join(args.out_dir, "tokenizer.bin"),
                             [enc.decode_single_token_bytes(i) for i in range(enc.n_vocab)],
                             enc.eot_token)
    with open(os.path.join(args.out_dir, "meta.json"), "w") as f:
        json.dump(meta, f)
    print(f"prepare_data: {len(ids):,} tokens ({meta['tokenizer']}, vocabulary "
          f"{meta['vocab_size']:,}): train.bin {split:,}, val.bin {len(ids) - split:,} "
          f"in {args.out_dir}")


if __name__ == "__main__":
    main()
