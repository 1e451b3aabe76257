//! Sentence splitting that survives clinical text.

use crate::SentenceSpan;

/// Splits `text` into sentences, as byte spans in document order.
pub fn split_sentences(text: &str) -> Vec<SentenceSpan> {
    todo!("split_sentences: {}", text.len())
}
