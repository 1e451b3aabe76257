#!/usr/bin/env python3
"""BM25 query latency: Evident (`Store::search_bm25`) against rank_bm25's
BM25Okapi (the BM25 the myeloma paper's report retrieval tool used), in one
run, on the same corpus and queries.

1. Runs the Rust benchmark (crates/retrieve/examples/bench_bm25.rs), which
   sections the Synthea notes, writes the base sections to a JSONL file,
   replicates them to each size, and times top-10 queries: over the whole
   corpus (FTS5) and within one patient (the per-patient path, for each of
   the 13 patients).
2. In Python, times BM25Okapi `get_scores` + top-10 selection for the same
   queries (a) over the whole corpus, replicated to the same sizes (what
   rank_bm25 does without a filter: the original comparison) and (b) over
   each patient's own sections (an index per patient, the same 13 patients
   and queries as the per-patient Rust timings; a patient's record is the
   same at every corpus size).

Usage (from the repository root):
    pip install rank_bm25 numpy
    python3 scripts/bench_bm25.py [--sizes 10000,100000,1000000] [--python-max 1000000]

Tokenisation for rank_bm25: lower-cased runs of letters and digits (FTS5's
unicode61 tokenizer splits the same way; FTS5 additionally applies the
porter stemmer, rank_bm25 gets no stemming).
"""

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time

import numpy as np
from rank_bm25 import BM25Okapi

TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


# The workspace's dev profile already builds every dependency (candle,
# tokenizers, SQLite) at opt-level 3; these flags optimise Evident's own
# crates too, so the benchmark needs no separate release build of candle.
OPTIMISED = [
    arg
    for crate in ["evident-model", "evident-store", "evident-llm", "evident-embed", "evident-retrieve"]
    for setting in ("opt-level=3", "debug-assertions=false", "overflow-checks=false")
    for arg in ("--config", f"profile.dev.package.{crate}.{setting}")
]


def tokenize(text):
    return [t.lower() for t in TOKEN.findall(text)]


def percentile(sorted_ms, p):
    import math

    rank = max(1, math.ceil(p / 100 * len(sorted_ms)))
    return sorted_ms[min(rank, len(sorted_ms)) - 1]


def summarise(ms):
    ms = sorted(ms)
    return {
        "queries": len(ms),
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "mean_ms": sum(ms) / len(ms),
        "max_ms": ms[-1],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--python-max", type=int, default=1_000_000, help="largest size rank_bm25 is run at")
    ap.add_argument("--python-repeats", type=int, default=1)
    ap.add_argument("--rust-repeats", type=int, default=3)
    ap.add_argument("--db", default="/tmp/evident_bench_bm25.db")
    ap.add_argument("--corpus", default="/tmp/evident_bench_sections.jsonl")
    ap.add_argument(
        "--notes",
        default="../shared/data/synthea/sample-bulk-fhir-datasets-10-patients/DocumentReference.000.ndjson",
    )
    ap.add_argument("--out", default="/tmp/evident_bench_bm25.json")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", "target")
    cmd = [
        "cargo", "run", "-q", *OPTIMISED, "-p", "evident-retrieve", "--example", "bench_bm25", "--",
        "--notes", args.notes, "--db", args.db, "--sizes", args.sizes,
        "--corpus-out", args.corpus, "--repeats", str(args.rust_repeats),
    ]
    print("+", " ".join(cmd), file=sys.stderr)
    rust = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, env=env).stdout)
    queries = rust["queries"]
    tokenized_queries = [tokenize(q) for q in queries]

    base_rows = [json.loads(line) for line in open(args.corpus, encoding="utf-8")]
    base_tokens = [tokenize(r["text"]) for r in base_rows]

    # (b) one index per patient, over that patient's sections only.
    per_patient = {}
    for row, tokens in zip(base_rows, base_tokens):
        per_patient.setdefault(row["patient"], []).append(tokens)
    patients = rust["probe_patients"]
    indexes = {p: BM25Okapi(per_patient[p]) for p in patients}
    patient_ms = []
    by_patient = {p: [] for p in patients}
    for _ in range(args.python_repeats):
        for q in tokenized_queries:
            for p in patients:
                bm25 = indexes[p]
                t = time.perf_counter()
                scores = bm25.get_scores(q)
                k = min(10, len(scores) - 1)
                top = np.argpartition(-scores, k)[:10]
                top = top[np.argsort(-scores[top])]
                ms = (time.perf_counter() - t) * 1e3
                patient_ms.append(ms)
                by_patient[p].append(ms)
    patient_row = {
        "patients": len(patients),
        "sections_per_patient": {p: len(per_patient[p]) for p in patients},
        "top10": summarise(patient_ms),
        "top10_by_patient": {p: summarise(ms) for p, ms in by_patient.items()},
    }
    print(json.dumps(patient_row), file=sys.stderr)
    del indexes
    python_rows = []
    for size, rust_row in zip(sizes, rust["sizes"]):
        n = rust_row["sections"]  # the Rust store's exact section count
        if size > args.python_max:
            python_rows.append({"sections": n, "skipped": f"above --python-max {args.python_max}"})
            continue
        corpus = [base_tokens[i % len(base_tokens)] for i in range(n)]
        t0 = time.perf_counter()
        bm25 = BM25Okapi(corpus)
        build_s = time.perf_counter() - t0
        del corpus
        ms = []
        for _ in range(args.python_repeats):
            for q in tokenized_queries:
                t = time.perf_counter()
                scores = bm25.get_scores(q)
                top = np.argpartition(-scores, 10)[:10]
                top = top[np.argsort(-scores[top])]
                ms.append((time.perf_counter() - t) * 1e3)
        row = {
            "sections": n,
            "build_seconds": build_s,
            "top10": summarise(ms),
            "max_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        }
        print(json.dumps(row), file=sys.stderr)
        python_rows.append(row)
        del bm25

    result = {"rust": rust, "rank_bm25": python_rows, "rank_bm25_per_patient": patient_row}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    pp = patient_row["top10"]
    print(f"rank_bm25 per patient (13 patients, {pp['queries']} timings): p50 {pp['p50_ms']:.3f} ms, p99 {pp['p99_ms']:.3f} ms")
    print(
        f"{'sections':>10} | {'Ev 1-pt p50':>11} {'p99':>7} | {'Ev all p50':>10} {'p99':>7} | {'rb all p50':>10} {'p99':>7}"
        f" | {'rb-all/Ev-1pt':>13} {'rb-1pt/Ev-1pt':>13} {'rb-all/Ev-all':>13}"
    )
    for r, p in zip(rust["sizes"], python_rows):
        fts = r["whole_corpus_top10"]
        one = r["one_patient_top10"]
        vs_patient = pp["p50_ms"] / one["p50_ms"]
        if "top10" in p:
            py = p["top10"]
            print(
                f"{r['sections']:>10} | {one['p50_ms']:>11.3f} {one['p99_ms']:>7.3f} | {fts['p50_ms']:>10.3f} {fts['p99_ms']:>7.2f}"
                f" | {py['p50_ms']:>10.1f} {py['p99_ms']:>7.1f} | {py['p50_ms'] / one['p50_ms']:>12.0f}x {vs_patient:>12.1f}x"
                f" {py['p50_ms'] / fts['p50_ms']:>12.1f}x"
            )
        else:
            print(
                f"{r['sections']:>10} | {one['p50_ms']:>11.3f} {one['p99_ms']:>7.3f} | {fts['p50_ms']:>10.3f} {fts['p99_ms']:>7.2f}"
                f" | {'(not run)':>18} | {'':>13} {vs_patient:>12.1f}x"
            )
    print()
    print("In-memory index (Bm25Index), p50 ms; rank = ranking only (as rank_bm25 get_scores + top 10); search = with the sections read from SQLite")
    print(
        f"{'sections':>10} | {'build s':>7} | {'all rank':>8} {'all srch':>8} | {'1pt rank':>8} {'1pt srch':>8}"
        f" | {'rb-all/all-rank':>15} {'rb-all/all-srch':>15} | {'rb-1pt/1pt-rank':>15}"
    )
    for r, p in zip(rust["sizes"], python_rows):
        ix = r["index"]
        ar, asr = ix["whole_corpus_rank_top10"]["p50_ms"], ix["whole_corpus_search_top10"]["p50_ms"]
        pr, psr = ix["one_patient_rank_top10"]["p50_ms"], ix["one_patient_search_top10"]["p50_ms"]
        py = p.get("top10", {}).get("p50_ms")
        ratios = f"{py / ar:>14.0f}x {py / asr:>14.0f}x" if py else f"{'(not run)':>30}"
        print(
            f"{r['sections']:>10} | {ix['build_seconds']:>7.1f} | {ar:>8.4f} {asr:>8.4f} | {pr:>8.4f} {psr:>8.4f}"
            f" | {ratios} | {pp['p50_ms'] / pr:>14.1f}x"
        )
    print(f"raw results: {args.out}")


if __name__ == "__main__":
    main()
