//! Any bytes through the whole document pipeline `holon validate` runs (parse under the
//! limits, kind, schema, typed model, the kind's rules), for every kind: never a panic.
#![no_main]

use holon::doc::Limits;
use holon::documents;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // The default limits, and small ones so that the limit paths are reached too.
    let _ = documents::check_str(text, &Limits::default());
    let _ = documents::check_str(text, &Limits { bytes_max: 4096, depth_max: 8, nodes_max: 200 });
});
