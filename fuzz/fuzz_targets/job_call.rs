//! Any bytes as one tool call of `holon job check`: the call parser (JSON, hook payloads,
//! the shell analysis of commands) and the compiled checker of a fixed job mandate
//! (`testdata/job/expected.yaml`): never a panic.
#![no_main]

use std::sync::LazyLock;

use holon::job::call;
use holon::job::mandate::{self, Checker};
use libfuzzer_sys::fuzz_target;

static CHECKER: LazyLock<Checker> = LazyLock::new(|| {
    let m = mandate::from_yaml(include_str!("../../testdata/job/expected.yaml")).expect("the fixed job mandate");
    Checker::compile(&m).expect("it compiles")
});

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(c) = call::parse(text) {
        let _ = CHECKER.failures(&c);
    }
});
