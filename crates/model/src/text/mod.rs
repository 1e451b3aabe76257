//! Turning document text into sections and sentences, and HTML into text.
//! These spans are what every later decision cites, so they are computed
//! once at ingestion and stored.

mod html;
mod sections;
mod sentences;

pub use html::{escape_html, html_to_text};
pub use sections::split_sections;
pub use sentences::split_sentences;
