#!/usr/bin/env python3
"""Writes tests/fixtures/minilm/reference.json: sentence-transformers'
own all-MiniLM-L6-v2 vectors for a set of clinical sentences, which the
`evident-embed` tests compare against (cosine >= 0.999 for every sentence).

Usage:
    pip install sentence-transformers   # CPU torch is enough
    python3 scripts/embed_reference.py [MODEL_DIR]

MODEL_DIR defaults to the Evident model cache
($EVIDENT_CACHE_DIR, else $XDG_CACHE_HOME/evident, else ~/.cache/evident)
plus models/minilm-l6, the folder `evident models pull minilm-l6` fills.
The sentences are invented; none comes from a patient record.
"""

import json
import os
import pathlib
import sys

from sentence_transformers import SentenceTransformer
import sentence_transformers
import torch

SENTENCES = [
    "Patient is a 67-year-old male with a history of type 2 diabetes mellitus and hypertension.",
    "Metformin 500 mg PO b.i.d.; lisinopril 10 mg q.d.",
    "HbA1c 8.2% (ref 4.0-5.6) on 2023-03-14.",
    "Serum creatinine 1.9 mg/dL, eGFR 34 mL/min/1.73m2.",
    "CT chest: 1.5 cm spiculated nodule in the RUL, suspicious for malignancy.",
    "No evidence of pulmonary embolism.",
    "Denies chest pain, SOB, palpitations, or syncope.",
    "BP 142/88, HR 96, RR 18, T 37.8 °C, SpO2 94% on RA.",
    "Free light chains: kappa 212 mg/L, lambda 9.8 mg/L, ratio 21.6.",
    "M-protein 2.3 g/dL by SPEP; IgG 3,450 mg/dL.",
    "β2-microglobulin 5.8 mg/L; LDH 310 U/L; albumin 3.1 g/dL.",
    "Bone marrow biopsy: 45% clonal plasma cells, CD138+.",
    "FISH: del(17p) and t(4;14) detected.",
    "s/p TKA L knee 2019, c/b DVT, on apixaban x 6 mo.",
    "Pt c/o N/V/D x3d, tolerating PO fluids poorly.",
    "Echo: EF 35-40%, moderate MR, mild TR.",
    "The patient was discharged home in stable condition with follow-up in two weeks.",
    "Allergies: penicillin (rash), sulfa (anaphylaxis).",
    "Smoking history: 40 pack-years, quit 2015.",
    "Pathology: invasive ductal carcinoma, grade 3, ER-/PR-/HER2+ (IHC 3+).",
    "MRI brain w/wo contrast: no acute intracranial abnormality.",
    "Patientin mit Niereninsuffizienz, Kreatinin 2,1 mg/dl, Hämoglobin 9,8 g/dl.",
    "Le patient présente une fièvre à 39 °C depuis trois jours.",
    "Hb 7.1 g/dL → transfused 2 units PRBC; post-transfusion Hb 8.9.",
    "Plan: start dexamethasone 40 mg weekly + lenalidomide 25 mg d1–21 q28d.",
    "ECOG performance status 1.",
    "Ejection fraction ≥ 50% is required for enrolment.",
    "No prior treatment with anti-PD-1, anti-PD-L1, or anti-CTLA-4 antibodies.",
    "Women of child-bearing potential must have a negative pregnancy test within 7 days.",
    "Glucose 245 mg/dL (H); K+ 5.6 mmol/L (H); Na+ 131 mmol/L (L).",
    "A1c",
    "CRP",
    "?",
    "Dr. Smith saw the pt on 3/4 & recommended f/u w/ nephrology.",
    "Impression:\n1. Community-acquired pneumonia.\n2. Acute kidney injury, likely prerenal.\n3. Hyperglycaemia.",
    "PATIENT ADMITTED WITH ACUTE ON CHRONIC SYSTOLIC HEART FAILURE EXACERBATION.",
    "肺炎 (pneumonia) treated with ceftriaxone 1 g IV q24h 🙂",
    # Longer than the 256-token window: sentence-transformers truncates it.
    (
        "History of present illness: The patient is a 72-year-old woman with multiple myeloma "
        "diagnosed in 2018 (IgG kappa, ISS stage II, standard-risk cytogenetics), treated with "
        "bortezomib, lenalidomide and dexamethasone for six cycles followed by autologous stem "
        "cell transplant in 2019 and lenalidomide maintenance, who presents with two weeks of "
        "progressive fatigue, lower back pain and new anaemia. "
    )
    * 5,
    (
        "Hospital course: She was admitted to the medicine service. Blood cultures were drawn, "
        "and empiric vancomycin and piperacillin-tazobactam were started. Her creatinine rose "
        "from 1.1 to 2.4 mg/dL on day 3 and improved with fluids to 1.3 mg/dL by discharge. "
        "Chest radiograph showed a right lower lobe consolidation. She was transitioned to oral "
        "amoxicillin-clavulanate 875 mg b.i.d. to complete a 7-day course. Diabetes was managed "
        "with basal-bolus insulin; home metformin was held for AKI and resumed at discharge."
    ),
    "Tumour measures 3.2 x 2.1 x 1.8 cm; margins negative (closest 0.4 cm); 0/12 lymph nodes.",
]


def model_dir() -> pathlib.Path:
    if len(sys.argv) > 1:
        return pathlib.Path(sys.argv[1])
    if os.environ.get("EVIDENT_CACHE_DIR"):
        root = pathlib.Path(os.environ["EVIDENT_CACHE_DIR"])
    elif os.environ.get("XDG_CACHE_HOME"):
        root = pathlib.Path(os.environ["XDG_CACHE_HOME"]) / "evident"
    else:
        root = pathlib.Path.home() / ".cache" / "evident"
    return root / "models" / "minilm-l6"


def main() -> None:
    directory = model_dir()
    model = SentenceTransformer(str(directory), device="cpu")
    vectors = model.encode(SENTENCES, batch_size=8, normalize_embeddings=False)
    token_counts = [len(model.tokenizer(s, add_special_tokens=False)["input_ids"]) for s in SENTENCES]
    out = {
        "model": "all-MiniLM-L6-v2",
        "max_seq_length": model.max_seq_length,
        "produced_by": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}, CPU",
        "script": "scripts/embed_reference.py",
        "items": [
            {"sentence": s, "tokens": n, "vector": [round(float(x), 6) for x in v]}
            for s, n, v in zip(SENTENCES, token_counts, vectors)
        ],
    }
    target = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "minilm" / "reference.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(SENTENCES)} vectors to {target}")


if __name__ == "__main__":
    main()
