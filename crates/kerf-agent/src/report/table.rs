//! The report as a table for people, at most [`MAX_WIDTH`] columns wide. CPU is shown in
//! millicores below one core (`250m`) and in cores above (`2.5`); memory in MiB below one
//! GiB (`512Mi`), in GiB below one TiB (`1.5Gi`) and in TiB above, with at most two
//! decimals.

use std::fmt::Write as _;

use kerf_api::Resource;
use kerf_decide::duration::Rfc3339;

use super::{HeldBack, Report, ResourceTotals, Totals};

/// The widest line the table writes.
pub const MAX_WIDTH: usize = 120;

/// Widest namespace shown; a longer one is cut and ends with `~`.
const NAME_WIDTH: usize = 20;
/// Widest reason shown (the longest reason of the events contract fits).
const REASON_WIDTH: usize = 26;
/// Width of each amount column, its leading space included.
const AMOUNT_WIDTH: usize = 12;

const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * MIB;
const TIB: f64 = 1024.0 * GIB;

/// The whole report as text.
pub fn render(report: &Report) -> String {
    let at = Rfc3339(report.generated_at);
    let mut out = format!("Kerf savings report at {at}\n");
    out.push_str(
        "CPU in cores (m: millicores), memory in Mi/Gi, for all replicas. SAVINGS = REQUESTED - RECOMMENDED;\n\
         DOWN and UP split it into lowered and raised requests. APPLIED: moved by Kerf's live changes.\n\n",
    );
    let head = [
        "REQUESTED",
        "RECOMMENDED",
        "SAVINGS",
        "DOWN",
        "UP",
        "APPLIED",
        "HELD BACK",
    ];
    let _ = write!(out, "{:<NAME_WIDTH$}  {:>9}  RES", "NAMESPACE", "WORKLOADS");
    columns(&mut out, &head);
    for ns in &report.namespaces {
        totals_rows(&mut out, &cut(&ns.namespace, NAME_WIDTH), &ns.totals);
    }
    totals_rows(&mut out, "TOTAL", &report.cluster);
    held_back(&mut out, &report.cluster.held_back);
    if !report.problems.is_empty() {
        out.push_str("\nProblems (counted as absent):\n");
        for p in &report.problems {
            let _ = writeln!(out, "  {}", cut(p, MAX_WIDTH - 2));
        }
    }
    out
}

fn columns(out: &mut String, cells: &[&str]) {
    for c in cells {
        let _ = write!(out, "{c:>AMOUNT_WIDTH$}");
    }
    out.push('\n');
}

fn totals_rows(out: &mut String, name: &str, t: &Totals) {
    let count = format!("{}/{}", t.recommended_workloads, t.workloads);
    for (i, r) in Resource::ALL.into_iter().enumerate() {
        let (name, count) = if i == 0 {
            (name, count.as_str())
        } else {
            ("", "")
        };
        let _ = write!(out, "{name:<NAME_WIDTH$}  {count:>9}  {}", short(r));
        let a = match r {
            Resource::Cpu => &t.cpu,
            Resource::Memory => &t.memory,
        };
        let cells = amount_cells(r, a);
        columns(out, &cells.iter().map(String::as_str).collect::<Vec<_>>());
    }
}

fn short(r: Resource) -> &'static str {
    match r {
        Resource::Cpu => "cpu",
        Resource::Memory => "mem",
    }
}

fn held_back(out: &mut String, held: &[HeldBack]) {
    out.push_str("\nHELD BACK BY REASON (cluster)\n");
    if held.is_empty() {
        out.push_str("  nothing: every recommendation is in effect\n");
        return;
    }
    let _ = write!(out, "{:<REASON_WIDTH$}  {:>9}  RES", "REASON", "WORKLOADS");
    columns(out, &["SAVINGS", "DOWN", "UP"]);
    for h in held {
        for (i, r) in Resource::ALL.into_iter().enumerate() {
            let reason = if i == 0 {
                cut(&h.reason, REASON_WIDTH)
            } else {
                String::new()
            };
            let count = if i == 0 {
                h.workloads.to_string()
            } else {
                String::new()
            };
            let _ = write!(out, "{reason:<REASON_WIDTH$}  {count:>9}  {}", short(r));
            let s = match r {
                Resource::Cpu => h.cpu,
                Resource::Memory => h.memory,
            };
            let cells = [fmt(r, s.net), fmt(r, s.decrease), fmt(r, s.increase)];
            columns(out, &cells.iter().map(String::as_str).collect::<Vec<_>>());
        }
    }
}

/// `s` cut to `width` characters, the last one `~` when something was cut.
fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_owned();
    }
    let mut kept: String = s.chars().take(width.saturating_sub(1)).collect();
    kept.push('~');
    kept
}

/// An amount as the table shows it: CPU millicores as `250m` or `2.5` (cores), memory
/// bytes as `512Mi` or `1.5Gi`; zero as `0`; negative amounts start with `-`.
pub fn fmt(r: Resource, value: i64) -> String {
    if value == 0 {
        return "0".to_owned();
    }
    let sign = if value < 0 { "-" } else { "" };
    let abs = value.unsigned_abs();
    let text = match r {
        Resource::Cpu if abs < 1000 => format!("{abs}m"),
        Resource::Cpu => decimals(abs as f64 / 1000.0, ""),
        Resource::Memory if (abs as f64) < GIB => format!("{}Mi", (abs as f64 / MIB).round()),
        Resource::Memory if (abs as f64) < TIB => decimals(abs as f64 / GIB, "Gi"),
        Resource::Memory => decimals(abs as f64 / TIB, "Ti"),
    };
    format!("{sign}{text}")
}

/// `v` with at most two decimals, trailing zeros dropped, then `unit`; without decimals
/// when they would make the cell wider than its column.
fn decimals(v: f64, unit: &str) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    let text = format!("{s}{unit}");
    if text.len() < AMOUNT_WIDTH - 1 {
        text
    } else {
        format!("{v:.0}{unit}")
    }
}

/// The seven amount cells of a totals row.
pub fn amount_cells(r: Resource, a: &ResourceTotals) -> [String; 7] {
    [
        fmt(r, a.requested),
        fmt(r, a.recommended),
        fmt(r, a.savings.net),
        fmt(r, a.savings.decrease),
        fmt(r, a.savings.increase),
        fmt(r, a.applied.net),
        fmt(r, a.held_back.net),
    ]
}
