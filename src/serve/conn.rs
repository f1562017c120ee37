//! The connections of both listeners (HTTP, and Envoy's gRPC `Check`) on hyper, with the
//! limits a slow or hostile client meets (docs/serve.md, "Connections"):
//!
//! - at most `connections_max` open connections, and `connections_per_address_max` from one
//!   client address: past either, a new connection is refused at once (an HTTP client gets
//!   a `503` and the connection closes), never queued;
//! - an HTTP/1 request's headers must arrive within `header_read_timeout_ms` of its first
//!   byte, or the connection closes (a half-sent request cannot hold a connection);
//! - a connection with no request in flight and no byte either way for `idle_timeout_ms`
//!   closes.
//!
//! Each connection's bytes go through [`Guarded`], which enforces both times, so the same
//! code serves HTTP/1, HTTP/2 and gRPC.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt;

use super::metrics::{ConnLabels, Metrics, as_gauge};

/// Default longest time an HTTP/1 request's headers may take from its first byte, in ms.
pub(crate) const HEADER_READ_TIMEOUT_MS: u64 = 5_000;
/// Default longest time a connection may stay idle (no request in flight, no byte), in ms.
pub(crate) const IDLE_TIMEOUT_MS: u64 = 60_000;
/// Default most open connections, both listeners together.
pub(crate) const CONNECTIONS_MAX: usize = 4_096;
/// Default most open connections from one client address.
pub(crate) const CONNECTIONS_PER_ADDRESS_MAX: usize = 256;
/// File descriptors kept for everything but connections (the store, files, the watcher).
pub(crate) const FDS_RESERVED: u64 = 256;
/// The pause after a failed `accept` (out of descriptors, say), in ms.
const ACCEPT_ERROR_PAUSE_MS: u64 = 10;
/// What a refused HTTP client reads before the connection closes.
const REFUSED_HTTP: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: 70\r\n\r\n{\"error\":\"too many connections to this server; retry on one you hold\"}";

/// The limits on connections, each a flag of `holon serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnLimits {
    pub header_read_timeout_ms: u64,
    pub idle_timeout_ms: u64,
    pub connections_max: usize,
    pub connections_per_address_max: usize,
}

/// The open connections of both listeners, in all and by client address.
pub(crate) struct Gate {
    limits: ConnLimits,
    /// (open in all, open by address); an address leaves the map with its last connection.
    open: parking_lot::Mutex<(usize, HashMap<IpAddr, usize>)>,
    metrics: &'static Metrics,
}

/// A connection's place in the [`Gate`], given back when it closes.
pub(crate) struct Ticket {
    gate: Arc<Gate>,
    address: IpAddr,
}

impl Gate {
    pub(crate) fn new(limits: ConnLimits, metrics: &'static Metrics) -> Arc<Gate> {
        Arc::new(Gate { limits, open: parking_lot::Mutex::new((0, HashMap::new())), metrics })
    }

    /// A place for a connection from `address`, or the limit it would pass.
    fn admit(self: &Arc<Self>, address: IpAddr) -> Result<Ticket, &'static str> {
        let mut open = self.open.lock();
        if open.0 >= self.limits.connections_max {
            return Err("connections_max");
        }
        let from = open.1.entry(address).or_insert(0);
        if *from >= self.limits.connections_per_address_max {
            if *from == 0 {
                open.1.remove(&address);
            }
            return Err("connections_per_address_max");
        }
        *from += 1;
        open.0 += 1;
        self.metrics.connections_open.set(as_gauge(open.0 as u64));
        Ok(Ticket { gate: Arc::clone(self), address })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut open = self.gate.open.lock();
        debug_assert!(open.0 > 0, "a ticket is given back once");
        open.0 = open.0.saturating_sub(1);
        if let Some(from) = open.1.get_mut(&self.address) {
            *from = from.saturating_sub(1);
            if *from == 0 {
                open.1.remove(&self.address);
            }
        }
        self.gate.metrics.connections_open.set(as_gauge(open.0 as u64));
    }
}

/// What answers a listener's requests: the HTTP API (`http::Api`), or a plain router
/// (Envoy's gRPC service).
pub(crate) trait Answers: Clone + Send + Sync + 'static {
    fn answer(&self, request: Request) -> impl Future<Output = Response> + Send + use<Self>;
}

impl Answers for Router {
    fn answer(&self, request: Request) -> impl Future<Output = Response> + Send + use<> {
        routed(self.clone(), request)
    }
}

/// `router`'s answer to `request` (a router's service never fails).
pub(crate) async fn routed(router: Router, request: Request) -> Response {
    match router.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// Serves `answers` on `listener` until `stop` turns true, then lets the open connections
/// finish (idle ones close at once). `heads`: the listener speaks HTTP/1 (headers timed).
pub(crate) async fn serve(
    listener: TcpListener,
    answers: impl Answers,
    gate: Arc<Gate>,
    heads: bool,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    // Every connection holds a receiver; the last one gone, `closed` resolves.
    let (close_tx, close_rx) = tokio::sync::watch::channel(());
    let mut stopping = std::pin::pin!(super::stopped(stop.clone()));
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(ACCEPT_ERROR_PAUSE_MS)).await;
                    continue;
                }
            },
            () = &mut stopping => break,
        };
        let ticket = match gate.admit(peer.ip()) {
            Ok(ticket) => ticket,
            Err(limit) => {
                gate.metrics.connections_refused.get_or_create(&ConnLabels { reason: limit }).inc();
                if heads {
                    // Best effort, never waiting: the connection closes either way.
                    let _ = tcp.try_write(REFUSED_HTTP);
                }
                continue;
            }
        };
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "cannot set TCP_NODELAY on a connection");
        }
        let io = Guarded::new(tcp, gate.limits, heads, gate.metrics, ticket);
        tokio::spawn(connection(io, answers.clone(), stop.clone(), close_rx.clone()));
    }
    drop(listener);
    drop(close_rx);
    close_tx.closed().await;
}

/// One connection, until it ends or, once `stop` turns true, until its requests are done.
async fn connection(
    io: Guarded,
    answers: impl Answers,
    stop: tokio::sync::watch::Receiver<bool>,
    _close: tokio::sync::watch::Receiver<()>,
) {
    let state = Arc::clone(&io.state);
    let service = tower::service_fn(move |request: axum::http::Request<Incoming>| {
        let busy = Busy::begin(Arc::clone(&state));
        let answer = answers.answer(request.map(axum::body::Body::new));
        async move {
            let response = answer.await;
            drop(busy);
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let builder = Builder::new(TokioExecutor::new());
    let mut conn =
        std::pin::pin!(builder.serve_connection_with_upgrades(TokioIo::new(io), TowerToHyperService::new(service)));
    let mut stopping = std::pin::pin!(super::stopped(stop));
    let mut shutting = false;
    loop {
        tokio::select! {
            _ = conn.as_mut() => break,
            () = &mut stopping, if !shutting => {
                shutting = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// What a connection's bytes and requests say about its deadlines.
struct ConnState {
    started: Instant,
    /// The last byte read or written, in ms since `started`.
    last_ms: AtomicU64,
    /// When the first byte of a request whose headers are not complete came, in ms since
    /// `started` ([`NO_HEAD`]: none).
    head_ms: AtomicU64,
    /// Requests in flight on the connection.
    busy: AtomicUsize,
}

const NO_HEAD: u64 = u64::MAX;

impl ConnState {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }

    /// The next deadline and what it is for, or none while a request is in flight.
    fn deadline(&self, limits: &ConnLimits) -> Option<(u64, &'static str)> {
        // Relaxed: each figure is read on its own, by the connection's own task; the worst
        // a stale one does is move a deadline by one poll.
        if self.busy.load(Ordering::Relaxed) > 0 {
            return None;
        }
        // Relaxed: as above.
        match self.head_ms.load(Ordering::Relaxed) {
            NO_HEAD => {
                // Relaxed: as above.
                let last = self.last_ms.load(Ordering::Relaxed);
                Some((last.saturating_add(limits.idle_timeout_ms), "idle_timeout"))
            }
            head => Some((head.saturating_add(limits.header_read_timeout_ms), "header_read_timeout")),
        }
    }
}

/// A request in flight: no deadline of the connection's runs meanwhile (the request has its
/// own, `--request-ms`).
struct Busy(Arc<ConnState>);

impl Busy {
    fn begin(state: Arc<ConnState>) -> Busy {
        // Relaxed: see `ConnState::deadline`.
        state.head_ms.store(NO_HEAD, Ordering::Relaxed);
        // Relaxed: as above.
        state.busy.fetch_add(1, Ordering::Relaxed);
        Busy(state)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let now = self.0.now_ms();
        // Relaxed: see `ConnState::deadline`.
        self.0.last_ms.store(now, Ordering::Relaxed);
        // Relaxed: as above.
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection's socket, closing it (an error to hyper) once a deadline passes.
struct Guarded {
    tcp: TcpStream,
    state: Arc<ConnState>,
    limits: ConnLimits,
    /// Headers are timed (HTTP/1; off for an HTTP/2 connection, whose first bytes say so).
    heads: bool,
    /// No byte read yet.
    fresh: bool,
    sleep: Pin<Box<tokio::time::Sleep>>,
    metrics: &'static Metrics,
    _ticket: Ticket,
}

/// The preface an HTTP/2 connection opens with.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0";

impl Guarded {
    fn new(tcp: TcpStream, limits: ConnLimits, heads: bool, metrics: &'static Metrics, ticket: Ticket) -> Guarded {
        let started = Instant::now();
        let state = Arc::new(ConnState {
            started,
            last_ms: AtomicU64::new(0),
            head_ms: AtomicU64::new(NO_HEAD),
            busy: AtomicUsize::new(0),
        });
        let first = started + Duration::from_millis(limits.idle_timeout_ms);
        let sleep = Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(first)));
        Guarded { tcp, state, limits, heads, fresh: true, sleep, metrics, _ticket: ticket }
    }

    /// A write that moved bytes counts as activity (the idle timeout starts again).
    fn note_written(&self, written: &Poll<std::io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = written
            && *n > 0
        {
            // Relaxed: see `ConnState::deadline`.
            self.state.last_ms.store(self.state.now_ms(), Ordering::Relaxed);
        }
    }

    /// Bytes came: the connection is active, and a request's headers may have begun.
    fn read(&mut self, bytes: &[u8]) {
        if self.fresh {
            self.fresh = false;
            self.heads &= !bytes.starts_with(H2_PREFACE);
        }
        let now = self.state.now_ms();
        // Relaxed: see `ConnState::deadline`.
        self.state.last_ms.store(now, Ordering::Relaxed);
        // Relaxed: as above.
        if self.heads && self.state.busy.load(Ordering::Relaxed) == 0 {
            // Relaxed: as above (only this task sets a head's start).
            let _ = self.state.head_ms.compare_exchange(NO_HEAD, now, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// `Ready(Err)` once a deadline passed; else arms the timer for the next one. The
    /// timer decides (no clock is read here), and is moved only when the deadline did.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Error> {
        let Some((at_ms, why)) = self.state.deadline(&self.limits) else { return Poll::Pending };
        let at = tokio::time::Instant::from_std(self.state.started + Duration::from_millis(at_ms));
        if self.sleep.deadline() != at {
            self.sleep.as_mut().reset(at);
        }
        if self.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.metrics.connections_closed.get_or_create(&ConnLabels { reason: why }).inc();
        Poll::Ready(std::io::Error::new(std::io::ErrorKind::TimedOut, why))
    }
}

impl AsyncRead for Guarded {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.tcp).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if let Some(bytes) = buf.filled().get(before..).filter(|b| !b.is_empty()) {
                    this.read(bytes);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => this.poll_deadline(cx).map(Err),
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.tcp).poll_write(cx, buf);
        this.note_written(&written);
        written
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.tcp).poll_write_vectored(cx, bufs);
        this.note_written(&written);
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

/// Raises this process's descriptor limit to its hard limit, and checks that
/// `connections_max` fits in it with [`FDS_RESERVED`] to spare: an explicit flag that does
/// not is an error; the default is lowered to fit, and the log says so.
pub(crate) fn fit_descriptors(limits: &mut ConnLimits, explicit: bool) -> anyhow::Result<()> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.maximum != limit.current {
        let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            limit = getrlimit(Resource::Nofile);
        }
    }
    let Some(open_max) = limit.current else { return Ok(()) };
    let room = usize::try_from(open_max.saturating_sub(FDS_RESERVED)).unwrap_or(usize::MAX);
    if limits.connections_max <= room {
        return Ok(());
    }
    anyhow::ensure!(
        !explicit && room > 0,
        "--connections-max {} needs {} file descriptors with the {FDS_RESERVED} the server keeps for itself, and this process may open {open_max} (`ulimit -n`): lower --connections-max or raise the limit",
        limits.connections_max,
        limits.connections_max as u64 + FDS_RESERVED
    );
    tracing::warn!(
        connections_max = room,
        descriptors = open_max,
        "this process may open only {open_max} file descriptors: at most {room} connections at once"
    );
    limits.connections_max = room;
    limits.connections_per_address_max = limits.connections_per_address_max.min(room);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_whole_http_answer_with_its_length() {
        let text = std::str::from_utf8(REFUSED_HTTP).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let length: usize = head.lines().find_map(|l| l.strip_prefix("content-length: ")).unwrap().parse().unwrap();
        assert_eq!(length, body.len());
        assert!(serde_json::from_str::<serde_json::Value>(body).unwrap()["error"].is_string());
    }
}
