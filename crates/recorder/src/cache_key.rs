//! Which requests are the same request: the cache key is the sha256 of the
//! model id and the full canonical request as JSON (field order as
//! declared, `serde_json`'s `preserve_order` for schemas), so two requests
//! that differ in anything never share an answer.

use evident_llm::ChatRequest;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::RecorderError;

/// The cache key of `request` sent to `model_id`: hex sha256 of the model
/// id, a zero byte and the request's JSON. A request that cannot be written
/// as JSON has no key (an error), never a shared empty one.
pub fn cache_key(model_id: &str, request: &ChatRequest) -> Result<String, RecorderError> {
    key_of(model_id, request, "the request for its cache key")
}

fn key_of(model_id: &str, value: &impl Serialize, what: &'static str) -> Result<String, RecorderError> {
    let json = serde_json::to_vec(value).map_err(|source| RecorderError::Serialize { what, source })?;
    let mut hasher = Sha256::new();
    hasher.update(model_id.as_bytes());
    hasher.update([0u8]);
    hasher.update(json);
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use evident_llm::Message;
    use std::collections::BTreeMap;

    #[test]
    fn keys_differ_by_model_and_by_any_request_field() {
        let a = ChatRequest::new(vec![Message::user("q")]);
        let mut b = a.clone();
        b.max_tokens += 1;
        let key = |m: &str, r: &ChatRequest| cache_key(m, r).unwrap();
        assert_ne!(key("m", &a), key("m", &b));
        assert_ne!(key("m", &a), key("n", &a));
        assert_eq!(key("m", &a), key("m", &a.clone()));
    }

    /// Keys written by earlier versions must still be found: this one is
    /// sha256(b"counting\0" + the request's JSON), computed independently.
    #[test]
    fn the_key_of_a_fixed_request_is_unchanged() {
        let request = ChatRequest::new(vec![Message::user("note: patient is 71")]);
        assert_eq!(
            cache_key("counting", &request).unwrap(),
            "e50d6f06186ce08f6a787d67ea26cf4bca857dae9ac9030e146ef3eb15f996ca"
        );
    }

    #[test]
    fn a_value_that_cannot_be_written_as_json_has_no_key() {
        // JSON object keys must be strings: a map keyed by pairs cannot be written.
        let unwritable: BTreeMap<(u8, u8), u8> = BTreeMap::from([((1, 2), 3)]);
        let err = key_of("m", &unwritable, "the test value").unwrap_err();
        assert!(matches!(err, RecorderError::Serialize { what: "the test value", .. }), "{err}");
        assert!(err.to_string().starts_with("cannot write the test value as JSON"), "{err}");
    }
}
