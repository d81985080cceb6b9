//! The log lines of a test binary: the agent's own subscriber ([`kerf_agent::logging`]),
//! installed process-wide, writing into memory.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use kerf_agent::cli::LogFormat;
use kerf_agent::settings::LogSettings;
use tracing_subscriber::util::SubscriberInitExt as _;

/// What the process-wide subscriber of [`capture_logs`] has written so far.
#[derive(Clone, Debug, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// Every line written so far.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the agent's subscriber of `format` and `filter` for the whole test binary,
/// before [`super::Env::start`] installs its own; an error when one was installed first.
pub fn capture_logs(format: LogFormat, filter: &str) -> anyhow::Result<LogCapture> {
    let capture = LogCapture::default();
    let writer = capture.clone();
    let log = LogSettings {
        format,
        filter: filter.to_owned(),
    };
    kerf_agent::logging::subscriber(&log, move || writer.clone(), false)
        .try_init()
        .map_err(|e| anyhow::anyhow!("another subscriber was installed first: {e}"))?;
    Ok(capture)
}
