//! Warnings an answer carries in `Warning` headers (`299 - "unknown field \"spec.x\""`),
//! and the request's `fieldValidation` mode, both scoped to the request being served so
//! that validation deep in a verb can read the mode and add warnings without every verb
//! passing them along.

use std::cell::RefCell;
use std::future::Future;

use axum::body::Body;
use http::{HeaderValue, Response};

/// What the server does with unknown fields (`?fieldValidation=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and warn (the default).
    Warn,
    /// Refuse the request.
    Strict,
}

impl FieldValidation {
    /// The mode a query value names; anything else is the default, `Warn`.
    pub fn parse(q: Option<&str>) -> FieldValidation {
        match q {
            Some("Ignore") => FieldValidation::Ignore,
            Some("Strict") => FieldValidation::Strict,
            _ => FieldValidation::Warn,
        }
    }
}

struct RequestScope {
    field_validation: FieldValidation,
    warnings: RefCell<Vec<String>>,
}

tokio::task_local! {
    static REQUEST: RequestScope;
}

/// Serves `answer` with `fieldValidation` = `mode` and adds the warnings collected meanwhile
/// to its headers.
pub async fn scope<F>(mode: FieldValidation, answer: F) -> Response<Body>
where
    F: Future<Output = Response<Body>>,
{
    let request = RequestScope {
        field_validation: mode,
        warnings: RefCell::new(Vec::new()),
    };
    let (mut response, warnings) = REQUEST
        .scope(request, async {
            let response = answer.await;
            let warnings = REQUEST.with(|r| r.warnings.take());
            (response, warnings)
        })
        .await;
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&header_value(&w)) {
            response.headers_mut().append(http::header::WARNING, v);
        }
    }
    response
}

/// The `Warning` header value of a warning text: code 299, no agent, the text quoted.
pub fn header_value(text: &str) -> String {
    let quoted = text.replace('\\', "\\\\").replace('"', "\\\"");
    format!("299 - \"{quoted}\"")
}

/// The `fieldValidation` mode of the request being served (`Warn` outside a request).
pub fn field_validation() -> FieldValidation {
    REQUEST
        .try_with(|r| r.field_validation)
        .unwrap_or(FieldValidation::Warn)
}

/// Adds a warning to the answer of the request being served.
pub fn add(text: String) {
    let _ = REQUEST.try_with(|r| r.warnings.borrow_mut().push(text));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_quoted_as_the_api_server_quotes_it() {
        assert_eq!(
            header_value("unknown field \"spec.x\""),
            r#"299 - "unknown field \"spec.x\"""#
        );
    }
}
