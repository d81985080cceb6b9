//! A cron schedule compiled for search on wall times.
//!
//! croner walks a schedule field by field; a window asks for the latest and the next
//! firing around `now` on every evaluation, so the schedule is compiled once into bit
//! masks of the seconds, minutes, hours and months that fire, and searched a day at a time
//! (a month at a time through months that never fire). Whether a day fires is croner's own
//! answer (`CronPattern::day_match`, with its day-of-month / day-of-week rule), which
//! depends only on the length of the month, the day and its weekday: it is read once for
//! every such triple into a table. So the search finds the wall times croner's
//! `find_next_occurrence` and `find_previous_occurrence` find
//! (tests/window_schedule.rs compares them).

use chrono::{Datelike, Days, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use croner::{Cron, Weekday, YEAR_LOWER_LIMIT, YEAR_UPPER_LIMIT};

/// Days or months a search steps through before it gives up. A schedule fires at least
/// every 8 years (29 February), and a month that never fires is one step.
const MAX_STEPS: u32 = 20_000;

/// A cron schedule as masks of the values that fire.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// By month length (28 to 31 days), by day of the month: bit `w` when the day fires
    /// on weekday `w` (0 is Sunday), by croner's day-of-month and day-of-week rule.
    days: [[u8; 32]; 4],
    seconds: u64,
    minutes: u64,
    hours: u32,
    /// Bit `m` for month `m` (1 to 12).
    months: u16,
}

impl Schedule {
    /// Compiles a parsed schedule.
    pub fn new(cron: &Cron) -> Schedule {
        let p = &cron.pattern;
        let mask = |n: u32, hit: &dyn Fn(u32) -> bool| {
            (0..n).filter(|v| hit(*v)).fold(0u64, |m, v| m | (1 << v))
        };
        let seconds = mask(60, &|v| p.second_match(v).unwrap_or(false));
        let minutes = mask(60, &|v| p.minute_match(v).unwrap_or(false));
        let hours = mask(24, &|v| p.hour_match(v).unwrap_or(false));
        let months = mask(13, &|v| v > 0 && p.month_match(v).unwrap_or(false));
        // A month of each length: February 2001 and 2000, April and January 2000.
        let months_of_length = [(2001, 2), (2000, 2), (2000, 4), (2000, 1)];
        let mut days = [[0u8; 32]; 4];
        for (table, (year, month)) in days.iter_mut().zip(months_of_length) {
            for (day, bits) in table.iter_mut().enumerate().skip(1) {
                for w in 0..7u8 {
                    let weekday = Weekday::from_days_from_sunday(u32::from(w));
                    let day = u32::try_from(day).unwrap_or(0);
                    if p.day_match(year, month, day, weekday).unwrap_or(false) {
                        *bits |= 1 << w;
                    }
                }
            }
        }
        Schedule {
            days,
            seconds,
            minutes,
            hours: u32::try_from(hours).unwrap_or(0),
            months: u16::try_from(months).unwrap_or(0),
        }
    }

    /// The first wall time that fires at or after `from` (after it, if not `inclusive`),
    /// on a whole second; `None` if none does before the year 5000.
    pub fn next(&self, from: NaiveDateTime, inclusive: bool) -> Option<NaiveDateTime> {
        let mut at = from.with_nanosecond(0)?;
        if !inclusive {
            at = at.checked_add_signed(chrono::Duration::seconds(1))?;
        }
        let (mut date, mut second) = (at.date(), at.num_seconds_from_midnight());
        for _ in 0..MAX_STEPS {
            if !self.year_ok(date) {
                return None;
            }
            if !self.month_fires(date) {
                date = self.next_month_start(date)?;
                second = 0;
                continue;
            }
            if self.day_fires(date)
                && let Some(s) = self.first_second_from(second)
            {
                return Some(date.and_time(time_of(s)?));
            }
            date = date.checked_add_days(Days::new(1))?;
            second = 0;
        }
        None
    }

    /// The last wall time that fires at or before `from` (before it, if not `inclusive`),
    /// on a whole second; `None` if none does after the year 1.
    pub fn prev(&self, from: NaiveDateTime, inclusive: bool) -> Option<NaiveDateTime> {
        let mut at = from.with_nanosecond(0)?;
        if !inclusive {
            at = at.checked_sub_signed(chrono::Duration::seconds(1))?;
        }
        let (mut date, mut second) = (at.date(), at.num_seconds_from_midnight());
        for _ in 0..MAX_STEPS {
            if !self.year_ok(date) {
                return None;
            }
            if !self.month_fires(date) {
                date = self.prev_month_end(date)?;
                second = LAST_SECOND;
                continue;
            }
            if self.day_fires(date)
                && let Some(s) = self.last_second_to(second)
            {
                return Some(date.and_time(time_of(s)?));
            }
            date = date.pred_opt()?;
            second = LAST_SECOND;
        }
        None
    }

    fn year_ok(&self, date: NaiveDate) -> bool {
        (YEAR_LOWER_LIMIT..=YEAR_UPPER_LIMIT).contains(&date.year())
    }

    fn month_fires(&self, date: NaiveDate) -> bool {
        self.months & (1 << date.month()) != 0
    }

    /// The first day of the next month after `date`'s that fires (a later year's, if
    /// none does later this year).
    fn next_month_start(&self, date: NaiveDate) -> Option<NaiveDate> {
        let months = u64::from(self.months);
        let (year, month) = match next_bit(months, date.month() + 1) {
            Some(m) => (date.year(), m),
            None => (date.year() + 1, next_bit(months, 1)?),
        };
        NaiveDate::from_ymd_opt(year, month, 1)
    }

    /// The last day of the last month before `date`'s that fires (an earlier year's, if
    /// none does earlier this year).
    fn prev_month_end(&self, date: NaiveDate) -> Option<NaiveDate> {
        let months = u64::from(self.months) & !1; // bit 0 is no month
        let (year, month) = match prev_bit(months, date.month().checked_sub(1)) {
            Some(m) => (date.year(), m),
            None => (date.year() - 1, prev_bit(months, Some(12))?),
        };
        let first = NaiveDate::from_ymd_opt(year, month, 1)?;
        first.with_day(days_in_month(first))
    }

    fn day_fires(&self, date: NaiveDate) -> bool {
        let length = days_in_month(date).saturating_sub(28) as usize;
        let weekday = date.weekday().num_days_from_sunday();
        self.days
            .get(length)
            .and_then(|t| t.get(date.day() as usize))
            .is_some_and(|bits| bits & (1 << weekday) != 0)
    }

    /// The first second of the day at or after `from` that fires.
    fn first_second_from(&self, from: u32) -> Option<u32> {
        let (h, m, s) = (from / 3600, from / 60 % 60, from % 60);
        if bit(u64::from(self.hours), h) {
            if bit(self.minutes, m)
                && let Some(s) = next_bit(self.seconds, s)
            {
                return Some(h * 3600 + m * 60 + s);
            }
            if let Some(m) = next_bit(self.minutes, m + 1) {
                return Some(h * 3600 + m * 60 + next_bit(self.seconds, 0)?);
            }
        }
        let h = next_bit(u64::from(self.hours), h + 1)?;
        Some(h * 3600 + next_bit(self.minutes, 0)? * 60 + next_bit(self.seconds, 0)?)
    }

    /// The last second of the day at or before `to` that fires.
    fn last_second_to(&self, to: u32) -> Option<u32> {
        let (h, m, s) = (to / 3600, to / 60 % 60, to % 60);
        if bit(u64::from(self.hours), h) {
            if bit(self.minutes, m)
                && let Some(s) = prev_bit(self.seconds, Some(s))
            {
                return Some(h * 3600 + m * 60 + s);
            }
            if let Some(m) = prev_bit(self.minutes, m.checked_sub(1)) {
                return Some(h * 3600 + m * 60 + prev_bit(self.seconds, Some(59))?);
            }
        }
        let h = prev_bit(u64::from(self.hours), h.checked_sub(1))?;
        Some(h * 3600 + prev_bit(self.minutes, Some(59))? * 60 + prev_bit(self.seconds, Some(59))?)
    }
}

const LAST_SECOND: u32 = 86_399;

fn bit(mask: u64, i: u32) -> bool {
    i < 64 && mask & (1 << i) != 0
}

/// The lowest set bit at or above `from`.
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    let above = mask.checked_shr(from)?.checked_shl(from)?;
    (above != 0).then(|| above.trailing_zeros())
}

/// The highest set bit at or below `to` (`None`: below 0).
fn prev_bit(mask: u64, to: Option<u32>) -> Option<u32> {
    let to = to?;
    let below = if to >= 63 {
        mask
    } else {
        mask & ((1 << (to + 1)) - 1)
    };
    (below != 0).then(|| 63 - below.leading_zeros())
}

fn time_of(second: u32) -> Option<NaiveTime> {
    NaiveTime::from_num_seconds_from_midnight_opt(second, 0)
}

fn days_in_month(date: NaiveDate) -> u32 {
    match date.month() {
        2 if date.leap_year() => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}
