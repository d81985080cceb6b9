//! Fuzz target `go_duration`: see `fuzz/src/targets/go_duration.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kerf_fuzz::targets::go_duration::run(data));
