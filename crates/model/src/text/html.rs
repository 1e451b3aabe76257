//! HTML to plain text for FHIR attachments of type text/html.

/// Converts an HTML fragment to readable plain text: tags dropped, block
/// elements become line breaks, entities decoded, script/style removed.
pub fn html_to_text(html: &str) -> String {
    todo!("html_to_text: {}", html.len())
}
