#!/usr/bin/env python3
"""Trains the single-machine baselines of apps/lda on one split and scores them with the app's
own document-completion function (ps_lda --score_phi), so every model meets the same test:
gensim's LdaModel (Debian python3-gensim) and scikit-learn's LatentDirichletAllocation
(python3-sklearn). Prints one JSON line per model and K:

  {"model": "gensim", "topics": 20, "train_s": ..., "tokens_per_s": ..., "perplexity": ...}

Run with Debian's python (/usr/bin/python3), where those packages install:
  /usr/bin/python3 bench/lda_baselines.py --data data/sotu --ps-lda build/apps/lda/ps_lda \\
      --topics 20 50 100
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def read_docs(path):
    with open(path) as f:
        return [[int(x) for x in line.split()] for line in f]


def write_phi(phi, path):
    phi = np.asarray(phi, dtype=np.float32)
    phi = phi / phi.sum(axis=1, keepdims=True)
    with open(path, "wb") as f:
        f.write(f"phi {phi.shape[0]} {phi.shape[1]}\n".encode())
        f.write(phi.astype("<f4").tobytes())


def score(ps_lda, phi_path, test, alpha):
    out = subprocess.run([ps_lda, "--score_phi", phi_path, "--test", test, "--alpha", str(alpha)],
                         check=True, capture_output=True, text=True).stdout
    line = [l for l in out.splitlines() if l.startswith("RESULT")][-1].split()
    return float(line[line.index("perplexity") + 1])


def gensim_model(train, V, K, alpha, beta, passes, seed):
    from gensim.models import LdaModel
    corpus = []
    for d in train:
        counts = {}
        for w in d:
            counts[w] = counts.get(w, 0) + 1
        corpus.append(sorted(counts.items()))
    id2word = {i: str(i) for i in range(V)}
    t0 = time.time()
    m = LdaModel(corpus, num_topics=K, id2word=id2word, passes=passes, alpha=alpha, eta=beta,
                 random_state=seed, chunksize=2000, iterations=50, eval_every=None)
    return m.get_topics(), time.time() - t0


def sklearn_model(train, V, K, alpha, beta, passes, seed):
    from scipy.sparse import csr_matrix
    from sklearn.decomposition import LatentDirichletAllocation
    rows, cols = [], []
    for i, d in enumerate(train):
        rows.extend([i] * len(d))
        cols.extend(d)
    X = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(train), V))
    X.sum_duplicates()
    t0 = time.time()
    m = LatentDirichletAllocation(n_components=K, doc_topic_prior=alpha, topic_word_prior=beta,
                                  learning_method="online", max_iter=passes, random_state=seed,
                                  batch_size=2000, n_jobs=1)
    m.fit(X)
    return m.components_, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="a folder from scripts/fetch-lda-data.sh")
    ap.add_argument("--ps-lda", required=True)
    ap.add_argument("--topics", type=int, nargs="+", default=[20, 50])
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--models", nargs="+", default=["gensim", "sklearn"])
    ap.add_argument("--priors", choices=["own", "ours"], default="own",
                    help="own: each library's default priors (1/K, 1/K); ours: ps_lda's (50/K, 0.01)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    train = read_docs(os.path.join(a.data, "train.txt"))
    test = os.path.join(a.data, "test.txt")
    with open(os.path.join(a.data, "vocab.txt")) as f:
        V = sum(1 for _ in f)
    tokens = sum(len(d) for d in train)
    tmp = tempfile.mkdtemp()
    for K in a.topics:
        alpha, beta = (1.0 / K, 1.0 / K) if a.priors == "own" else (50.0 / K, 0.01)
        for name in a.models:
            fit = gensim_model if name == "gensim" else sklearn_model
            phi, secs = fit(train, V, K, alpha, beta, a.passes, a.seed)
            path = os.path.join(tmp, f"{name}_{K}.phi")
            write_phi(phi, path)
            print(json.dumps({"model": name, "topics": K, "passes": a.passes, "priors": a.priors,
                              "alpha": alpha, "beta": beta, "train_s": round(secs, 2),
                              "tokens_per_s": round(tokens * a.passes / secs),
                              "perplexity": round(score(a.ps_lda, path, test, alpha), 2)}),
                  flush=True)


if __name__ == "__main__":
    main()
