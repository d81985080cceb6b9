//! Fuzz target `admission_review`: see `fuzz/src/targets/admission_review.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kerf_fuzz::targets::admission_review::run(data));
