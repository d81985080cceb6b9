//! Maintenance and freeze windows: cron schedule, duration, time zone, one-off start and
//! end, evaluated at an instant (`kerf_decide::window::WindowList`).
//!
//! Input lines: schedule, duration, timeZone, start, end, now (Unix seconds); an empty
//! line leaves the field out. Several windows are separated by a line `--`.

use super::{field, instant};
use kerf_api::{GoDuration, Window};
use kerf_decide::window::{WindowKind, WindowList};

fn window(lines: &[&str]) -> Window {
    Window {
        schedule: field(lines, 0),
        duration: field(lines, 1).map(GoDuration),
        time_zone: field(lines, 2),
        start: field(lines, 3),
        end: field(lines, 4),
    }
}

/// One input of the target.
pub fn run(data: &[u8]) {
    let Some(s) = super::text(data) else {
        return;
    };
    let parts: Vec<Vec<&str>> = s.split("\n--\n").map(|p| p.split('\n').collect()).collect();
    let now = instant(parts[0].get(5).copied());
    let list = WindowList::new(parts.iter().map(|p| window(p)).collect());
    for kind in [WindowKind::Maintenance, WindowKind::Freeze] {
        let v = list.evaluate(kind, now);
        if let Some(next) = v.next_open {
            assert!(next > now, "next opening {next} is not after {now}");
        }
        if !v.open {
            assert_eq!(v.open_until, None, "closed with an end");
        }
        if let Some(until) = v.open_until {
            assert!(until > now, "open until {until}, not after {now}");
        }
        let _ = list.status(kind, now);
    }
    let _ = list.next_open(now);
}
