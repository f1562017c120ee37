//! The trust verbs as a user runs them: `holon key new`, `holon mandate sign | verify |
//! digest`, `validate --keys`, and `--revocations` on the deciding verbs.
#![cfg(feature = "cli")]

use std::path::Path;
use std::process::{Command, Output};

fn holon(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_holon")).args(args).output().unwrap()
}

fn code(out: &Output) -> i32 {
    out.status.code().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn a_new_key_is_private_and_never_written_over() {
    let dir = tempfile::tempdir().unwrap();
    let (key, keys) = (dir.path().join("alice.key"), dir.path().join("keys.yaml"));
    let out = holon(&["key", "new", "--account", "alice", "--out", p(&key), "--keys", p(&keys)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let first = std::fs::read(&key).unwrap();
    let out = holon(&["key", "new", "--account", "alice", "--out", p(&key), "--keys", p(&keys)]);
    assert_eq!(code(&out), 2);
    assert!(text(&out).contains("never written over"), "{}", text(&out));
    assert_eq!(std::fs::read(&key).unwrap(), first, "the old key is untouched");
    let listed = holon(&["validate", p(&keys)]);
    assert_eq!(code(&listed), 0, "{}", text(&listed));
    // A second account goes into the same keys file; a bad account changes nothing.
    let out = holon(&["key", "new", "--account", "bob", "--out", p(&dir.path().join("bob.key")), "--keys", p(&keys)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&keys).unwrap().matches("account:").count(), 2);
    let out = holon(&[
        "key",
        "new",
        "--account",
        "Not An Account",
        "--out",
        p(&dir.path().join("x.key")),
        "--keys",
        p(&keys),
    ]);
    assert_eq!(code(&out), 2);
    assert!(!dir.path().join("x.key").exists());
}

#[test]
fn sign_then_verify_and_tampering_fails_while_reformatting_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let (key, keys) = (dir.path().join("alice.key"), dir.path().join("keys.yaml"));
    assert_eq!(code(&holon(&["key", "new", "--account", "alice", "--out", p(&key), "--keys", p(&keys)])), 0);
    let signed = dir.path().join("root.yaml");
    let out = holon(&["mandate", "sign", "examples/mandates/alice-root.yaml", "--key", p(&key), "--out", p(&signed)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let body = std::fs::read_to_string(&signed).unwrap();
    assert!(body.starts_with("# yaml-language-server"), "the comments are kept");
    let verify = |file: &Path| holon(&["mandate", "verify", p(file), "--keys", p(&keys)]);
    assert_eq!(code(&verify(&signed)), 0, "{}", text(&verify(&signed)));
    // Reformatted: comments gone, blank lines, other quoting.
    let reformatted = dir.path().join("reformatted.yaml");
    let plain: String = body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.replace("total: \"100.00\"", "total: '100.00'"))
        .collect::<Vec<_>>()
        .join("\n\n");
    std::fs::write(&reformatted, plain).unwrap();
    assert_eq!(code(&verify(&reformatted)), 0, "{}", text(&verify(&reformatted)));
    // Tampered: one figure.
    let tampered = dir.path().join("tampered.yaml");
    std::fs::write(&tampered, body.replace("per_call: \"2.00\"", "per_call: \"20.00\"")).unwrap();
    let out = verify(&tampered);
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(text(&out).contains("does not match"), "{}", text(&out));
    // Unsigned: 1; unreadable: 2.
    assert_eq!(code(&verify(Path::new("examples/mandates/alice-root.yaml"))), 1);
    assert_eq!(code(&verify(&dir.path().join("missing.yaml"))), 2);
    // The digest ignores the signature block: signed and unsigned have the same.
    let digest = |file: &str| String::from_utf8(holon(&["mandate", "digest", file]).stdout).unwrap();
    assert_eq!(digest(p(&signed)), digest("examples/mandates/alice-root.yaml"));
    assert!(digest(p(&signed)).starts_with("sha256:"));
    // Signing again replaces the block (still one, still valid).
    let again = holon(&["mandate", "sign", p(&signed), "--key", p(&key)]);
    assert_eq!(code(&again), 0, "{}", text(&again));
    assert_eq!(String::from_utf8_lossy(&again.stdout).matches("signature:").count(), 1);
    // Only the issuer signs.
    let out = holon(&["mandate", "sign", "examples/mandates/alice-research.yaml", "--key", p(&key)]);
    assert_eq!(code(&out), 2);
    assert!(text(&out).contains("only the issuer signs"), "{}", text(&out));
}

#[test]
fn the_bundled_signed_chain_verifies_and_validate_keys_reports_what_would_be_refused() {
    let out = holon(&[
        "mandate",
        "verify",
        "examples/trust/research-2026-12.yaml",
        "--keys",
        "examples/trust/keys.yaml",
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["links"], 2);
    // Without its parent at hand the chain is broken.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy("examples/trust/research-2026-12.yaml", dir.path().join("research.yaml")).unwrap();
    let out = holon(&["mandate", "verify", p(&dir.path().join("research.yaml")), "--keys", "examples/trust/keys.yaml"]);
    assert_eq!(code(&out), 1);
    assert!(text(&out).contains("pass the parent's file too"), "{}", text(&out));
    // validate --keys: the signed chain passes; the unsigned mandates and the agents
    // without provenance are reported.
    let out = holon(&["validate", "examples", "--keys", "examples/trust/keys.yaml", "--json"]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = |name: &str| {
        v["files"].as_array().unwrap().iter().find(|f| f["path"].as_str().unwrap().ends_with(name)).unwrap().clone()
    };
    assert_eq!(file("trust/research-2026-12.yaml")["valid"], true);
    assert_eq!(file("trust/alice-m-2026-12.yaml")["valid"], true);
    assert_eq!(file("mandates/alice-root.yaml")["valid"], false);
    assert!(file("mandates/alice-root.yaml")["errors"][0]["message"].as_str().unwrap().contains("not signed"));
    assert!(file("table-extract/record.yaml")["errors"][0]["message"].as_str().unwrap().contains("provenance"));
}

#[test]
fn a_revocation_list_denies_the_revoked_mandate_and_its_children_on_every_deciding_verb() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("revoked.yaml");
    std::fs::write(
        &list,
        "holon_revocations: \"0.1\"\nrevoked:\n  - mandate: alice/m-2026-11\n    at: \"2026-11-20T10:00:00Z\"\n    reason: laptop stolen\n",
    )
    .unwrap();
    let at = "2026-11-20T10:00:00Z";
    let check = holon(&[
        "mandate",
        "check",
        "examples/mandates/alice-root.yaml",
        "examples/agents",
        "--at",
        at,
        "--revocations",
        p(&list),
        "--json",
    ]);
    assert_eq!(code(&check), 1, "{}", text(&check));
    // Every one of the seven agents is denied, each with the code.
    let body = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(body.matches("\"mandate_revoked\"").count() >= 7, "{body}");
    // The child names its parent by id: revoked with it.
    let child = holon(&[
        "mandate",
        "check",
        "examples/mandates/alice-research.yaml",
        "examples/agents",
        "--at",
        at,
        "--revocations",
        p(&list),
    ]);
    assert!(text(&child).contains("mandate_revoked"), "{}", text(&child));
    // A child naming its parent by digest, the list naming the parent by id: the parent is
    // found beside the child, so the child is revoked too.
    let list12 = dir.path().join("revoked-12.yaml");
    std::fs::write(&list12, "holon_revocations: \"0.1\"\nrevoked:\n  - mandate: alice/m-2026-12\n    at: \"2026-11-20T10:00:00Z\"\n    reason: x\n").unwrap();
    let by_digest = holon(&[
        "mandate",
        "check",
        "examples/trust/research-2026-12.yaml",
        "examples/agents",
        "--at",
        at,
        "--revocations",
        p(&list12),
    ]);
    assert!(text(&by_digest).contains("mandate_revoked"), "{}", text(&by_digest));
    // Without its parent at hand the question is open: bad input, not a pass.
    let alone = tempfile::tempdir().unwrap();
    std::fs::copy("examples/trust/research-2026-12.yaml", alone.path().join("child.yaml")).unwrap();
    let open = holon(&[
        "mandate",
        "check",
        p(&alone.path().join("child.yaml")),
        "examples/agents",
        "--at",
        at,
        "--revocations",
        p(&list12),
    ]);
    assert_eq!(code(&open), 2, "{}", text(&open));
    assert!(text(&open).contains("cannot tell whether"), "{}", text(&open));
    // The bundled list revokes a mandate the examples do not publish: nothing changes.
    let bundled = holon(&[
        "mandate",
        "check",
        "examples/mandates/alice-root.yaml",
        "examples/agents/fx-convert",
        "--at",
        at,
        "--revocations",
        "examples/trust/revocations.yaml",
    ]);
    assert_eq!(code(&bundled), 0, "{}", text(&bundled));
    let sim = holon(&[
        "mandate",
        "simulate",
        "examples/mandates/alice-root.yaml",
        "examples/worked-example/scenario.yaml",
        "--revocations",
        p(&list),
        "--json",
    ]);
    assert_eq!(code(&sim), 0, "{}", text(&sim));
    let v: serde_json::Value = serde_json::from_slice(&sim.stdout).unwrap();
    assert_eq!(v["billed"], "0.00", "{v}");
    assert!(v["receipts"].as_array().unwrap().iter().all(|r| r["decision"] == "denied"), "{v}");
    let search = holon(&[
        "search",
        "table",
        "--mandate",
        "examples/mandates/alice-root.yaml",
        "--agents",
        "examples/agents",
        "--at",
        at,
        "--revocations",
        p(&list),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&search.stdout).unwrap();
    assert_eq!(v["ranked"].as_array().unwrap().len(), 0, "{v}");
    // A list that is not one is bad input.
    let bad = holon(&[
        "mandate",
        "check",
        "examples/mandates/alice-root.yaml",
        "examples/agents",
        "--revocations",
        "examples/trust/keys.yaml",
    ]);
    assert_eq!(code(&bad), 2, "{}", text(&bad));
}

#[test]
fn records_sign_covers_the_whole_manifest_and_only_the_namespaces_key_signs() {
    let dir = tempfile::tempdir().unwrap();
    let (rec, man) = ("examples/agents/fx-convert/record.yaml", "examples/agents/fx-convert/holon.yaml");
    let signed = dir.path().join("record.yaml");
    let out = holon(&[
        "records",
        "sign",
        rec,
        "--manifest",
        man,
        "--key",
        "examples/trust/holon-labs.key",
        "--out",
        p(&signed),
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    // The signed record with its manifest passes validate --keys.
    let agent = dir.path().join("agent");
    std::fs::create_dir(&agent).unwrap();
    std::fs::copy(man, agent.join("holon.yaml")).unwrap();
    std::fs::copy(&signed, agent.join("record.yaml")).unwrap();
    let out = holon(&["validate", p(&agent), "--keys", "examples/trust/keys.yaml"]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    // Any edit of the manifest (here its price) breaks it.
    let manifest = std::fs::read_to_string(man).unwrap();
    let changed = manifest.replace("0.001", "0.0001");
    assert_ne!(changed, manifest, "the test edits the price");
    std::fs::write(agent.join("holon.yaml"), changed).unwrap();
    let out = holon(&["validate", p(&agent), "--keys", "examples/trust/keys.yaml"]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(text(&out).contains("does not match"), "{}", text(&out));
    // Another namespace's key, or another agent's manifest: refused.
    let out = holon(&["records", "sign", rec, "--manifest", man, "--key", "examples/trust/alice.key"]);
    assert_eq!(code(&out), 2);
    assert!(text(&out).contains("only the account `holon-labs`"), "{}", text(&out));
    let out = holon(&[
        "records",
        "sign",
        rec,
        "--manifest",
        "examples/agents/table-extract/holon.yaml",
        "--key",
        "examples/trust/holon-labs.key",
    ]);
    assert_eq!(code(&out), 2, "{}", text(&out));
}

#[test]
fn check_with_keys_decides_as_an_engine_that_requires_signatures() {
    let args = |keys: bool| {
        let mut a = vec![
            "mandate",
            "check",
            "examples/mandates/alice-root.yaml",
            "examples/agents/fx-convert",
            "examples/agents/table-extract",
            "--at",
            "2026-11-20T10:00:00Z",
        ];
        if keys {
            a.extend(["--keys", "examples/trust/keys.yaml"]);
        }
        holon(&a)
    };
    assert!(!text(&args(false)).contains("provenance_unverified"));
    let out = text(&args(true));
    // fx-convert's record carries its publisher's signature; table-extract's does not.
    assert_eq!(out.matches("provenance_unverified").count(), 1, "{out}");
    assert!(out.contains("table-extract"), "{out}");
}

#[cfg(unix)]
#[test]
fn key_new_refuses_a_keys_file_that_is_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.yaml");
    std::fs::write(&real, "holon_keys: \"0.1\"\nkeys: []\n").unwrap();
    std::os::unix::fs::symlink(&real, dir.path().join("link.yaml")).unwrap();
    let out = holon(&[
        "key",
        "new",
        "--account",
        "alice",
        "--out",
        p(&dir.path().join("a.key")),
        "--keys",
        p(&dir.path().join("link.yaml")),
    ]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert!(text(&out).contains("symbolic link"), "{}", text(&out));
    assert!(!dir.path().join("a.key").exists(), "nothing written");
}
