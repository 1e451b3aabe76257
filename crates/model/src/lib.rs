//! The record model shared by every Evident crate: patients, documents and
//! their canonical kinds, sections, sentences and lab observations, plus the
//! pure rules that derive them from raw text (sectioning, sentence splitting,
//! HTML to text) and the lab-concept catalogue. Nothing here touches disk,
//! network or clock, so every function is deterministic.

pub mod age;
pub mod kind;
pub mod labs;
pub mod record;
pub mod text;

pub use kind::DocKind;
pub use record::{content_hash, Document, LabObservation, LabValue, Patient, SectionSpan, SentenceSpan};
