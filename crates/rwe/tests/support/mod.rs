//! What the study tests share: the scripted fake model, failing like a
//! lost connection when its script runs out.
#![allow(dead_code)]

pub use evident_testdata::Scripted;

/// A scripted model whose exhausted script fails like a lost connection (a
/// killed run).
pub fn scripted<S: AsRef<str>>(answers: &[S]) -> Scripted {
    Scripted::new(answers).failing_when_exhausted()
}
