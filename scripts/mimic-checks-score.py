#!/usr/bin/env python3
"""Scores a screening's decisions.csv against the SQL gold of
scripts/mimic-checks-gold.py on the (patient, criterion) pairs both have:
accuracy over the three labels (MET, NOT MET, NOT ENOUGH INFORMATION),
Cohen's kappa, how often the screening abstained (NOT ENOUGH INFORMATION
where the gold decides) and how often it decided wrongly (MET for NOT MET
or the reverse, or a decision where the gold has no information), overall
and per criterion, as a markdown table.

Usage: scripts/mimic-checks-score.py gold.csv evident-report/decisions.csv
"""

import csv
import sys
from collections import Counter, defaultdict

LABELS = ["MET", "NOT MET", "NOT ENOUGH INFORMATION"]


def kappa(pairs):
    n = len(pairs)
    if n == 0:
        return float("nan")
    observed = sum(g == d for g, d in pairs) / n
    gold = Counter(g for g, _ in pairs)
    got = Counter(d for _, d in pairs)
    expected = sum(gold[label] * got[label] for label in LABELS) / (n * n)
    return 1.0 if expected == 1 else (observed - expected) / (1 - expected)


def main():
    gold = {(r["patient_id"], r["criterion_id"]): r["gold"] for r in csv.DictReader(open(sys.argv[1]))}
    by_criterion = defaultdict(list)
    for r in csv.DictReader(open(sys.argv[2])):
        key = (r["patient_id"], r["criterion_id"])
        if key in gold:
            by_criterion[r["criterion_id"]].append((gold[key], r["decision"] or "FAILED"))
    print("| criterion | pairs | accuracy | kappa | abstained | wrong |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    every = []
    for cid, pairs in list(by_criterion.items()) + [("all", None)]:
        pairs = every if pairs is None else pairs
        if cid != "all":
            every.extend(pairs)
        right = sum(g == d for g, d in pairs)
        abstained = sum(d == "NOT ENOUGH INFORMATION" and g != d for g, d in pairs)
        wrong = len(pairs) - right - abstained
        name = f"**{cid}**" if cid == "all" else cid
        print(f"| {name} | {len(pairs)} | {right / len(pairs):.3f} | {kappa(pairs):.3f} | {abstained} | {wrong} |")


if __name__ == "__main__":
    main()
