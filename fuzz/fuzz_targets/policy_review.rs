//! Fuzz target `policy_review`: see `fuzz/src/targets/policy_review.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kerf_fuzz::targets::policy_review::run(data));
