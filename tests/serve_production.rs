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

/// Raises this test process's descriptor limit to its hard limit (it holds thousands of
/// sockets); the server raises its own.
fn more_descriptors() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let _ = setrlimit(Resource::Nofile, Rlimit { current: limit.maximum, maximum: limit.maximum });
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// `n` connections to the server from `from` (a loopback address of its own), each having
/// sent `bytes` (a request cut short, or nothing).
async fn connections(url: &str, from: &str, n: usize, bytes: &[u8]) -> Vec<tokio::net::TcpStream> {
    use tokio::io::AsyncWriteExt;
    let server: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        let mut stream = socket.connect(server).await.unwrap();
        if !bytes.is_empty() {
            // A refused connection may be closed before this lands: that is its answer.
            let _ = stream.write_all(bytes).await;
        }
        out.push(stream);
    }
    out
}

/// What a connection reads until it closes (the server's answer, if any), within `seconds`.
async fn read_to_close(stream: &mut tokio::net::TcpStream, seconds: u64) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(seconds), stream.read_to_end(&mut out)).await;
    match read {
        Ok(_) => Some(out),
        Err(_) => None,
    }
}

/// 2,000 half-sent requests from one client (the usual slow-client attack: about 1,100
/// such requests kept the old server locked up for good): the ones past the per-address cap
/// are refused at once, the others closed when their headers take too long, and the
/// gateway's admit, from another address, is answered within 1 s all along.
#[test]
fn two_thousand_half_sent_requests_do_not_keep_an_admit_waiting() {
    more_descriptors();
    let s = Server::start_with_args(|_| {}, &["--header-read-timeout-ms", "2000"]);
    let rt = runtime();
    let half = b"POST /v1/admit HTTP/1.1\r\nHost: holon\r\nAuthorization: Bearer holon_";
    let mut slow = rt.block_on(connections(&s.url, "127.0.0.2", 2_000, half));
    let started = std::time::Instant::now();
    assert_eq!(admit_status(&s), 200);
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(1), "the admit took {took:?} with 2,000 half-sent requests open");
    // Every one of them is closed by the server: at once past the cap, or once its
    // headers are late (2 s here).
    let (mut refused, mut timed_out) = (0, 0);
    for stream in &mut slow {
        let answer = rt.block_on(read_to_close(stream, 60)).expect("the server closes every half-sent request");
        if answer.starts_with(b"HTTP/1.1 503") {
            refused += 1;
        } else {
            timed_out += 1;
        }
    }
    assert_eq!(refused, 2_000 - 256, "past the per-address cap of 256, refused at once with a 503");
    assert_eq!(timed_out, 256);
    let (_, metrics) = s.get("/metrics", Some(&s.gateway));
    assert!(metrics.contains("holon_connections_closed_total{reason=\"header_read_timeout\"} 256"), "{metrics}");
    assert!(metrics.contains("reason=\"connections_per_address_max\"} 1744"), "{metrics}");
    assert_eq!(admit_status(&s), 200);
}

/// Past `--connections-max` a new connection is refused at once (a 503, then closed),
/// never queued, while a connection the gateway already holds is still answered; an idle
/// connection closes after `--idle-timeout-ms`, which makes room again.
#[test]
fn past_the_cap_connections_are_refused_at_once_and_idle_ones_close() {
    more_descriptors();
    let s = Server::start_with_args(
        |_| {},
        &["--connections-max", "40", "--connections-per-address-max", "1000", "--idle-timeout-ms", "3000"],
    );
    let rt = runtime();
    // The gateway's pooled connection, opened first and kept alive by its requests.
    assert_eq!(admit_status(&s), 200);
    let mut idle = Vec::new();
    for from in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        idle.extend(rt.block_on(connections(&s.url, from, 20, b"")));
    }
    assert_eq!(admit_status(&s), 200, "the connection the gateway holds is still answered");
    // 39 places were left: the rest of the 60 were refused at once.
    let mut refused = 0;
    for stream in idle.iter_mut().skip(39) {
        let answer = rt.block_on(read_to_close(stream, 60)).expect("a refused connection is closed at once");
        assert!(answer.starts_with(b"HTTP/1.1 503"), "{}", String::from_utf8_lossy(&answer));
        refused += 1;
    }
    assert_eq!(refused, 21);
    // The 39 held idle are closed by the server once idle for 3 s (waited for, not timed).
    for stream in idle.iter_mut().take(39) {
        let answer = rt.block_on(read_to_close(stream, 60)).expect("an idle connection is closed");
        assert!(answer.is_empty(), "an idle connection gets no answer: {}", String::from_utf8_lossy(&answer));
    }
    let (_, metrics) = s.get("/metrics", Some(&s.gateway));
    assert!(metrics.contains("holon_connections_refused_total{reason=\"connections_max\"} 21"), "{metrics}");
    assert!(
        metrics.lines().any(|l| l.starts_with("holon_connections_closed_total{reason=\"idle_timeout\"}")),
        "{metrics}"
    );
}

/// Start-up errors say what to give and start nothing: a `--listen` without a port no
/// longer logs `stopped open=0` for a server that never started, and a missing documents
/// directory is not reported `at /`. A log piped elsewhere has no colour escapes.
#[test]
fn start_up_errors_say_what_to_give_and_a_piped_log_has_no_colour() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let holon = env!("CARGO_BIN_EXE_holon");
    assert!(
        std::process::Command::new(holon)
            .args(["token", "new", "--role", "gateway", "--tokens"])
            .arg(&tokens)
            .output()
            .unwrap()
            .status
            .success()
    );
    let serve = |args: &[&str]| {
        let out = std::process::Command::new(holon)
            .args(["serve", "--store", "memory", "--tokens"])
            .arg(&tokens)
            .args(args)
            .env_remove("NO_COLOR")
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = serve(&["--documents", "examples", "--listen", "0.0.0.0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--listen 0.0.0.0") && err.contains("HOST:PORT"), "{err}");
    assert!(!err.contains("stopped"), "nothing started, so nothing stopped: {err}");
    let (code, err) = serve(&["--documents", "nowhere"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("nowhere: no such directory: give --documents") && !err.contains(" at /"), "{err}");
    assert!(!err.contains('\u{1b}'), "a piped log has no colour escapes: {err:?}");
    // A server that starts, its log piped: no escapes either.
    let mut child = std::process::Command::new(holon)
        .args(["serve", "--store", "memory", "--listen", "127.0.0.1:0", "--documents", "examples", "--tokens"])
        .arg(&tokens)
        .env_remove("NO_COLOR")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    assert!(line.contains("listening on"), "{line}");
    let _ = std::process::Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("serving") && !log.contains('\u{1b}'), "{log:?}");
}

/// A refused reload with no trust files configured publishes nothing: the generation
/// stays (it was bumped, with a warning that keys and revocations were applied).
#[test]
fn a_refused_reload_without_trust_files_leaves_the_generation_alone() {
    let s = Server::start();
    let before = status(&s)["generation"].as_u64().unwrap();
    std::fs::write(s.docs().join("zz-junk.yaml"), "junk: 1\n").unwrap();
    let after = wait_for(60, || Some(status(&s)).filter(|v| !v["last_reload_error"].is_null()));
    assert_eq!(after["generation"].as_u64(), Some(before), "{after}");
    assert_eq!(after["reload_failures"], 1, "{after}");
}

/// The server follows the one rule for records too: with crossed records each agent is
/// judged on its own (fx-convert, measured at 0.99, passes alice's `min_success_rate`).
#[test]
fn the_server_judges_each_agent_on_its_own_record_when_records_are_crossed() {
    let s = Server::start_with(common::cross_records);
    let body = json!({ "mandate": MANDATE, "agent": "holon-labs/fx-convert" });
    let (status, answer) = s.post("/v1/admit", &s.gateway, body);
    assert_eq!((status, answer["decision"].as_str()), (200, Some("allowed")), "{answer}");
}
