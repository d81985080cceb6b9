//! Fuzz target `policy`: see `fuzz/src/targets/policy.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kerf_fuzz::targets::policy::run(data));
