//! Fuzz target `cron_window`: see `fuzz/src/targets/cron_window.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kerf_fuzz::targets::cron_window::run(data));
