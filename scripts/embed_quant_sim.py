#!/usr/bin/env python3
"""How far reduced-precision dense layers would move all-MiniLM-L6-v2's
vectors from sentence-transformers' f32 output, simulated in PyTorch: every
`nn.Linear` rounds its input and weight before an f32 product, as a bf16 or
int8 kernel would. Texts: the 40 sentences of the embedder's fixture
(tests/fixtures/minilm/reference.json) and the first 40 Synthea notes (cut
at 1,500 characters, so most fill the 256-token window). Prints the lowest
and mean cosine per scheme; the issue's bar is 0.999.

Schemes:
  bf16       inputs and weights rounded to bfloat16
  int8-row   inputs asymmetric uint8 per row, weights symmetric int8 per
             output channel (what `vpdpbusd` takes)
  int8-g32   as int8-row, but one scale per group of 32 along the depth
             (llama.cpp's Q8_0 blocks; costs a rescale per group)

Usage (from the repository root, model pulled with `evident models pull minilm-l6`):
    python3 scripts/embed_quant_sim.py [--notes PATH]
"""

import argparse
import base64
import json
import os
import pathlib

import torch
from sentence_transformers import SentenceTransformer


def model_dir():
    if os.environ.get("EVIDENT_CACHE_DIR"):
        return pathlib.Path(os.environ["EVIDENT_CACHE_DIR"]) / "models" / "minilm-l6"
    return pathlib.Path.home() / ".cache" / "evident" / "models" / "minilm-l6"


def bf16(x):
    return x.to(torch.bfloat16).to(torch.float32)


def uint8_rows(x, group=None):
    """Asymmetric uint8 with a zero point, per row or per `group` columns."""
    shape = x.shape
    if group:
        x = x.reshape(*shape[:-1], shape[-1] // group, group)
    lo = x.amin(-1, keepdim=True).clamp(max=0)
    hi = x.amax(-1, keepdim=True).clamp(min=0)
    scale = (hi - lo) / 255
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    zero = torch.round(-lo / scale)
    q = torch.clamp(torch.round(x / scale) + zero, 0, 255)
    return ((q - zero) * scale).reshape(shape)


def int8_rows(w, group=None):
    """Symmetric int8, per output channel or per `group` columns."""
    shape = w.shape
    if group:
        w = w.reshape(*shape[:-1], shape[-1] // group, group)
    scale = w.abs().amax(-1, keepdim=True) / 127
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    return (torch.round(w / scale).clamp(-127, 127) * scale).reshape(shape)


SCHEMES = {
    "bf16": (bf16, bf16),
    "int8-row": (uint8_rows, int8_rows),
    "int8-g32": (lambda x: uint8_rows(x, 32), lambda w: int8_rows(w, 32)),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--notes",
        default="../shared/data/synthea/sample-bulk-fhir-datasets-10-patients/DocumentReference.000.ndjson",
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = SentenceTransformer(str(model_dir()), device="cpu")
    fixture = json.load(open("tests/fixtures/minilm/reference.json", encoding="utf-8"))
    texts = [item["sentence"] for item in fixture["items"]]
    with open(args.notes, encoding="utf-8") as notes:
        for line in notes:
            attachment = json.loads(line)["content"][0]["attachment"]
            texts.append(base64.b64decode(attachment["data"]).decode()[:1500])
            if len(texts) >= 80:
                break
    reference = model.encode(texts, convert_to_tensor=True)
    plain = torch.nn.Linear.forward
    for name, (round_input, round_weight) in SCHEMES.items():
        torch.nn.Linear.forward = lambda self, x: torch.nn.functional.linear(  # noqa: E731
            round_input(x), round_weight(self.weight), self.bias
        )
        vectors = model.encode(texts, convert_to_tensor=True)
        torch.nn.Linear.forward = plain
        cos = torch.nn.functional.cosine_similarity(reference, vectors)
        print(f"{name:<9} {len(texts)} texts: lowest cosine {cos.min().item():.6f}, mean {cos.mean().item():.6f}")


if __name__ == "__main__":
    main()
