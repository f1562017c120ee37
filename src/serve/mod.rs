//! `holon serve`: the admission engine as a sidecar for gateways in any language, over
//! HTTP/JSON (docs/serve.md). A layer above the engine: the library does not know it
//! exists, and it lives in the binary behind the `serve` feature.
//!
//! - `loader`: `--documents DIR` into one snapshot input, all or nothing;
//! - `auth`: bearer tokens by SHA-256 hash, roles, `holon token new`;
//! - `held`: approve and refuse, by the issuer only;
//! - `service`: what a request does (engine, node, open reservations, reload, reaper);
//! - `decision`: decisions into response bodies, with every reason as a sentence;
//! - `http`: the axum router, authentication, limits, status codes;
//! - `ext_authz`: Envoy's external authorization over gRPC (tonic, `envoy-types`);
//! - `wire`: the JSON bodies; `metrics`: Prometheus.

pub(crate) mod auth;
pub(crate) mod conn;
mod ended;
mod ext_authz;
mod http;
pub(crate) mod loader;
mod metrics;
pub(crate) mod service;
mod wire;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use holon::engine::{ChannelSink, Engine, EngineConfig, NullSink, ReceiptSink};
use holon::node::{Node, NodeConfig};
use holon::store::{self, LedgerStore};

use service::Service;

/// Every setting of `holon serve`.
#[derive(Debug, Clone)]
pub(crate) struct ServeOptions {
    pub documents: PathBuf,
    pub listen: String,
    /// Envoy ext_authz over gRPC, if set.
    pub grpc: Option<String>,
    pub mandate_header: String,
    pub agent_header: String,
    pub store: String,
    pub node: String,
    pub tokens: PathBuf,
    pub receipts: Option<PathBuf>,
    pub grace_s: u64,
    /// Seconds past a callee's `timeout_s` before its reservation is reclaimed.
    pub expiry_grace_s: u64,
    pub request_ms: u64,
    pub concurrent_max: usize,
    /// The limits on connections (`--header-read-timeout-ms`, `--idle-timeout-ms`,
    /// `--connections-max`, `--connections-per-address-max`).
    pub conn: conn::ConnLimits,
    /// `--connections-max` was given (else its default may be lowered to fit the process's
    /// descriptor limit).
    pub connections_max_given: bool,
    pub json_logs: bool,
    /// Colour in the log: only on a terminal, never with `NO_COLOR` or `--no-color`.
    pub log_color: bool,
    /// `--keys` and `--revocations` files, read with the documents on every reload.
    pub trust_files: loader::TrustFiles,
    pub require_signatures: bool,
    /// Shadow mode: decide and record every call, deny or hold none (docs/serve.md).
    pub shadow: bool,
    /// Idempotency keys: how long and how many are kept, and the header keying `Check`.
    pub keys: service::idempotency::KeySettings,
}

/// How often the reaper runs, in ms.
const REAP_MS: u64 = 1_000;
/// Quiet time after a file change before a reload, in ms (an editor writes in bursts).
const RELOAD_QUIET_MS: u64 = 100;
/// Longest a reload waits for changes to stop, in ms.
const RELOAD_WAIT_MS_MAX: u64 = 1_000;
/// Receipts the sink queues before it counts drops.
const RECEIPT_QUEUE: usize = 65_536;

pub(crate) fn run(options: &ServeOptions) -> anyhow::Result<()> {
    init_logs(options.json_logs, options.log_color);
    // The addresses first: a server that cannot listen starts nothing (no node, no leases).
    let listeners = Listeners::bind(options)?;
    let mut conn_limits = options.conn;
    conn::fit_descriptors(&mut conn_limits, options.connections_max_given)?;
    let tokens = load_tokens(options)?;
    refuse_keys_among_documents(options)?;
    let loaded = loader::load(&options.documents, &options.trust_files).map_err(|f| anyhow::anyhow!("{f}"))?;
    if options.require_signatures && loaded.input.keys.keys.is_empty() {
        anyhow::bail!(
            "--require-signatures with no trusted key: every mandate would be barred; pass --keys FILE (`holon key new` writes one; keys are never read from the documents directory)"
        );
    }
    let (sink, receipts) = open_receipts(options)?;
    let engine = Arc::new(Engine::with_sink(
        EngineConfig {
            store_backed: true,
            grace_s: options.expiry_grace_s,
            require_signatures: options.require_signatures,
            shadow: options.shadow,
            ..EngineConfig::default()
        },
        sink,
    ));
    engine.publish(&loaded.input).context("compiling the documents")?;
    warn_untrusted(&engine);
    let (store, node, flush_ms) = start_node(options, &engine)?;
    // For the process's life (see `service`): reservations are held across requests.
    let engine: &'static Arc<Engine> = Box::leak(Box::new(engine));
    let node: &'static Node = Box::leak(Box::new(node));
    // The URL was checked as the flag was parsed (`cli::flags::store_url`).
    let kind = holon::store::kind_of(&options.store).unwrap_or("unknown");
    let mut service = Service::new(
        engine,
        node,
        store,
        kind,
        options.documents.clone(),
        options.tokens.clone(),
        tokens,
        loaded.ignored,
    );
    service.trust_files.clone_from(&options.trust_files);
    service.node_name.clone_from(&options.node);
    service.keys.clone_from(&options.keys);
    if let Some(header) = &options.keys.check_header {
        tracing::warn!(
            header = %header,
            "Envoy's Check is keyed by the checked request's `{header}` header: this server trusts Envoy to generate it (a caller that can set it can repeat a Check while its reservation is open); see docs/serve.md, Idempotency"
        );
    }
    service.flush_ms = flush_ms;
    if options.shadow {
        service.metrics.shadow.set(1);
        tracing::warn!(
            "shadow mode: every call is decided and recorded, but none is denied or held; calls the rules would refuse are allowed on shadow reservations (holon_shadow_decisions_total, the mandates' shadow tallies)"
        );
    }
    *service.last_input.lock() = Some(loaded.input);
    let svc: &'static Service = Box::leak(Box::new(service));
    let writer = receipts.map(|(rx, file)| ReceiptWriter::start(rx, engine, file));
    let reaping = Arc::new(AtomicBool::new(true));
    let reaper = start_reaper(svc, Arc::clone(&reaping))?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("the async runtime")?;
    let result = runtime.block_on(serve(svc, options, listeners, conn_limits));
    // The signal tasks never end on their own.
    runtime.shutdown_timeout(Duration::from_secs(1));
    // Release: the reaper reads it with Acquire; nothing else is ordered by it.
    reaping.store(false, Ordering::Release);
    let _ = reaper.join();
    // Every reservation is settled, released or past the grace: flush and give back.
    let drained = node.drain_in_place();
    if let Some(writer) = writer {
        writer.finish();
    }
    tracing::info!(open = svc.open_count(), "stopped");
    drained.context("draining the node")?;
    result
}

/// The gateways' tokens; a file with none is an error (no request could be served).
fn load_tokens(options: &ServeOptions) -> anyhow::Result<auth::Tokens> {
    let tokens = auth::Tokens::load(&options.tokens).map_err(anyhow::Error::msg)?;
    if tokens.len() == 0 {
        anyhow::bail!(
            "tokens file {} holds no token: add one with `holon token new --role gateway --tokens {}`",
            options.tokens.display(),
            options.tokens.display()
        );
    }
    Ok(tokens)
}

/// A keys file among the documents would let whoever writes them trust a key.
fn refuse_keys_among_documents(options: &ServeOptions) -> anyhow::Result<()> {
    if let Some(keys) = &options.trust_files.keys
        && let (Ok(keys), Ok(docs)) = (std::fs::canonicalize(keys), std::fs::canonicalize(&options.documents))
        && keys.starts_with(&docs)
    {
        anyhow::bail!(
            "--keys {} is inside --documents: whoever writes the documents could trust a key; keep the keys file elsewhere",
            keys.display()
        );
    }
    Ok(())
}

/// Receipts opened for the process: the engine's sink, and (with `--receipts`) the
/// channel's receiving end with the file it is written to.
type Receipts = (Arc<dyn ReceiptSink>, Option<(holon::engine::receipt::ReceiptReceiver, std::fs::File)>);

fn open_receipts(options: &ServeOptions) -> anyhow::Result<Receipts> {
    match &options.receipts {
        Some(path) => {
            let (sink, rx) = ChannelSink::new(RECEIPT_QUEUE);
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("receipts file {}", path.display()))?;
            Ok((Arc::new(sink), Some((rx, file))))
        }
        None => Ok((Arc::new(NullSink), None)),
    }
}

/// Opens the store and starts this process's node on it; lets go of the idempotency keys
/// of requests this node's last run left in flight. Returns the store, the node and its
/// flush interval.
fn start_node(options: &ServeOptions, engine: &Arc<Engine>) -> anyhow::Result<(Arc<dyn LedgerStore>, Node, u64)> {
    if let Some(path) = options.store.strip_prefix("sqlite:").map(std::path::Path::new)
        && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir).with_context(|| format!("the store's directory {}", dir.display()))?;
    }
    let store: Arc<dyn LedgerStore> = Arc::from(store::open(&options.store)?);
    let node_config = NodeConfig::new(&options.node);
    let flush_ms = node_config.flush_ms;
    let node = Node::start(Arc::clone(engine), Box::new(Arc::clone(&store)), node_config)?;
    // This node's previous run's keyed requests still in flight died with it (their
    // reservations with them, their leases counted at the node's start): let their keys go.
    let dropped = store.forget_node_keys(&options.node).context("the idempotency keys of this node's last run")?;
    if dropped > 0 {
        tracing::warn!(
            keys = dropped,
            "idempotency keys of requests in flight when this node last stopped were let go"
        );
    }
    Ok((store, node, flush_ms))
}

/// The reaper has a thread of its own: no request can keep it waiting (a store that hangs
/// holds request tasks, never the reclaiming of expired reservations). It runs while
/// `reaping` is set.
fn start_reaper(svc: &'static Service, reaping: Arc<AtomicBool>) -> anyhow::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("holon-reaper".to_owned())
        .spawn(move || {
            let prune_s = if svc.store.in_process() {
                service::idempotency::PRUNE_IN_PROCESS_S
            } else {
                service::idempotency::PRUNE_S
            };
            let prune_every = (prune_s * 1_000 / REAP_MS).max(1);
            let mut ticks = 0u64;
            // Acquire: pairs with the Release that stops it (a flag, read alone).
            while reaping.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(REAP_MS));
                svc.reap();
                ticks = ticks.wrapping_add(1);
                if ticks.is_multiple_of(prune_every) {
                    svc.prune_keys();
                }
            }
        })
        .context("starting the reaper")
}

/// Both listeners, bound before anything else starts.
struct Listeners {
    http: std::net::TcpListener,
    grpc: Option<std::net::TcpListener>,
}

impl Listeners {
    fn bind(options: &ServeOptions) -> anyhow::Result<Listeners> {
        let bind = |flag: &str, address: &str| {
            let listener = std::net::TcpListener::bind(address).with_context(|| {
                format!(
                    "{flag} {address}: cannot listen there; give HOST:PORT, an address and a port (such as 127.0.0.1:8844; port 0 picks a free one)"
                )
            })?;
            listener.set_nonblocking(true).with_context(|| format!("{flag} {address}"))?;
            anyhow::Ok(listener)
        };
        let http = bind("--listen", &options.listen)?;
        let grpc = options.grpc.as_deref().map(|g| bind("--grpc", g)).transpose()?;
        Ok(Listeners { http, grpc })
    }
}

async fn serve(
    svc: &'static Service,
    options: &ServeOptions,
    listeners: Listeners,
    conn_limits: conn::ConnLimits,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::from_std(listeners.http)?;
    let addr = listener.local_addr()?;
    // Every signal the server handles is taken before it says where it listens: a
    // supervisor that reads the line and at once sends SIGTERM (or SIGHUP to reload)
    // would otherwise end it by the signal's default action, with nothing logged.
    use tokio::signal::unix::{SignalKind, signal};
    let stop_signals = (signal(SignalKind::terminate())?, signal(SignalKind::interrupt())?);
    let mut hangup = signal(SignalKind::hangup())?;
    // The one line a supervisor (or a test) reads to find the port.
    println!("holon serve: listening on http://{addr}");
    let _ = std::io::stdout().flush();
    tracing::info!(%addr, documents = %options.documents.display(), store = svc.store_kind, "serving");

    let _watcher = watch(svc)?;
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            let _ = tokio::task::spawn_blocking(move || svc.reload()).await;
        }
    });
    let limits = http::HttpLimits { request_ms: options.request_ms, concurrent_max: options.concurrent_max };
    let grace = Duration::from_secs(options.grace_s);
    // Set once the grace is over: both listeners stop then.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let gate = conn::Gate::new(conn_limits, &svc.metrics);
    let grpc = match listeners.grpc {
        None => None,
        Some(listener) => {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            println!("holon serve: ext_authz gRPC on {}", listener.local_addr()?);
            let _ = std::io::stdout().flush();
            let headers = ext_authz::Headers::new(&options.mandate_header, &options.agent_header);
            let router = tonic::service::Routes::new(ext_authz::server(svc, headers)).prepare().into_axum_router();
            Some(tokio::spawn(conn::serve(listener, router, Arc::clone(&gate), false, stop_rx.clone())))
        }
    };
    tokio::spawn(async move {
        shutdown(svc, grace, stop_signals).await;
        let _ = stop_tx.send(true);
    });
    conn::serve(listener, http::api(svc, limits), gate, true, stop_rx).await;
    if let Some(grpc) = grpc {
        grpc.await.context("the gRPC server")?;
    }
    Ok(())
}

/// Resolves once `stop` turns true.
pub(super) async fn stopped(mut stop: tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// Resolves when the server should stop: after SIGTERM or SIGINT, admissions are refused
/// (`/readyz` 503) while open reservations get up to `grace` to settle.
async fn shutdown(
    svc: &'static Service,
    grace: Duration,
    (mut term, mut interrupt): (tokio::signal::unix::Signal, tokio::signal::unix::Signal),
) {
    tokio::select! {
        _ = term.recv() => {}
        _ = interrupt.recv() => {}
    }
    // Release: `/readyz` and admissions read it with Acquire (a flag, nothing else ordered).
    svc.ready.store(false, Ordering::Release);
    tracing::info!(open = svc.open_count(), grace_s = grace.as_secs(), "shutting down: admitting nothing more");
    let deadline = Instant::now() + grace;
    while svc.open_count() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reloads on any change below the documents directory, to the tokens file, or in the
/// directories of the keys and revocations files.
fn watch(svc: &'static Service) -> anyhow::Result<notify::RecommendedWatcher> {
    use notify::Watcher;
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    // Only the documents and the tokens file: the tokens file's directory may hold the
    // SQLite store, written all the time.
    let documents = std::fs::canonicalize(&svc.documents).context("the documents directory")?;
    let tokens = std::fs::canonicalize(&svc.tokens_path).context("the tokens file")?;
    // The directories of the keys and revocations files: any change there reloads, so a
    // file behind a symlink that is swapped (a Kubernetes ConfigMap's `..data`) is seen.
    let trust: Vec<PathBuf> = svc
        .trust_files
        .paths()
        .map(|f| {
            let dir = f.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            std::fs::canonicalize(dir).with_context(|| format!("the directory of {}", f.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (docs_seen, tokens_seen, trust_seen) = (documents.clone(), tokens.clone(), trust.clone());
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // What the loader reads (YAML files outside hidden directories) or the tokens file:
        // a receipts file or a store in the directory must not keep reloading it.
        let read = |p: &std::path::Path| {
            p.starts_with(&docs_seen)
                && p.extension().is_some_and(|x| x == "yaml" || x == "yml")
                && p.strip_prefix(&docs_seen)
                    .is_ok_and(|rest| !rest.components().any(|c| c.as_os_str().to_string_lossy().starts_with('.')))
        };
        let relevant = event.is_ok_and(|e| {
            !e.kind.is_access()
                && e.paths.iter().any(|p| {
                    read(p) || p == &tokens_seen || p.parent().is_some_and(|d| trust_seen.iter().any(|t| t == d))
                })
        });
        if relevant {
            let _ = tx.send(());
        }
    })?;
    watcher.watch(&documents, notify::RecursiveMode::Recursive).context("watching the documents")?;
    let tokens_dir = tokens.parent().map(Path::to_path_buf);
    for dir in tokens_dir.iter().chain(&trust) {
        watcher
            .watch(dir, notify::RecursiveMode::NonRecursive)
            .context("watching the tokens, keys and revocations files")?;
    }
    std::thread::Builder::new().name("holon-reload".to_owned()).spawn(move || {
        while rx.recv().is_ok() {
            // Wait for the burst to end, but not for ever.
            let latest = Instant::now() + Duration::from_millis(RELOAD_WAIT_MS_MAX);
            while Instant::now() < latest && rx.recv_timeout(Duration::from_millis(RELOAD_QUIET_MS)).is_ok() {}
            let _ = svc.reload();
        }
    })?;
    Ok(watcher)
}

fn init_logs(json: bool, color: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOLON_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(color && !json);
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
}

/// Logs each mandate the last publish barred as untrusted (signatures required, its chain
/// does not hold): it admits nothing (`mandate_untrusted`), and the operator is told why.
pub(crate) fn warn_untrusted(engine: &Engine) {
    for (mandate, reason) in engine.snapshot().untrusted() {
        tracing::warn!(mandate = %mandate, reason = %reason, "mandate barred: its signature chain does not hold");
    }
}

/// Writes receipts as JSON lines until told to finish, then drains what is left.
struct ReceiptWriter {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl ReceiptWriter {
    fn start(rx: holon::engine::receipt::ReceiptReceiver, engine: &'static Engine, file: std::fs::File) -> Self {
        let names = engine.names();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut out = std::io::BufWriter::new(file);
            loop {
                // Acquire: pairs with the Release in `finish`; every receipt submitted before
                // it is in the channel, read by the pass after.
                let last = seen.load(Ordering::Acquire);
                // The agent's version, payer and caller as the live snapshot says (what
                // `holon records build` needs).
                let snapshot = engine.snapshot();
                for r in rx.try_iter() {
                    let line = holon::engine::receipt::receipt_json_with_facts(&r, &names, &snapshot);
                    if writeln!(out, "{line}").is_err() {
                        tracing::error!("the receipts file cannot be written; receipts are being lost");
                    }
                }
                let _ = out.flush();
                if last {
                    return;
                }
                std::thread::sleep(Duration::from_millis(holon::engine::receipt::DRAIN_INTERVAL_MS));
            }
        });
        ReceiptWriter { stop, thread }
    }

    fn finish(self) {
        // Release: see the Acquire in the writer's loop.
        self.stop.store(true, Ordering::Release);
        let _ = self.thread.join();
    }
}
