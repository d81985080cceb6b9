//! The bearer token, read from a file (a mounted Secret) and read again when the file
//! changes. The token is never logged: [`Secret`] prints as `***`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use super::lock_unpoisoned as lock;

/// A token value that never shows in logs or debug output.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> Secret {
        Secret(token.into())
    }

    /// The token, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[derive(Debug, Default)]
struct Cached {
    stamp: Option<(Option<SystemTime>, u64)>,
    token: Option<Secret>,
    version: u64,
}

/// Where the token comes from.
#[derive(Debug)]
pub struct TokenSource {
    path: Option<PathBuf>,
    cached: Mutex<Cached>,
}

impl TokenSource {
    /// A token read from `path`, or no token for `None`.
    pub fn new(path: Option<PathBuf>) -> TokenSource {
        TokenSource {
            path,
            cached: Mutex::new(Cached::default()),
        }
    }

    /// The file, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The current token and its version (a counter that moves whenever the content
    /// changes). The file is read again when its mtime or size changed, or when `force`.
    pub fn current(&self, force: bool) -> std::io::Result<(Option<Secret>, u64)> {
        let Some(path) = &self.path else {
            return Ok((None, 0));
        };
        let meta = std::fs::metadata(path)?;
        let stamp = (meta.modified().ok(), meta.len());
        let mut cached = lock(&self.cached);
        if force || cached.stamp != Some(stamp) || cached.token.is_none() {
            let text = std::fs::read_to_string(path)?;
            let token = Secret::new(text.trim());
            if cached.token.as_ref() != Some(&token) {
                cached.version += 1;
                cached.token = Some(token);
            }
            cached.stamp = Some(stamp);
        }
        Ok((cached.token.clone(), cached.version))
    }
}
