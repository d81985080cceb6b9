//! Go durations as the agent reads them: `kerf_decide::duration::parse_go_duration`, the
//! CRD's pattern check `is_go_duration`, and `format_go_duration`, which must read back to
//! the same duration.

use kerf_api::validate::is_go_duration;
use kerf_decide::duration::{format_go_duration, parse_go_duration};

/// One input of the target.
pub fn run(data: &[u8]) {
    let Some(s) = super::text(data) else {
        return;
    };
    let _ = is_go_duration(s);
    if let Ok(d) = parse_go_duration(s) {
        let text = format_go_duration(d);
        assert_eq!(parse_go_duration(&text), Ok(d), "{s:?} formats as {text:?}");
    }
}
