//! Any bytes through the simulation scenario reader (`holon mandate simulate`): never a
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = holon::scenario::parse_str(text, "fuzz");
});
