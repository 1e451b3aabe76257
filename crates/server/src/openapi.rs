//! The OpenAPI 3.1 document, generated from the metadata beside each
//! route in [`api::routes`](crate::api::routes); the checked-in copy
//! (`crates/server/openapi.json`) is compared with it by a test, so the
//! two cannot drift apart. Response bodies are described by media type
//! and summary, not by schema: the JSON shapes are the app layer's
//! serialised result types.

use serde_json::{json, Map, Value};

use crate::api::routes;
use crate::auth::{CSRF_HEADER, SESSION_COOKIE};

/// Where the checked-in document lives, relative to the crate.
pub const CHECKED_IN: &str = "openapi.json";

pub fn document() -> Value {
    let mut paths = Map::new();
    for (doc, _) in routes() {
        let mut parameters: Vec<Value> = Vec::new();
        for name in path_parameters(doc.path) {
            parameters.push(json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }));
        }
        for (name, description, required) in doc.query {
            parameters.push(json!({
                "name": name, "in": "query", "required": required, "description": description,
                "schema": { "type": "string" }
            }));
        }
        if doc.state_changing && doc.path != "/api/login" {
            parameters.push(json!({
                "name": CSRF_HEADER, "in": "header", "required": true,
                "description": "the session's CSRF token (from /api/me or the login answer)",
                "schema": { "type": "string" }
            }));
        }
        let mut operation = Map::new();
        operation.insert("summary".into(), json!(doc.summary));
        operation.insert("tags".into(), json!([doc.tag]));
        operation.insert("operationId".into(), json!(operation_id(doc.method, doc.path)));
        if !parameters.is_empty() {
            operation.insert("parameters".into(), Value::Array(parameters));
        }
        if !doc.body.is_empty() {
            let mut properties = Map::new();
            let mut required = Vec::new();
            for (name, kind, description, needed) in doc.body {
                properties.insert(name.to_string(), json!({ "type": kind, "description": description }));
                if *needed {
                    required.push(json!(name));
                }
            }
            operation.insert(
                "requestBody".into(),
                json!({ "required": true, "content": { "application/json": { "schema": {
                    "type": "object", "properties": properties, "required": required
                } } } }),
            );
        }
        let success = if doc.state_changing && doc.path.ends_with("/logout") {
            "204"
        } else if doc.state_changing && doc.path.starts_with("/api/jobs") {
            "202"
        } else if doc.state_changing && doc.path != "/api/login" {
            "201"
        } else {
            "200"
        };
        let mut responses = Map::new();
        responses.insert(success.into(), json!({ "description": "success", "content": { doc.produces: {} } }));
        let error = json!({ "$ref": "#/components/responses/Error" });
        responses.insert("400".into(), error.clone());
        if !path_parameters(doc.path).is_empty() {
            responses.insert("404".into(), error.clone());
        }
        match doc.role {
            None => {}
            Some(role) => {
                responses.insert("401".into(), error.clone());
                let mut forbidden = "the role is below ".to_string() + role.as_str();
                if doc.state_changing {
                    forbidden.push_str(", or the CSRF token is missing or wrong");
                }
                responses.insert(
                    "403".into(),
                    json!({ "description": forbidden, "content": { "application/json": {
                    "schema": { "$ref": "#/components/schemas/Error" } } } }),
                );
                operation.insert("x-evident-role".into(), json!(role.as_str()));
                operation.insert("security".into(), json!([{ "session": [] }]));
            }
        }
        if doc.path == "/api/login" {
            responses.insert("403".into(), error.clone());
            responses.insert("429".into(), error.clone());
        }
        operation.insert("responses".into(), Value::Object(responses));
        let entry = paths.entry(doc.path.to_string()).or_insert_with(|| json!({}));
        entry[doc.method] = Value::Object(operation);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Evident review service",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The JSON API of `evident serve`: records, screening runs and their decisions, reviewers' overrides and sign-offs, the audit trail, model runs. Every route except login and this document needs a session cookie; every state-changing route needs the CSRF token."
        },
        "paths": paths,
        "components": {
            "securitySchemes": {
                "session": { "type": "apiKey", "in": "cookie", "name": SESSION_COOKIE }
            },
            "schemas": {
                "Error": { "type": "object", "properties": { "error": { "type": "string" } }, "required": ["error"] }
            },
            "responses": {
                "Error": { "description": "an error with a safe message", "content": { "application/json": {
                    "schema": { "$ref": "#/components/schemas/Error" } } } }
            }
        }
    })
}

/// The document as checked in: pretty JSON with a final newline.
pub fn document_text() -> String {
    serde_json::to_string_pretty(&document()).expect("the document serialises") + "\n"
}

fn path_parameters(path: &str) -> Vec<&str> {
    path.split('/').filter_map(|p| p.strip_prefix('{').and_then(|p| p.strip_suffix('}'))).collect()
}

fn operation_id(method: &str, path: &str) -> String {
    let mut id = method.to_string();
    for part in path.trim_start_matches("/api/").split('/') {
        let part = part.trim_matches(|c| c == '{' || c == '}').replace(['.', '-'], "_");
        id.push('_');
        id.push_str(&part);
    }
    id
}
