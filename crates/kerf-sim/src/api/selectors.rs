//! Label selectors (the query syntax and the `matchLabels`/`matchExpressions` form) and
//! field selectors.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::store::ApiError;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    reqs: Vec<Req>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Op(&'static str),
    Open,
    Close,
    Comma,
    Bang,
    End,
}

fn lex(s: &str) -> Vec<Tok> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let two: String = chars[i..chars.len().min(i + 2)].iter().collect();
        match c {
            ' ' | '\t' => i += 1,
            '(' => {
                out.push(Tok::Open);
                i += 1
            }
            ')' => {
                out.push(Tok::Close);
                i += 1
            }
            ',' => {
                out.push(Tok::Comma);
                i += 1
            }
            _ if two == "==" => {
                out.push(Tok::Op("="));
                i += 2
            }
            _ if two == "!=" => {
                out.push(Tok::Op("!="));
                i += 2
            }
            '=' => {
                out.push(Tok::Op("="));
                i += 1
            }
            '!' => {
                out.push(Tok::Bang);
                i += 1
            }
            '>' => {
                out.push(Tok::Op(">"));
                i += 1
            }
            '<' => {
                out.push(Tok::Op("<"));
                i += 1
            }
            _ => {
                let start = i;
                while i < chars.len() && !" \t(),=!<>".contains(chars[i]) {
                    i += 1;
                }
                out.push(Tok::Ident(chars[start..i].iter().collect()));
            }
        }
    }
    out.push(Tok::End);
    out
}

fn tok_text(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => s.clone(),
        Tok::Op(o) => (*o).to_string(),
        Tok::Open => "(".into(),
        Tok::Close => ")".into(),
        Tok::Comma => ",".into(),
        Tok::Bang => "!".into(),
        Tok::End => String::new(),
    }
}

fn err(found: &Tok, expected: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: found '{}', expected: {expected}",
        tok_text(found)
    ))
}

impl LabelSelector {
    /// Parses the `labelSelector` query syntax (`a=b,c!=d,e in (f,g),h notin (i),j,!k`).
    pub fn parse(s: &str) -> Result<LabelSelector, ApiError> {
        let toks = lex(s);
        let mut p = 0;
        let mut reqs = Vec::new();
        if toks[0] == Tok::End {
            return Ok(LabelSelector::default());
        }
        loop {
            let (r, np) = parse_req(&toks, p)?;
            reqs.push(r);
            p = np;
            match &toks[p] {
                Tok::End => break,
                Tok::Comma => p += 1,
                t => return Err(err(t, "','")),
            }
        }
        Ok(LabelSelector { reqs })
    }

    /// Builds a selector from a metav1.LabelSelector object (`matchLabels`,
    /// `matchExpressions`). An empty selector matches everything.
    pub fn from_object(sel: &Value) -> LabelSelector {
        let mut reqs = Vec::new();
        if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in m {
                reqs.push(Req::Eq(
                    k.clone(),
                    v.as_str().unwrap_or_default().to_string(),
                ));
            }
        }
        for e in sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = e["key"].as_str().unwrap_or_default().to_string();
            let vals: BTreeSet<String> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            match e["operator"].as_str().unwrap_or_default() {
                "In" => reqs.push(Req::In(key, vals)),
                "NotIn" => reqs.push(Req::NotIn(key, vals)),
                "Exists" => reqs.push(Req::Exists(key)),
                _ => reqs.push(Req::NotExists(key)),
            }
        }
        LabelSelector { reqs }
    }

    /// Whether a label map matches.
    pub fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.reqs.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::Ne(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.contains(x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| !vs.contains(x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }

    /// Whether an object's `metadata.labels` match.
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.matches(obj.pointer("/metadata/labels").and_then(Value::as_object))
    }
}

fn parse_req(toks: &[Tok], mut p: usize) -> Result<(Req, usize), ApiError> {
    if toks[p] == Tok::Bang {
        p += 1;
        return match &toks[p] {
            Tok::Ident(k) => Ok((Req::NotExists(k.clone()), p + 1)),
            t => Err(err(t, "identifier")),
        };
    }
    let Tok::Ident(key) = &toks[p] else {
        return Err(err(&toks[p], "identifier"));
    };
    p += 1;
    match &toks[p] {
        Tok::End | Tok::Comma => Ok((Req::Exists(key.clone()), p)),
        Tok::Op(op @ ("=" | "!=")) => {
            p += 1;
            let (val, np) = match &toks[p] {
                Tok::Ident(v) => (v.clone(), p + 1),
                Tok::End | Tok::Comma => (String::new(), p),
                t => return Err(err(t, "identifier")),
            };
            let r = if *op == "=" {
                Req::Eq(key.clone(), val)
            } else {
                Req::Ne(key.clone(), val)
            };
            Ok((r, np))
        }
        Tok::Ident(op) if op == "in" || op == "notin" => {
            p += 1;
            if toks[p] != Tok::Open {
                return Err(err(&toks[p], "'('"));
            }
            p += 1;
            let mut vals = BTreeSet::new();
            loop {
                match &toks[p] {
                    Tok::Ident(v) => {
                        vals.insert(v.clone());
                        p += 1;
                    }
                    Tok::Close if vals.is_empty() => {}
                    t => return Err(err(t, "',', ')' or identifier")),
                }
                match &toks[p] {
                    Tok::Comma => p += 1,
                    Tok::Close => break,
                    t => return Err(err(t, "',' or ')'")),
                }
            }
            let r = if op == "in" {
                Req::In(key.clone(), vals)
            } else {
                Req::NotIn(key.clone(), vals)
            };
            Ok((r, p + 1))
        }
        t => Err(err(t, "'=', '!=', '==', 'in', notin'")),
    }
}

/// A parsed field selector: `a=b`, `a==b`, `a!=b`, comma-separated.
#[derive(Debug, Clone, Default)]
pub struct FieldSelector {
    reqs: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses a field selector.
    pub fn parse(s: &str) -> Result<FieldSelector, ApiError> {
        let mut reqs = Vec::new();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let k = k.trim();
            if !matches!(
                k,
                "metadata.name"
                    | "metadata.namespace"
                    | "spec.nodeName"
                    | "status.phase"
                    | "spec.schedulerName"
                    | "involvedObject.name"
                    | "involvedObject.namespace"
                    | "involvedObject.kind"
                    | "involvedObject.uid"
                    | "type"
                    | "reason"
            ) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {k}"
                )));
            }
            reqs.push((k.to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector { reqs })
    }

    /// Whether an object matches.
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(k, eq, v)| {
            let ptr = format!("/{}", k.replace('.', "/"));
            let actual = obj
                .pointer(&ptr)
                .and_then(Value::as_str)
                .unwrap_or_default();
            (actual == v) == *eq
        })
    }

    /// The `metadata.name=` value, if the selector pins one.
    pub fn name(&self) -> Option<&str> {
        self.reqs
            .iter()
            .find(|(k, eq, _)| k == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_set_operators_match_as_kubernetes() {
        let s = LabelSelector::parse("app in (a,b),tier notin (db),env,!legacy,x!=y").unwrap();
        assert!(s.matches_object(&json!({"metadata": {"labels": {"app": "a", "env": "p"}}})));
        assert!(!s.matches_object(
            &json!({"metadata": {"labels": {"app": "a", "env": "p", "legacy": "1"}}})
        ));
        assert!(!s.matches_object(&json!({"metadata": {"labels": {"app": "c", "env": "p"}}})));
    }

    #[test]
    fn unterminated_set_is_the_servers_parse_error() {
        let e = LabelSelector::parse("app in (a").unwrap_err();
        assert_eq!(
            e.message,
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
    }
}
