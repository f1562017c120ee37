//! A real `holon serve` process on a loopback port, on a copy of the bundled examples, with
//! a gateway token and an account token for alice and one for bob; a real HTTP client.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

pub(crate) struct Server {
    child: Option<Child>,
    pub url: String,
    /// Envoy ext_authz over gRPC: `http://127.0.0.1:PORT`.
    pub grpc: String,
    pub dir: tempfile::TempDir,
    pub gateway: String,
    pub alice: String,
    pub bob: String,
    agent: ureq::Agent,
    docs: PathBuf,
    pub tokens: PathBuf,
    /// The store's URL and this server's node name in it.
    pub store: String,
    pub node: String,
}

/// What a server is started on.
struct Launch {
    docs: PathBuf,
    tokens: PathBuf,
    store: String,
    node: String,
    tokens_of: (String, String, String),
}

fn holon() -> Command {
    Command::new(env!("CARGO_BIN_EXE_holon"))
}

fn new_token(role: &str, tokens: &Path) -> String {
    let out = holon().args(["token", "new", "--role", role, "--tokens"]).arg(tokens).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

impl Server {
    /// Starts a server on a copy of `examples/` (edit it under `self.docs()`).
    pub(crate) fn start() -> Server {
        Server::start_with(|_| {})
    }

    /// Starts a server after `edit` changed the copy of the examples.
    pub(crate) fn start_with(edit: impl FnOnce(&Path)) -> Server {
        Server::start_with_args(edit, &[])
    }

    /// Starts a server after `edit`, with `args` added to `holon serve`'s.
    pub(crate) fn start_with_args(edit: impl FnOnce(&Path), args: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let docs = dir.path().join("docs");
        super::copy_tree(Path::new("examples"), &docs);
        edit(&docs);
        let tokens = dir.path().join("tokens");
        let (gateway, alice, bob) =
            (new_token("gateway", &tokens), new_token("account:alice", &tokens), new_token("account:bob", &tokens));
        let store = format!("sqlite:{}", dir.path().join("ledger.db").display());
        let launch = Launch { docs, tokens, store, node: "serve".to_owned(), tokens_of: (gateway, alice, bob) };
        Server::launch(dir, launch, args)
    }

    /// Another server (another node, `node`) on the same documents, tokens and store as
    /// `other`, with `args`; its receipts in a directory of its own.
    pub(crate) fn start_beside(other: &Server, node: &str, args: &[&str]) -> Server {
        let launch = Launch {
            docs: other.docs.clone(),
            tokens: other.tokens.clone(),
            store: other.store.clone(),
            node: node.to_owned(),
            tokens_of: (other.gateway.clone(), other.alice.clone(), other.bob.clone()),
        };
        Server::launch(tempfile::tempdir().unwrap(), launch, args)
    }

    /// The same server started again (a restart) on the same documents, tokens, store and
    /// node name, once this one has stopped.
    pub(crate) fn restart(mut self, args: &[&str]) -> Server {
        assert!(self.stop(), "a clean stop before the restart");
        let launch = Launch {
            docs: self.docs.clone(),
            tokens: self.tokens.clone(),
            store: self.store.clone(),
            node: self.node.clone(),
            tokens_of: (self.gateway.clone(), self.alice.clone(), self.bob.clone()),
        };
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        Server::launch(dir, launch, args)
    }

    fn launch(dir: tempfile::TempDir, l: Launch, args: &[&str]) -> Server {
        let mut child = holon()
            .args(["serve", "--listen", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--grace-s", "2", "--documents"])
            .arg(&l.docs)
            .arg("--tokens")
            .arg(&l.tokens)
            .args(["--store", &l.store, "--node", &l.node])
            .arg("--receipts")
            .arg(dir.path().join("receipts.jsonl"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let url = line.trim().rsplit(' ').next().unwrap().to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{line}");
        line.clear();
        out.read_line(&mut line).unwrap();
        let grpc = format!("http://{}", line.trim().rsplit(' ').next().unwrap());
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(std::time::Duration::from_secs(20)))
            .build()
            .into();
        let (gateway, alice, bob) = l.tokens_of;
        Server {
            child: Some(child),
            url,
            grpc,
            dir,
            gateway,
            alice,
            bob,
            agent,
            docs: l.docs,
            tokens: l.tokens,
            store: l.store,
            node: l.node,
        }
    }

    /// Sends a whole keyed POST and never reads the answer: a gateway whose request timed
    /// out after it left (the server has it and runs it; the answer is lost). The socket is
    /// returned, to close when the caller likes.
    pub(crate) fn post_and_walk_away(&self, path: &str, token: &str, body: &Value, key: &str) -> std::net::TcpStream {
        use std::io::Write;
        let body = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: holon\r\nauthorization: Bearer {token}\r\nidempotency-key: {key}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut stream = std::net::TcpStream::connect(self.url.trim_start_matches("http://")).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        stream
    }

    /// POSTs `body` with `token` and `Idempotency-Key: key`, waiting at most `timeout`:
    /// the status, whether the answer was replayed, and the JSON; `None` when the client
    /// gave up (the request may have reached the server or not: what a retry is for).
    pub(crate) fn post_keyed(
        &self,
        path: &str,
        token: &str,
        body: &Value,
        key: &str,
        timeout: std::time::Duration,
    ) -> Option<(u16, bool, Value)> {
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(timeout)).build().into();
        let mut resp = agent
            .post(format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {token}"))
            .header("idempotency-key", key)
            .send(body.to_string())
            .ok()?;
        let status = resp.status().as_u16();
        let replayed = resp.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
        let text = resp.body_mut().read_to_string().ok()?;
        Some((status, replayed, serde_json::from_str(&text).unwrap_or(Value::String(text))))
    }

    pub(crate) fn docs(&self) -> PathBuf {
        self.docs.clone()
    }

    /// POSTs `body` (raw) with `token`; returns the status and the JSON answer.
    pub(crate) fn post_raw(&self, path: &str, token: Option<&str>, body: &str) -> (u16, Value) {
        let mut req = self.agent.post(format!("{}{path}", self.url)).header("content-type", "application/json");
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let mut resp = req.send(body).unwrap();
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub(crate) fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        self.post_raw(path, Some(token), &body.to_string())
    }

    pub(crate) fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        let mut req = self.agent.get(format!("{}{path}", self.url));
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let mut resp = req.call().unwrap();
        (resp.status().as_u16(), resp.body_mut().read_to_string().unwrap())
    }

    /// GETs with `token` and extra `headers`; returns the status, the content type and the
    /// body.
    pub(crate) fn get_with(&self, path: &str, token: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
        let mut req = self.agent.get(format!("{}{path}", self.url)).header("authorization", format!("Bearer {token}"));
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let mut resp = req.call().unwrap();
        let kind = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        (resp.status().as_u16(), kind, resp.body_mut().read_to_string().unwrap())
    }

    /// SIGTERM, then waits for the exit; returns whether it exited cleanly.
    pub(crate) fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else { return false };
        let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        child.wait().map(|s| s.success()).unwrap_or(false)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
