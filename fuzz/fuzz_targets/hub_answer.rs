//! Fuzz target `hub_answer`: see `fuzz/src/targets/hub_answer.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kerf_fuzz::targets::hub_answer::run(data));
