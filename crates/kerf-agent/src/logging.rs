//! The agent's log output: `text` (one line per record) or `json` (one object per line),
//! every record stamped RFC 3339 UTC with milliseconds (`2026-12-04T15:45:00.123Z`), the
//! format of every other time Kerf writes ([`kerf_decide::duration::Rfc3339`]) with the
//! milliseconds added.

use std::fmt;

use chrono::Utc;
use kerf_decide::duration::Rfc3339Millis;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

use crate::cli::LogFormat;
use crate::settings::LogSettings;

/// The timestamp of a log record: the wall clock as [`Rfc3339Millis`].
#[derive(Clone, Copy, Debug, Default)]
pub struct LogTime;

impl FormatTime for LogTime {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        write!(w, "{}", Rfc3339Millis(Utc::now()))
    }
}

/// The subscriber of `log`'s format and filter writing to `writer`; `ansi` adds colour
/// codes to text lines. JSON lines carry the message and fields at the top level, the
/// innermost span with its fields under `span` and every span it is in, outermost first,
/// under `spans` (a pass's `workload`, `change_id` and `step`); text lines name the spans
/// with their fields before the message (`pass{workload=… change_id=…}:`).
pub fn subscriber<W>(
    log: &LogSettings,
    writer: W,
    ansi: bool,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = tracing_subscriber::EnvFilter::try_new(quiet_client_trace(&log.filter))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_timer(LogTime)
        .with_writer(writer);
    match log.format {
        LogFormat::Json => Box::new(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(true)
                .with_ansi(false)
                .finish(),
        ),
        LogFormat::Text => Box::new(builder.with_ansi(ansi).finish()),
    }
}

/// `filter` with kube's per-request failure lines off unless it names `kube_client`: the
/// agent logs each failed call itself, with the object it was for, and a line per failed
/// request of every watch would flood the log during an API server outage.
fn quiet_client_trace(filter: &str) -> String {
    if filter.contains("kube_client") {
        filter.to_owned()
    } else {
        format!("{filter},kube_client::client::builder=off")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex, PoisonError};

    use super::*;
    use crate::cache::WorkloadKey;
    use kerf_api::WorkloadKind;

    #[test]
    fn kube_request_failures_are_off_unless_the_filter_names_kube_client() {
        assert_eq!(
            quiet_client_trace("info"),
            "info,kube_client::client::builder=off"
        );
        assert_eq!(
            quiet_client_trace("info,kube_client=debug"),
            "info,kube_client=debug"
        );
    }

    /// Collects what the subscriber writes.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What the subscriber of `format` (filter `filter`) writes while `f` runs.
    fn output(format: LogFormat, filter: &str, f: impl FnOnce()) -> String {
        let buf = Buffer::default();
        let log = LogSettings {
            format,
            filter: filter.to_owned(),
        };
        let writer = buf.clone();
        let sub = subscriber(&log, move || writer.clone(), false);
        tracing::subscriber::with_default(sub, f);
        let bytes = buf.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
        String::from_utf8(bytes).unwrap()
    }

    fn one_line(format: LogFormat) -> String {
        output(format, "info", || tracing::info!(pod = "web-0", "resized"))
    }

    /// A line logged in a pass over `shop/Deployment/web` working on change `c-1`.
    fn line_in_a_pass(format: LogFormat, filter: &str) -> String {
        output(format, filter, || {
            let key = WorkloadKey::new("shop", WorkloadKind::Deployment, "web");
            let _pass = crate::reconcile::trace::pass_span(&key).entered();
            tracing::Span::current().record("change_id", "c-1");
            tracing::warn!(pod = "web-0", "resize refused");
        })
    }

    #[test]
    fn json_lines_carry_the_workload_and_change_of_their_pass() {
        let line = line_in_a_pass(LogFormat::Json, "info");
        let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(v["message"], "resize refused", "{line}");
        assert_eq!(v["span"]["name"], "pass", "{line}");
        assert_eq!(v["span"]["workload"], "shop/Deployment/web", "{line}");
        assert_eq!(v["span"]["change_id"], "c-1", "{line}");
        assert_eq!(v["spans"][0]["change_id"], "c-1", "{line}");
    }

    #[test]
    fn text_lines_name_the_workload_and_change_of_their_pass() {
        let line = line_in_a_pass(LogFormat::Text, "info");
        assert!(
            line.contains("pass{workload=shop/Deployment/web change_id=\"c-1\"}"),
            "{line:?}"
        );
    }

    #[test]
    fn a_warn_filter_keeps_the_pass_span() {
        let line = line_in_a_pass(LogFormat::Json, "warn");
        let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(v["span"]["change_id"], "c-1", "{line}");
    }

    /// `2026-12-04T15:45:00.123Z`: RFC 3339 UTC, milliseconds, `Z`.
    fn is_log_time(s: &str) -> bool {
        let b = s.as_bytes();
        let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
        b.len() == 24
            && digits(0..4)
            && b[4] == b'-'
            && digits(5..7)
            && b[7] == b'-'
            && digits(8..10)
            && b[10] == b'T'
            && digits(11..13)
            && b[13] == b':'
            && digits(14..16)
            && b[16] == b':'
            && digits(17..19)
            && b[19] == b'.'
            && digits(20..23)
            && b[23] == b'Z'
    }

    // One time format across logs, status, explain and report (issue 32).
    #[test]
    fn text_lines_start_with_an_rfc3339_utc_time_with_milliseconds() {
        let line = one_line(LogFormat::Text);
        let stamp = line.split_whitespace().next().unwrap_or_default();
        assert!(is_log_time(stamp), "{line:?}");
        assert!(
            line.contains("resized") && line.contains("pod=\"web-0\""),
            "{line:?}"
        );
        assert!(
            !line.contains("+00:00") && !line.contains(" UTC"),
            "{line:?}"
        );
    }

    // One time format across logs, status, explain and report (issue 32).
    #[test]
    fn json_lines_carry_an_rfc3339_utc_timestamp_with_milliseconds() {
        let line = one_line(LogFormat::Json);
        let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
        let stamp = v["timestamp"].as_str().unwrap_or_default();
        assert!(is_log_time(stamp), "{line:?}");
        assert_eq!(v["message"], "resized", "{line}");
    }
}
