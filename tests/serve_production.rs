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
    let s = Server::start();
    let rt = runtime();
    let half = b"POST /v1/admit HTTP/1.1\r\nHost: holon\r\nAuthorization: Bearer holon_";
    let mut slow = rt.block_on(connections(&s.url, "127.0.0.2", 2_000, half));
    let started = std::time::Instant::now();
    assert_eq!(admit_status(&s), 200);
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(1), "the admit took {took:?} with 2,000 half-sent requests open");
    // Every one of them is closed by the server: at once past the cap, or once its
    // headers are late (5 s, the default).
    let (mut refused, mut timed_out) = (0, 0);
    for stream in &mut slow {
        let answer = rt.block_on(read_to_close(stream, 60)).expect("the server closes every half-sent request");
        if answer.starts_with(b"HTTP/1.1 503") {
            refused += 1;
        } else {
            timed_out += 1;
        }
    }
    // How many were refused depends on how fast they were opened (a slot freed by a
    // header timeout takes a later one): some were, the cap's worth at least timed out,
    // and the metrics count each as it was.
    assert!(refused >= 1 && timed_out >= 256, "refused {refused}, timed out {timed_out}");
    let (_, metrics) = s.get("/metrics", Some(&s.gateway));
    assert!(
        metrics.contains(&format!("holon_connections_closed_total{{reason=\"header_read_timeout\"}} {timed_out}\n")),
        "{metrics}"
    );
    assert!(metrics.contains(&format!("reason=\"connections_per_address_max\"}} {refused}\n")), "{metrics}");
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
        &["--connections-max", "40", "--connections-per-address-max", "1000", "--idle-timeout-ms", "10000"],
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
    // The 39 held idle are closed by the server once idle for 10 s (waited for, not timed;
    // 10 s so that opening the 60 cannot outlast it on a slow machine).
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
    assert!(
        err.contains("nowhere: no such directory: give the directory that holds") && !err.contains(" at /"),
        "{err}"
    );
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

/// A tokens file with one gateway token, in a directory removed when the first is dropped.
fn gateway_tokens() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let made = std::process::Command::new(env!("CARGO_BIN_EXE_holon"))
        .args(["token", "new", "--role", "gateway", "--tokens"])
        .arg(&tokens)
        .output();
    assert!(made.unwrap().status.success());
    (dir, tokens)
}

/// A signal sent the moment the server says where it listens is handled, never the
/// signal's default action: SIGHUP reloads (the server keeps serving) and SIGTERM shuts it
/// down in order (exit 0, "shutting down" logged). Before, the handlers were installed
/// after the line (SIGHUP after the file watcher, SIGTERM in a task not yet run), and a
/// loaded CI machine saw a server killed by SIGTERM with an empty log.
#[test]
fn signals_sent_as_soon_as_the_port_is_printed_are_handled() {
    let (_dir, tokens) = gateway_tokens();
    let holon = env!("CARGO_BIN_EXE_holon");
    for round in 0..10 {
        let mut child = std::process::Command::new(holon)
            .args(["serve", "--store", "memory", "--listen", "127.0.0.1:0", "--documents", "examples", "--tokens"])
            .arg(&tokens)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        assert!(line.contains("listening on"), "{line}");
        let signal = |name: &str| std::process::Command::new("kill").arg(name).arg(child.id().to_string()).status();
        signal("-HUP").unwrap();
        let url = line.trim().rsplit(' ').next().unwrap().to_owned();
        let ready = ureq::get(format!("{url}/healthz")).call().map(|r| r.status().as_u16());
        assert_eq!(ready.ok(), Some(200), "round {round}: the server answers after SIGHUP");
        signal("-TERM").unwrap();
        let out = child.wait_with_output().unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "round {round}: {log}");
        assert!(log.contains("shutting down"), "round {round}: {log}");
    }
}

/// `--no-color` turns the log's colour off on a terminal too (only `NO_COLOR` did): the
/// server runs on a pseudo-terminal (util-linux's `script`), once without the flag (its log
/// is coloured there, so this test sees escapes when they are written) and once with it.
#[test]
fn no_color_turns_the_logs_colour_off_on_a_terminal() {
    let (_dir, tokens) = gateway_tokens();
    let holon = env!("CARGO_BIN_EXE_holon");
    let examples = std::fs::canonicalize("examples").unwrap();
    // The log's "serving" line as the terminal showed it.
    let serving_line = |flag: &str| {
        let command = format!(
            "env -u NO_COLOR '{holon}' {flag} serve --store memory --listen 127.0.0.1:0 --documents '{}' --tokens '{}'",
            examples.display(),
            tokens.display()
        );
        let mut child = std::process::Command::new("script")
            .args(["-qfec", &command, "/dev/null"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("util-linux's `script` runs the server on a pseudo-terminal");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
                if line.contains("serving") {
                    let _ = tx.send(line);
                    return;
                }
            }
        });
        let line = rx.recv_timeout(std::time::Duration::from_secs(120)).expect("the server logged `serving`");
        // `script` takes its session, the server included, down with it.
        let _ = std::process::Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        let _ = child.wait();
        line
    };
    let coloured = serving_line("");
    assert!(coloured.contains('\u{1b}'), "a log on a terminal is coloured: {coloured:?}");
    let plain = serving_line("--no-color");
    assert!(!plain.contains('\u{1b}'), "--no-color: {plain:?}");
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

/// The reason of `code` in a decision (HTTP answer or `mandate check --json` entry).
fn reason(decision: &Value, code: &str) -> String {
    decision["reasons"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["code"] == code))
        .and_then(|r| r["message"].as_str())
        .unwrap_or_else(|| panic!("no {code} reason in {decision}"))
        .to_owned()
}

/// `holon mandate check --json` on the server's documents, for one agent.
fn mandate_check(s: &Server, agent_dir: &str, args: &[&str]) -> Value {
    let docs = s.docs();
    let mandate = docs.join("mandates/alice-root.yaml");
    let mut all = vec!["mandate", "check", "--json", mandate.to_str().unwrap()];
    let agent = docs.join(agent_dir);
    all.push(agent.to_str().unwrap());
    all.extend_from_slice(args);
    let (_, out, err) = common::holon(&all);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    v["results"][0].clone()
}

/// The server's sentences are the engine's explanation of the live decision: a
/// `per_day_exceeded` denial names the spend the decision read (it said "spent today 0"),
/// and a `max_cost_below_price` one the agent's price converted into the mandate's currency
/// (it printed the USD price labelled EUR): the same words as `holon mandate check` with
/// the same spend.
#[test]
fn the_servers_sentences_name_the_same_figures_as_mandate_check() {
    let s = Server::start_with(|docs| {
        let path = docs.join("mandates/alice-root.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("per_day: \"20.00\"", "per_day: \"0.010\"")).unwrap();
    });
    // max_cost_below_price: page-reader's ceiling is USD 0.10, 0.092 EUR at alice's rate.
    let body = json!({ "mandate": MANDATE, "agent": "holon-labs/page-reader", "max_cost": "0.05" });
    let (_, http) = s.post("/v1/admit", &s.gateway, body);
    let cli = mandate_check(&s, "agents/page-reader", &["--max-cost", "0.05"]);
    let sentence = reason(&http, "max_cost_below_price");
    assert!(sentence.contains("0.092 EUR"), "{sentence}");
    assert_eq!(sentence, reason(&cli, "max_cost_below_price"));
    // per_day_exceeded: 0.008 spent today, then a call of 0.004 against 0.010 a day.
    for _ in 0..8 {
        let body = json!({ "mandate": MANDATE, "agent": "holon-labs/fx-convert" });
        let allowed = wait_for(60, || {
            let (_, a) = s.post("/v1/admit", &s.gateway, body.clone());
            a["reservation"].as_str().map(str::to_owned)
        });
        let (status, _) =
            s.post(&format!("/v1/reservations/{allowed}/settle"), &s.gateway, json!({ "actual": "0.001" }));
        assert_eq!(status, 200);
    }
    let body = json!({ "mandate": MANDATE, "agent": "acme/table-extract" });
    let denied = wait_for(60, || {
        let (_, a) = s.post("/v1/admit", &s.gateway, body.clone());
        (a["codes"] == json!(["per_day_exceeded"])).then_some(a)
    });
    let cli = mandate_check(&s, "agents/table-extract", &["--spent-today", "0.008", "--spent-total", "0.008"]);
    let sentence = reason(&denied, "per_day_exceeded");
    assert!(sentence.contains("spent today 0.008 EUR"), "{sentence}");
    assert_eq!(sentence, reason(&cli, "per_day_exceeded"));
}

/// A settlement above the reservation bills what was kept (it answered `"billed":"5.00"` on
/// a 0.001 reservation while keeping 0.001): `clamped` says so, `actual` is reported apart,
/// and a metric counts it. A second settle is a 409 (it was a 404, "no such reservation").
#[test]
fn a_settlement_above_its_reservation_is_billed_at_it_and_flagged() {
    let s = Server::start();
    let body = json!({ "mandate": MANDATE, "agent": "holon-labs/fx-convert" });
    let id =
        wait_for(60, || s.post("/v1/admit", &s.gateway, body.clone()).1["reservation"].as_str().map(str::to_owned));
    let (status, settled) = s.post(&format!("/v1/reservations/{id}/settle"), &s.gateway, json!({ "actual": "5.00" }));
    assert_eq!(status, 200, "{settled}");
    assert_eq!(
        (&settled["worst_case"], &settled["kept"], &settled["billed"], &settled["actual"], &settled["clamped"]),
        (&json!("0.001"), &json!("0.001"), &json!("0.001"), &json!("5.00"), &json!(true)),
        "{settled}"
    );
    let (status, again) = s.post(&format!("/v1/reservations/{id}/settle"), &s.gateway, json!({ "actual": "0" }));
    assert_eq!(status, 409, "{again}");
    assert!(again["error"].as_str().unwrap().contains("settled already"), "{again}");
    assert_eq!(s.post("/v1/reservations/12345/release", &s.gateway, json!({})).0, 404, "never made: 404");
    let (_, metrics) = s.get("/metrics", Some(&s.gateway));
    assert!(metrics.contains("holon_settlements_clamped_total 1\n"), "{metrics}");
}

/// The new user's trial, answer by answer: errors name the field at fault (a missing one,
/// or a body that is not an object), a denial for an unknown mandate has no empty currency,
/// an unencoded mandate id gets a hint, and the mandate's figures say whose they are.
#[test]
fn answers_name_their_field_their_currency_and_whose_figures_they_are() {
    let s = Server::start();
    for (body, field, words) in [
        (r#"{"mandate":"alice/m-2026-11"}"#, "/agent", "missing field"),
        (r#"{"agent":"acme/table-extract"}"#, "/mandate", "missing field"),
        (r#"[0]"#, "/", "must be a JSON object"),
        (r#""alice""#, "/", "must be a JSON object"),
    ] {
        let (status, answer) = s.post_raw("/v1/admit", Some(&s.gateway), body);
        assert_eq!((status, answer["field"].as_str()), (400, Some(field)), "{body}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(words), "{body}: {answer}");
    }
    let (status, answer) = s.post_raw("/v1/reservations/1/settle", Some(&s.gateway), "{}");
    assert_eq!((status, answer["field"].as_str()), (400, Some("/actual")), "{answer}");
    let body = json!({ "mandate": "nobody/m", "agent": "acme/table-extract" });
    let (_, unknown) = s.post("/v1/admit", &s.gateway, body);
    assert_eq!(unknown["codes"], json!(["unknown_mandate"]), "{unknown}");
    assert!(unknown.get("currency").is_none(), "no currency for a mandate it does not hold: {unknown}");
    let (status, hint) = s.get("/v1/mandates/alice/m-2026-11", Some(&s.gateway));
    assert_eq!(status, 404);
    assert!(hint.contains("/v1/mandates/alice%2Fm-2026-11"), "{hint}");
    let (status, m) = s.get("/v1/mandates/alice%2Fm-2026-11", Some(&s.gateway));
    assert_eq!(status, 200, "{m}");
    let m: Value = serde_json::from_str(&m).unwrap();
    assert_eq!(m["this_node"]["node"], "serve", "{m}");
    assert!(m["store"].get("spent").is_some() && m["store"]["read_at"].is_string(), "{m}");
    assert!(m.get("spent").is_none() && m.get("today").is_none(), "no figure without its owner: {m}");
}

/// `/metrics` serves what the scraper asks for: OpenMetrics to Prometheus's Accept header,
/// else the text format 0.0.4, whose counters are named by their samples (it served an
/// OpenMetrics body as `text/plain; version=0.0.4`, which 0.0.4 parsers read as counters
/// with no samples).
#[test]
fn metrics_are_negotiated_as_prometheus_does() {
    let s = Server::start();
    let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    let (status, kind, om) = s.get_with("/metrics", &s.gateway, &[("accept", prometheus)]);
    assert_eq!(status, 200);
    assert!(kind.starts_with("application/openmetrics-text; version=1.0.0"), "{kind}");
    assert!(om.ends_with("# EOF\n") && om.contains("# TYPE holon_reloads counter"), "{om}");
    let (_, kind, text) = s.get_with("/metrics", &s.gateway, &[]);
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    assert!(text.contains("# TYPE holon_reloads_total counter") && !text.contains("# EOF"), "{text}");
}

/// The count of held calls is right at once after a refusal (it showed 3 where 1 was right).
#[test]
fn the_held_count_is_right_at_once_after_a_refusal() {
    let s = Server::start();
    let body = json!({ "mandate": MANDATE, "agent": "holon-labs/invoice-pipeline", "max_cost": "0.60" });
    let held: Vec<String> = (0..3)
        .map(|_| {
            let (_, h) = s.post("/v1/admit", &s.gateway, body.clone());
            assert_eq!(h["decision"], "held", "{h}");
            h["pending"].as_str().unwrap().to_owned()
        })
        .collect();
    for id in held.iter().take(2) {
        let (status, refused) = s.post(&format!("/v1/pending/{id}/refuse"), &s.alice, json!({}));
        assert_eq!(status, 200, "{refused}");
    }
    assert_eq!(status(&s)["held"], 1);
    let (_, metrics) = s.get("/metrics", Some(&s.gateway));
    assert!(metrics.contains("holon_held_calls 1\n"), "{metrics}");
}

/// Shadow mode over HTTP: a call the rules deny is answered allowed, with the real decision
/// and its codes beside it; its settlement goes into the mandate's shadow tally, never its
/// budget; the server says it is shadowed in `/v1/status` and the metrics.
#[test]
fn a_shadowed_server_allows_what_it_would_deny_and_says_so() {
    let s = Server::start_with_args(|_| {}, &["--shadow"]);
    let body = json!({ "mandate": MANDATE, "agent": "holon-labs/invoice-pipeline" });
    let (_, answer) = s.post("/v1/admit", &s.gateway, body);
    assert_eq!(
        (&answer["decision"], &answer["shadow"], &answer["shadow_decision"], &answer["codes"]),
        (&json!("allowed"), &json!(true), &json!("denied"), &json!(["per_call_exceeded"])),
        "{answer}"
    );
    assert!(reason(&answer, "per_call_exceeded").contains("2.00"), "{answer}");
    let id = answer["reservation"].as_str().unwrap();
    let (code, settled) = s.post(&format!("/v1/reservations/{id}/settle"), &s.gateway, json!({ "actual": "0.05" }));
    assert_eq!((code, &settled["shadow"]), (200, &json!(true)), "{settled}");
    let (_, m) = s.get("/v1/mandates/alice%2Fm-2026-11", Some(&s.gateway));
    let m: Value = serde_json::from_str(&m).unwrap();
    assert_eq!((&m["shadow"]["settled"], &m["this_node"]["settled"]), (&json!("0.05"), &json!("0.00")), "{m}");
    assert_eq!(status(&s)["shadow"], true);
    let (_, metrics) = s.get("/metrics", Some(&s.gateway));
    assert!(metrics.contains("holon_shadow 1\n"), "{metrics}");
    assert!(
        metrics.contains("holon_shadow_decisions_total{decision=\"denied\",code=\"per_call_exceeded\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("holon_shadow_settled_micros{mandate=\"alice/m-2026-11\"} 50000\n"), "{metrics}");
    // An allowed call reserves and settles as usual.
    let body = json!({ "mandate": MANDATE, "agent": "holon-labs/fx-convert" });
    let real = wait_for(60, || {
        Some(s.post("/v1/admit", &s.gateway, body.clone()).1).filter(|a| a["shadow_decision"] == "allowed")
    });
    assert_eq!((&real["decision"], &real["codes"]), (&json!("allowed"), &json!([])), "{real}");
}

/// A refusal sent before the body was read (no token, a wrong role, a body too large, a
/// bad idempotency key) says `Connection: close`, as the server then closes the
/// connection: a client that pooled it sent its next request into a closed connection
/// ("peer disconnected", seen once in four runs of `serve_http`).
#[test]
fn a_refusal_before_the_body_is_read_closes_the_connection_and_says_so() {
    use std::io::{Read, Write};
    let s = Server::start();
    let address = s.url.trim_start_matches("http://").to_owned();
    let head = |extra: &str| {
        format!(
            "POST /v1/admit HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n{extra}\r\n"
        )
    };
    let gateway = format!("authorization: Bearer {}\r\n", s.gateway);
    let alice = format!("authorization: Bearer {}\r\n", s.alice);
    let bad_key = format!("{gateway}idempotency-key: a b\r\n");
    for (what, request) in [("no token", head("")), ("an account token", head(&alice)), ("a bad key", head(&bad_key))] {
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = Vec::new();
        // The server closes the connection after its answer: the read ends.
        let _ = stream.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer).to_lowercase();
        assert!(answer.starts_with("http/1.1 4"), "{what}: {answer}");
        assert!(answer.contains("\r\nconnection: close\r\n"), "{what}: {answer}");
    }
}

/// The wait for a permit (`--concurrent-max`) counts against `--request-ms`, as the
/// client sees it: with one permit held by a request whose body never comes, a second
/// request gets its 408 when its own time is up, not a whole `--request-ms` after the
/// first one's (before, the limit was timed from the permit: the two 408s came 4 s apart
/// here). Judged by when the two answers come against each other, not by the clock's
/// absolute figures, so a slow machine delays both alike.
#[test]
fn the_wait_for_a_permit_counts_against_the_request_time() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    const REQUEST_MS: u64 = 4_000;
    let s = Server::start_with_args(|_| {}, &["--concurrent-max", "1", "--request-ms", &REQUEST_MS.to_string()]);
    let address = s.url.trim_start_matches("http://").to_owned();
    // Headers promise 100 bytes of body; one is sent.
    let request = format!(
        "POST /v1/admit HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\
         authorization: Bearer {}\r\n\r\n{{",
        s.gateway
    );
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let (address, request) = (address.clone(), request.clone());
            std::thread::spawn(move || {
                let mut stream = std::net::TcpStream::connect(&address).unwrap();
                stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
                stream.write_all(request.as_bytes()).unwrap();
                let sent = Instant::now();
                let mut answer = Vec::new();
                let mut buffer = [0u8; 512];
                while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => answer.extend_from_slice(&buffer[..n]),
                    }
                }
                (String::from_utf8_lossy(&answer).into_owned(), sent, Instant::now())
            })
        })
        .collect();
    let answers: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let limit = Duration::from_millis(REQUEST_MS);
    for (answer, sent, answered) in &answers {
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        // Not before its own limit (the server times it from after the send).
        assert!(*answered - *sent >= limit - Duration::from_millis(50), "a 408 after {:?}", *answered - *sent);
    }
    // Both sent at once, so both answered at once; the old server answered the one that
    // waited a whole limit after the other.
    let apart = answers[0].2.max(answers[1].2) - answers[0].2.min(answers[1].2);
    let sent_apart = answers[0].1.max(answers[1].1) - answers[0].1.min(answers[1].1);
    assert!(apart < sent_apart + limit / 2, "the 408s came {apart:?} apart, sent {sent_apart:?} apart");
    assert_eq!(admit_status(&s), 200, "the permit is free again");
}
