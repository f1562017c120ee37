//! Any text as a command line: the shell analysis never panics, and the rule it would
//! learn from each segment parses and allows that segment again (a learned rule always
//! re-matches what it was learned from: quoting and pinned arguments round-trip).
#![no_main]

use holon::job::call::Aspect;
use holon::job::mandate::CommandMatcher;
use holon::job::shell;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else { return };
    for seg in shell::parse(line) {
        let (rule, aspect) = match seg.command {
            Some(c) => (c.rule(), Aspect::Command(c)),
            None => (format!("={}", seg.text), Aspect::Opaque(seg.text)),
        };
        let matcher = CommandMatcher::parse(&rule).unwrap_or_else(|e| panic!("the learned rule {rule:?} does not parse: {e}"));
        assert!(matcher.allows(&aspect), "the learned rule {rule:?} does not allow {aspect:?}");
    }
});
