//! `holon serve` for production gateways (issue #26), end to end on a real server process
//! and real clients over loopback: token withdrawal, and the rest of what a production
//! gateway meets.
#![cfg(feature = "serve")]

mod common;

use common::server::Server;
use serde_json::{Value, json};

const MANDATE: &str = "alice/m-2026-11";

/// Waits for `f` to say yes, for up to `seconds` (generous: a loaded machine is slow, and
/// the wait ends as soon as the event happens).
fn wait_for<T>(seconds: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "timed out after {seconds} s");
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
}

fn admit_status(s: &Server) -> u16 {
    let body = json!({ "mandate": MANDATE, "agent": "holon-labs/fx-convert" }).to_string();
    s.post_raw("/v1/admit", Some(&s.gateway), &body).0
}

fn status(s: &Server) -> Value {
    let (code, body) = s.get("/v1/status", Some(&s.gateway));
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Emptying the tokens file, or deleting it, withdraws every token (it was refused as a
/// bad reload, so the last tokens kept authenticating); a file that cannot be parsed keeps
/// the old tokens, and `/v1/status` says so; a broken document does not hold it up.
#[test]
fn emptying_or_deleting_the_tokens_file_withdraws_every_token_and_only_a_bad_file_keeps_them() {
    let s = Server::start();
    let tokens = s.dir.path().join("tokens");
    let original = std::fs::read_to_string(&tokens).unwrap();
    assert_eq!(admit_status(&s), 200);
    assert_eq!(status(&s)["tokens"], json!({ "accepted": 3, "file": "read", "error": null }));

    std::fs::write(&tokens, "this is not a token line\n").unwrap();
    let kept = wait_for(60, || Some(status(&s)).filter(|v| v["tokens"]["file"] == "kept_old"));
    assert_eq!(kept["tokens"]["accepted"], 3, "{kept}");
    assert!(kept["tokens"]["error"]["message"].as_str().unwrap().contains("line 1"), "{kept}");
    assert_eq!(admit_status(&s), 200, "the old tokens keep serving");

    // A broken document among the documents must not hold up the withdrawal.
    std::fs::write(s.docs().join("zz-junk.yaml"), "junk: 1\n").unwrap();
    std::fs::write(&tokens, "").unwrap();
    wait_for(60, || (admit_status(&s) == 401).then_some(()));
    assert_eq!(s.get("/v1/status", Some(&s.alice)).0, 401, "every token is withdrawn");

    std::fs::write(&tokens, &original).unwrap();
    wait_for(60, || (admit_status(&s) == 200).then_some(()));
    std::fs::remove_file(&tokens).unwrap();
    wait_for(60, || (admit_status(&s) == 401).then_some(()));

    std::fs::write(&tokens, &original).unwrap();
    let back = wait_for(60, || (admit_status(&s) == 200).then(|| status(&s)));
    assert_eq!(back["tokens"]["file"], "read", "{back}");
    let (_, metrics) = s.get("/metrics", Some(&s.gateway));
    let withdrawn = metrics
        .lines()
        .find_map(|l| l.strip_prefix("holon_tokens_withdrawn_total "))
        .and_then(|n| n.trim().parse::<u64>().ok());
    assert!(withdrawn.is_some_and(|n| n >= 2), "emptied and deleted, each counted: {metrics}");
}
