//! HTML to plain text for FHIR attachments of type text/html (and FHIR
//! narratives), and the one escape every report page uses for text it shows. A small forgiving scanner rather than a full HTML parser:
//! clinical attachments are simple documents, and malformed markup must still
//! give readable text rather than an error.

/// Elements whose start and end become line breaks.
const BLOCK_ELEMENTS: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "tr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "ul",
    "ol",
    "table",
    "thead",
    "tbody",
    "tfoot",
    "section",
    "article",
    "header",
    "footer",
    "blockquote",
    "pre",
    "hr",
    "dt",
    "dd",
    "dl",
    "title",
    "caption",
    "address",
    "nav",
    "main",
    "aside",
    "figure",
    "figcaption",
    "body",
    "html",
    "head",
];

/// Elements whose content is never text.
const SKIPPED_ELEMENTS: &[&str] = &["script", "style", "head", "template", "noscript"];

/// Converts an HTML fragment to readable plain text: tags dropped, block
/// elements become line breaks, entities decoded, script/style removed.
///
/// Whitespace is tidied as a browser would: runs of spaces, tabs and source
/// newlines inside text become one space (except inside `<pre>`), lines are
/// trimmed, and at most one blank line separates paragraphs. List items get
/// a "- " marker and table cells are separated by " | " so that rows and
/// items stay readable as sentences.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut pre_depth = 0usize;
    let mut rest = html;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map(|p| &after[p + 3..]).unwrap_or("");
            continue;
        }
        if rest.starts_with("<!") || rest.starts_with("<?") {
            rest = rest.find('>').map(|p| &rest[p + 1..]).unwrap_or("");
            continue;
        }
        if rest.starts_with('<') {
            if let Some(tag) = parse_tag(rest) {
                rest = &rest[tag.len..];
                if !tag.closing && SKIPPED_ELEMENTS.contains(&tag.name.as_str()) && !tag.self_closing {
                    rest = skip_past_end_tag(rest, &tag.name);
                    out.push('\n');
                    continue;
                }
                match tag.name.as_str() {
                    "pre" if tag.closing => pre_depth = pre_depth.saturating_sub(1),
                    "pre" => pre_depth += 1,
                    _ => {}
                }
                if tag.name == "li" && !tag.closing {
                    out.push_str("\n- ");
                } else if (tag.name == "td" || tag.name == "th") && tag.closing {
                    out.push_str(" | ");
                } else if BLOCK_ELEMENTS.contains(&tag.name.as_str()) {
                    out.push('\n');
                }
                continue;
            }
            // A lone '<' ("x < 5") is text.
        }
        // At least the first character is text (it may be a lone '<').
        let first = rest.chars().next().map(char::len_utf8).unwrap_or(1);
        let text_end = rest[first..].find('<').map(|p| p + first).unwrap_or(rest.len());
        let decoded = decode_entities(&rest[..text_end]);
        if pre_depth > 0 {
            out.push_str(&decoded);
        } else {
            for c in decoded.chars() {
                // Non-breaking spaces count as spaces when tidying.
                out.push(if c.is_whitespace() { ' ' } else { c });
            }
        }
        rest = &rest[text_end..];
    }
    tidy(&out)
}

struct Tag {
    name: String,
    closing: bool,
    self_closing: bool,
    /// Bytes of the tag in the input, including `<` and `>`.
    len: usize,
}

/// Parses a tag at the start of `s` (which starts with `<`). Returns `None`
/// when this is not a tag, such as "< 5".
fn parse_tag(s: &str) -> Option<Tag> {
    let body = &s[1..];
    let closing = body.starts_with('/');
    let name_part = if closing { &body[1..] } else { body };
    let name: String = name_part.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == ':').collect();
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    // Find the closing '>' outside quoted attribute values.
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices().skip(1) {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '>') => {
                let self_closing = s[..i].ends_with('/');
                // Drop an XML namespace prefix (FHIR narratives use xhtml).
                let name = name.rsplit(':').next().unwrap_or(&name).to_ascii_lowercase();
                return Some(Tag { name, closing, self_closing, len: i + 1 });
            }
            _ => {}
        }
    }
    // An unterminated tag swallows the rest of the input, as browsers do.
    Some(Tag { name: name.to_ascii_lowercase(), closing, self_closing: false, len: s.len() })
}

fn skip_past_end_tag<'a>(s: &'a str, name: &str) -> &'a str {
    let lower = s.to_ascii_lowercase();
    let needle = format!("</{name}");
    match lower.find(&needle) {
        Some(p) => match s[p..].find('>') {
            Some(q) => &s[p + q + 1..],
            None => "",
        },
        None => "",
    }
}

/// Decodes named (common ones) and numeric character references. Unknown
/// references stay as written.
pub(crate) fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let end = rest[1..]
            .char_indices()
            .take(32)
            .find(|(_, c)| *c == ';' || c.is_whitespace() || *c == '&' || *c == '<')
            .map(|(i, c)| (i + 1, c));
        if let Some((semi, ';')) = end {
            if let Some(c) = decode_reference(&rest[1..semi]) {
                out.push_str(&c);
                rest = &rest[semi + 1..];
                continue;
            }
        }
        out.push('&');
        rest = &rest[1..];
    }
    out.push_str(rest);
    out
}

fn decode_reference(name: &str) -> Option<String> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse::<u32>().ok()?,
        };
        let c = char::from_u32(code).filter(|c| *c != '\0').unwrap_or('\u{FFFD}');
        return Some(c.to_string());
    }
    let c = match name {
        "amp" => "&",
        "lt" => "<",
        "gt" => ">",
        "quot" => "\"",
        "apos" => "'",
        "nbsp" => "\u{a0}",
        "ndash" => "–",
        "mdash" => "—",
        "hellip" => "…",
        "lsquo" => "‘",
        "rsquo" => "’",
        "ldquo" => "“",
        "rdquo" => "”",
        "bull" => "•",
        "middot" => "·",
        "deg" => "°",
        "micro" => "µ",
        "plusmn" => "±",
        "times" => "×",
        "divide" => "÷",
        "le" => "≤",
        "ge" => "≥",
        "ne" => "≠",
        "asymp" => "≈",
        "larr" => "←",
        "rarr" => "→",
        "uarr" => "↑",
        "darr" => "↓",
        "alpha" => "α",
        "beta" => "β",
        "gamma" => "γ",
        "delta" => "δ",
        "kappa" => "κ",
        "lambda" => "λ",
        "mu" => "μ",
        "sup2" => "²",
        "sup3" => "³",
        "frac12" => "½",
        "frac14" => "¼",
        "copy" => "©",
        "reg" => "®",
        "trade" => "™",
        "sect" => "§",
        "para" => "¶",
        "euro" => "€",
        "pound" => "£",
        "auml" => "ä",
        "ouml" => "ö",
        "uuml" => "ü",
        "Auml" => "Ä",
        "Ouml" => "Ö",
        "Uuml" => "Ü",
        "szlig" => "ß",
        "eacute" => "é",
        "egrave" => "è",
        "Eacute" => "É",
        "aacute" => "á",
        "agrave" => "à",
        "ccedil" => "ç",
        "ntilde" => "ñ",
        "oacute" => "ó",
        "iacute" => "í",
        "uacute" => "ú",
        "shy" => "",
        "zwsp" | "ZeroWidthSpace" => "",
        _ => return None,
    };
    Some(c.to_string())
}

/// Collapses runs of spaces, trims every line, and keeps at most one blank
/// line between paragraphs. Table-cell separators left dangling at a line
/// end are dropped.
fn tidy(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut blank_run = 0;
    for line in s.split('\n') {
        let mut collapsed = String::with_capacity(line.len());
        for word in line.split([' ', '\t', '\r', '\u{a0}']).filter(|w| !w.is_empty()) {
            if !collapsed.is_empty() {
                collapsed.push(' ');
            }
            collapsed.push_str(word);
        }
        let mut trimmed = collapsed.as_str();
        while let Some(t) = trimmed.strip_suffix(" |").or_else(|| trimmed.strip_suffix('|')) {
            trimmed = t.trim_end();
        }
        if trimmed.is_empty() || trimmed == "-" {
            blank_run += 1;
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
            if blank_run > 1 {
                out.push('\n');
            }
        }
        blank_run = 0;
        out.push_str(trimmed);
    }
    out
}

/// Escapes text for HTML element content and quoted attribute values: the
/// escape of every HTML page Evident writes (screening, chart and study
/// reports).
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(html: &str, expected: &str) {
        assert_eq!(html_to_text(html), expected, "html: {html:?}");
    }

    #[test]
    fn tags_are_dropped() {
        check("<b>bold</b> and <i>italic</i>", "bold and italic");
        check("<span class=\"x\">a</span><span>b</span>", "ab");
        check("plain text", "plain text");
        check("", "");
    }

    #[test]
    fn block_elements_become_line_breaks() {
        check("<p>One</p><p>Two</p>", "One\nTwo");
        check("Line<br>break<br/>again<br />end", "Line\nbreak\nagain\nend");
        check("<h1>Title</h1><div>Body text</div>", "Title\nBody text");
        check("<ul><li>a</li><li>b</li></ul>", "- a\n- b");
        check("<table><tr><td>Hb</td><td>9.8</td></tr><tr><td>Cr</td><td>1.2</td></tr></table>", "Hb | 9.8\nCr | 1.2");
    }

    #[test]
    fn paragraphs_keep_one_blank_line_at_most() {
        check("<p>One</p>\n\n\n<p></p><p>Two</p>", "One\n\nTwo");
    }

    #[test]
    fn script_style_and_comments_are_removed() {
        check("a<script>var x = '<p>';</script>b", "a\nb");
        check("<style>p { color: red }</style>text", "text");
        check("x<!-- hidden <b>c</b> -->y", "xy");
        check("<!DOCTYPE html><html><head><title>T</title></head><body>Hi</body></html>", "Hi");
    }

    #[test]
    fn entities_are_decoded() {
        check("a &amp; b &lt;5&gt; &quot;q&quot; &#39;s&#x27;", "a & b <5> \"q\" 's'");
        check("H&auml;moglobin &szlig; 37&deg;C &micro;g", "Hämoglobin ß 37°C µg");
        check("&unknown; & alone &amp", "&unknown; & alone &amp");
        check("a&nbsp;&nbsp;b", "a b");
        check("&#128512;", "😀");
    }

    #[test]
    fn whitespace_is_tidied() {
        check("<p>  many\n   spaces\there </p>", "many spaces here");
        check("<pre>keep\n  this</pre>", "keep\nthis");
    }

    #[test]
    fn malformed_markup_still_gives_text() {
        check("x < 5 and y > 3", "x < 5 and y > 3");
        check("ä<b>ö</b>", "äö");
        check("<p>unclosed", "unclosed");
        check("text <b", "text");
        check("<div title=\"a>b\">in</div>", "in");
    }

    #[test]
    fn fhir_narrative_xhtml() {
        check("<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>Patient &amp; family</p></div>", "Patient & family");
    }
}
