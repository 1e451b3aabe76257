#!/usr/bin/env python3
"""Embedding throughput: Evident's all-MiniLM-L6-v2 (its own forward pass,
crates/embed; examples/bench_embed.rs) against sentence-transformers on
CPU, in one run, on the same texts from the Synthea notes, with the same
thread count, batch size and truncation (256 tokens).

Order: Rust, Python, Rust again (the machine is shared; the second Rust
run shows how much the load moved). Best of `--repeats` runs each. Pause
other CPU work while it runs and note `uptime` before and after.

Usage (from the repository root, model pulled with `evident models pull minilm-l6`):
    pip install sentence-transformers
    python3 scripts/bench_embed.py [--threads 2] [--batch-size 32]
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time


# The workspace's dev profile already builds every dependency (candle,
# tokenizers, SQLite) at opt-level 3; these flags optimise Evident's own
# crates too, so the benchmark needs no separate release build of candle.
OPTIMISED = [
    arg
    for crate in ["evident-model", "evident-store", "evident-llm", "evident-embed", "evident-retrieve"]
    for setting in ("opt-level=3", "debug-assertions=false", "overflow-checks=false")
    for arg in ("--config", f"profile.dev.package.{crate}.{setting}")
]


def model_dir():
    if os.environ.get("EVIDENT_CACHE_DIR"):
        root = pathlib.Path(os.environ["EVIDENT_CACHE_DIR"])
    elif os.environ.get("XDG_CACHE_HOME"):
        root = pathlib.Path(os.environ["XDG_CACHE_HOME"]) / "evident"
    else:
        root = pathlib.Path.home() / ".cache" / "evident"
    return root / "models" / "minilm-l6"


def run_rust(args, texts_path):
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", "target")
    env["RAYON_NUM_THREADS"] = str(args.threads)
    cmd = [
        "cargo", "run", "-q", *OPTIMISED, "-p", "evident-embed", "--example", "bench_embed", "--",
        "--texts-out", texts_path, "--batch-size", str(args.batch_size),
        "--repeats", str(args.repeats), "--sentences", str(args.sentences), "--sections", str(args.sections),
    ]
    print("+", " ".join(cmd), file=sys.stderr)
    return json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, env=env).stdout)


def run_python(args, texts_path):
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    model = SentenceTransformer(str(model_dir()), device="cpu")
    texts = json.load(open(texts_path, encoding="utf-8"))
    sets = []
    for name in ["sentences", "sections"]:
        batch = texts[name]
        model.encode(batch[:64], batch_size=args.batch_size)  # warm-up
        runs = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            v = model.encode(batch, batch_size=args.batch_size)
            runs.append(time.perf_counter() - t)
            assert len(v) == len(batch)
        sets.append({"set": name, "texts": len(batch), "seconds": runs, "texts_per_second_best": len(batch) / min(runs)})
        print(json.dumps(sets[-1]), file=sys.stderr)
    import sentence_transformers

    return {
        "threads": torch.get_num_threads(),
        "versions": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
        "sets": sets,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--sentences", type=int, default=2000)
    ap.add_argument("--sections", type=int, default=300)
    ap.add_argument("--texts", default="/tmp/evident_bench_texts.json")
    ap.add_argument("--out", default="/tmp/evident_bench_embed.json")
    args = ap.parse_args()
    rust1 = run_rust(args, args.texts)
    py = run_python(args, args.texts)
    rust2 = run_rust(args, args.texts)
    result = {"evident_first": rust1, "sentence_transformers": py, "evident_second": rust2}
    json.dump(result, open(args.out, "w"), indent=1)
    print(f"{'set':<10} {'texts':>6} {'evident #1':>10} {'evident #2':>10} {'sent-tr':>10} {'ratio':>6}   (texts/s, best of {args.repeats})")
    for a, p, b in zip(rust1["sets"], py["sets"], rust2["sets"]):
        evident = max(a["texts_per_second_best"], b["texts_per_second_best"])
        print(f"{a['set']:<10} {a['texts']:>6} {a['texts_per_second_best']:>10.1f} {b['texts_per_second_best']:>10.1f} {p['texts_per_second_best']:>10.1f} {evident / p['texts_per_second_best']:>5.2f}x")
    print(f"raw results: {args.out}")


if __name__ == "__main__":
    main()
