//! A client of the control listener ([`super::serve_control`]): posts a [`Fault`] to
//! `POST {url}/sim/faults` over plain HTTP/1.1. Used by `kerf-sim fault` and by tests that
//! drive a sim running in another process.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Fault;

/// How long one control request may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why a fault could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The URL is not `http://HOST:PORT[/]`.
    #[error("control URL must look like http://127.0.0.1:PORT, got {0}")]
    BadUrl(String),
    /// Connecting, writing or reading failed.
    #[error("control listener {url}: {source}")]
    Io {
        /// The control URL.
        url: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// No answer in time.
    #[error("control listener {0}: no answer within 10 s")]
    Timeout(String),
    /// The listener refused the fault (404 unknown pod or container, 400 bad fault).
    #[error("control listener answered {status}: {body}")]
    Refused {
        /// The HTTP status code.
        status: u16,
        /// The answer's body.
        body: String,
    },
}

/// `host:port` of an `http://host:port[/]` URL (the scheme may be left out).
fn authority(url: &str) -> Result<&str, ControlError> {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains('/') || url.starts_with("https://") {
        return Err(ControlError::BadUrl(url.to_string()));
    }
    Ok(host)
}

/// Sends `fault` to the control listener at `url` (`http://127.0.0.1:PORT`).
pub async fn send_fault(url: &str, fault: &Fault) -> Result<(), ControlError> {
    let host = authority(url)?;
    let body = serde_json::to_string(fault).unwrap_or_default();
    let request = format!(
        "POST /sim/faults HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let io = |source| ControlError::Io {
        url: url.to_string(),
        source,
    };
    let exchange = async {
        let mut stream = TcpStream::connect(host).await.map_err(io)?;
        stream.write_all(request.as_bytes()).await.map_err(io)?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.map_err(io)?;
        Ok::<_, ControlError>(String::from_utf8_lossy(&answer).into_owned())
    };
    let answer = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| ControlError::Timeout(url.to_string()))??;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .unwrap_or(0);
    if (200..300).contains(&status) {
        return Ok(());
    }
    Err(ControlError::Refused {
        status,
        body: body.trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_urls_are_host_and_port() {
        assert_eq!(
            authority("http://127.0.0.1:9000").unwrap(),
            "127.0.0.1:9000"
        );
        assert_eq!(
            authority("http://127.0.0.1:9000/").unwrap(),
            "127.0.0.1:9000"
        );
        assert_eq!(authority("127.0.0.1:9000").unwrap(), "127.0.0.1:9000");
        assert!(authority("https://127.0.0.1:9000").is_err());
        assert!(authority("http://127.0.0.1:9000/sim").is_err());
    }
}
