//! Bad input of any kind gets a clear error and never a panic.

use holon::doc::{self, DocError, Limits};
use holon::documents;
use proptest::prelude::*;

fn check(text: &str) -> Result<documents::Checked, DocError> {
    documents::check_str(text, &Limits::default())
}

#[test]
fn billion_laughs_is_refused_before_expansion() {
    let mut text = String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    for i in 1..10 {
        let prev = (b'a' + i - 1) as char;
        let name = (b'a' + i) as char;
        text.push_str(&format!(
            "{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
        ));
    }
    assert!(matches!(check(&text), Err(DocError::Anchor { line: 1 })));
}

#[test]
fn deep_nesting_is_refused() {
    // holon's own refusal, not whichever error the parser happens to hit first.
    let text = format!("holon: {}{}", "[".repeat(10_000), "]".repeat(10_000));
    assert!(matches!(check(&text), Err(DocError::TooDeep { .. })), "{:?}", check(&text).err());
    let text = "a:\n".to_owned() + &(1..200).map(|i| format!("{}b{i}:\n", "  ".repeat(i))).collect::<String>();
    assert!(matches!(check(&text), Err(DocError::TooDeep { .. })), "{:?}", check(&text).err());
}

#[test]
fn oversized_files_are_refused() {
    let text = format!("holon: \"0.1\"\ndescription: \"{}\"\n", "x".repeat(2 << 20));
    assert!(matches!(check(&text), Err(DocError::TooLarge { .. })));
}

#[test]
fn duplicate_keys_and_unknown_documents() {
    assert!(
        matches!(check("holon_mandate: \"0.1\"\nid: a\nid: b\n"), Err(DocError::DuplicateKey { ref key, line: Some(3) }) if key == "id"),
        "{:?}",
        check("holon_mandate: \"0.1\"\nid: a\nid: b\n").err()
    );
    assert!(matches!(check("kind: Pod\n"), Err(DocError::UnknownKind)));
    assert!(matches!(check("- 1\n- 2\n"), Err(DocError::UnknownKind)));
    assert!(matches!(check("holon: \"0.1\"\nholon_mandate: \"0.1\"\n"), Err(DocError::UnknownKind)));
    assert!(check("").is_err());
}

#[test]
fn wrong_types_are_violations_not_crashes() {
    for text in [
        "holon_mandate: \"0.1\"\nid: 5\nissuer: [1]\ngrantee: {a: 1}\nvalid: x\nbudget: 3\nallow: null\n",
        "holon: 0.1\n",
        "holon_record: \"0.1\"\nagent: a/b\nbenchmarks: [1, 2]\n",
    ] {
        let checked = check(text).unwrap();
        assert!(checked.result.is_err(), "{text}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Arbitrary text never panics the document layer.
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = check(&text);
    }

    /// Arbitrary YAML-ish structure under a known top key never panics either.
    #[test]
    fn yamlish_never_panics(
        key in prop::sample::select(vec!["holon", "holon_mandate", "holon_record"]),
        body in prop::collection::vec("[a-z_]{1,8}: (\"[0-9.]{0,8}\"|[0-9.e-]{1,8}|\\[\\]|\\{\\}|null|true|[a-z/*.]{1,10})", 0..12),
    ) {
        let text = format!("{key}: \"0.1\"\n{}\n", body.join("\n"));
        let _ = check(&text);
    }
}

/// Flow nesting is refused by a lexical scan before the YAML parser runs: the parser's
/// work grows faster than linearly with it (60,000 levels took about 110 s).
#[test]
fn deep_flow_nesting_is_refused_fast_with_our_error() {
    for text in [
        format!("holon: {}{}\n", "[".repeat(60_000), "]".repeat(60_000)),
        format!("holon: {}1{}\n", "{a: ".repeat(60_000), "}".repeat(60_000)),
        format!("holon: {}", "[".repeat(60_000)),
        format!("{}x\n", "- ".repeat(60_000)),
    ] {
        let started = std::time::Instant::now();
        let result = check(&text);
        let elapsed = started.elapsed();
        assert!(
            matches!(&result, Err(e @ DocError::TooDeep { depth_max: 64, .. }) if e.to_string().contains("line 1: nesting is deeper than 64 levels")),
            "{result:?}"
        );
        // A bound for blow-ups (generous: a loaded machine is slow, an exponential parse never ends).
        assert!(elapsed < std::time::Duration::from_secs(30), "took {elapsed:?}");
    }
}

/// The scan counts only real structure: brackets in quotes, comments, block scalars and
/// plain text do not make a document too deep.
#[test]
fn brackets_in_text_are_not_nesting() {
    let many = "[".repeat(100);
    for text in [
        format!("a: \"{many}\"\n"),
        format!("a: '{many}'\n"),
        format!("a: 'it''s {many}'\n"),
        format!("a: 1 # {many}\n"),
        format!("a: |\n  {many}\n  more\nb: 1\n"),
        format!("a: >-\n  {many}\nb: 1\n"),
        format!("a: see {many}\n"),
        format!("a: [\"{many}\", '{many}']\n"),
        format!("a: \"multi\n  line {many}\"\n"),
    ] {
        assert!(doc::yaml::parse(&text, &Limits::default()).is_ok(), "{text}");
    }
    // 64 levels are allowed, 65 are not.
    let ok = format!("a: {}1{}\n", "[".repeat(63), "]".repeat(63));
    assert!(doc::yaml::parse(&ok, &Limits::default()).is_ok());
    let deep = format!("a: {}1{}\n", "[".repeat(65), "]".repeat(65));
    assert!(matches!(doc::yaml::parse(&deep, &Limits::default()), Err(DocError::TooDeep { .. })));
}
