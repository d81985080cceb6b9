//! Fuzz target `quantity`: see `fuzz/src/targets/quantity.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kerf_fuzz::targets::quantity::run(data));
