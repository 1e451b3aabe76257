//! The lab-concept catalogue: canonical concepts with stable ids and an alias
//! index from observed names and LOINC codes, loaded from a validated data
//! file (`data/lab_concepts.json`).
