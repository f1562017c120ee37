//! `holon serve` and `holon token new`: their flags; the server itself is `crate::serve`.

use std::path::{Path, PathBuf};

use super::exit;
use super::flags::{
    serve_concurrent_max, serve_connections_max, serve_grace_s, serve_header_read_timeout_ms, serve_idempotency_keep_s,
    serve_idempotency_keys_max, serve_idle_timeout_ms, serve_request_ms,
};
use super::out;

#[derive(clap::Args)]
pub(super) struct ServeArgs {
    /// The directory of manifests, mandates and agent records; reloaded on change or
    /// SIGHUP (an invalid document keeps the old ones serving).
    #[arg(long)]
    documents: PathBuf,
    /// Where to listen (`127.0.0.1:0` picks a free port; the first line on standard output
    /// says which).
    #[arg(long, default_value = "127.0.0.1:8844")]
    listen: String,
    /// Also serve Envoy's external authorization (`envoy.service.auth.v3.Authorization`)
    /// over gRPC on this address.
    #[arg(long)]
    grpc: Option<String>,
    /// The request header Envoy's Check carries the mandate in.
    #[arg(long, default_value = "x-holon-mandate")]
    mandate_header: String,
    /// The request header Envoy's Check carries the agent in.
    #[arg(long, default_value = "x-holon-agent")]
    agent_header: String,
    /// The ledger store: `memory`, `sqlite:PATH` or `postgres://USER@HOST:PORT/DB`.
    #[arg(long, default_value = "sqlite:.holon/ledger.db", value_parser = super::flags::store_url)]
    store: String,
    /// This node's name in the store (keep it across restarts: a restarted node counts
    /// what it left in leases).
    #[arg(long, default_value = "serve", value_parser = super::flags::node_name)]
    node: String,
    /// The tokens file (`holon token new` writes it).
    #[arg(long, default_value = ".holon/tokens")]
    tokens: PathBuf,
    /// Append one JSON line per receipt to this file.
    #[arg(long)]
    receipts: Option<PathBuf>,
    /// Seconds open reservations get to settle after SIGTERM, 0 to 3,600.
    #[arg(long, default_value_t = 30, value_parser = serve_grace_s, allow_negative_numbers = true)]
    grace_s: u64,
    /// Seconds a reservation gets past its callee's `timeout_s` before the reaper
    /// reclaims it (its worst case stays spent until a late settle), 0 to 3,600.
    #[arg(long, default_value_t = 30, value_parser = serve_grace_s, allow_negative_numbers = true)]
    expiry_grace_s: u64,
    /// Longest a request may take, in ms, 1 to 600,000 (then 408).
    #[arg(long, default_value_t = 10_000, value_parser = serve_request_ms, allow_negative_numbers = true)]
    request_ms: u64,
    /// Requests handled at once, 1 to 65,536 (more wait their turn).
    #[arg(long, default_value_t = 1_024, value_parser = serve_concurrent_max, allow_negative_numbers = true)]
    concurrent_max: usize,
    /// Longest an HTTP/1 request's headers may take from its first byte, in ms, 100 to
    /// 600,000 (then the connection closes: a half-sent request holds nothing).
    #[arg(long, default_value_t = crate::serve::conn::HEADER_READ_TIMEOUT_MS, value_parser = serve_header_read_timeout_ms, allow_negative_numbers = true)]
    header_read_timeout_ms: u64,
    /// Longest a connection may stay idle (no request in flight, no byte), in ms, 100 to
    /// 3,600,000 (then it closes).
    #[arg(long, default_value_t = crate::serve::conn::IDLE_TIMEOUT_MS, value_parser = serve_idle_timeout_ms, allow_negative_numbers = true)]
    idle_timeout_ms: u64,
    /// Most connections open at once, both listeners together, 1 to 1,000,000 (default
    /// 4,096, lowered to fit the process's file-descriptor limit); past it a new one is
    /// refused at once.
    #[arg(long, value_parser = serve_connections_max, allow_negative_numbers = true)]
    connections_max: Option<usize>,
    /// Most connections open at once from one client address, 1 to 1,000,000; past it a new
    /// one from that address is refused at once.
    #[arg(long, default_value_t = crate::serve::conn::CONNECTIONS_PER_ADDRESS_MAX, value_parser = serve_connections_max, allow_negative_numbers = true)]
    connections_per_address_max: usize,
    /// Logs as JSON lines (default: for people).
    #[arg(long)]
    json_logs: bool,
    /// The trusted keys file (`holon_keys`, `holon key new` writes it), read with the
    /// documents on every reload. The only source of trusted keys: a keys document inside
    /// `--documents` is left alone (whoever writes the documents must not trust keys).
    #[arg(long)]
    keys: Option<PathBuf>,
    /// A revocation list (`holon_revocations`), read with the documents on every reload
    /// and watched: no call is admitted under a revoked mandate once the reload returns.
    #[arg(long)]
    revocations: Option<PathBuf>,
    /// Bar every mandate whose signature chain does not hold under the trusted keys
    /// (`mandate_untrusted`; the rest of the documents still publish, revocations first),
    /// and deny agents without their publisher's provenance signature
    /// (`provenance_unverified`). Needs --keys.
    #[arg(long)]
    require_signatures: bool,
    /// Shadow mode, for a staged rollout: decide and record every call as usual, but
    /// answer "allowed" for calls the rules would deny or hold (with the real decision and
    /// its codes beside it), on shadow reservations whose settlements go into a shadow
    /// tally, never into the budgets.
    #[arg(long)]
    shadow: bool,
    /// Seconds an Idempotency-Key is kept from its first request, 1 to 604,800 (its
    /// retries get the first answer until then).
    #[arg(long, default_value_t = holon::gateway::KEEP_S, value_parser = serve_idempotency_keep_s, allow_negative_numbers = true)]
    idempotency_keep_s: u64,
    /// Most Idempotency-Keys kept in the store, 1,000 to 100,000,000 (past it the oldest
    /// answered go first, pruned every 10 s).
    #[arg(long, default_value_t = holon::gateway::KEYS_MAX, value_parser = serve_idempotency_keys_max, allow_negative_numbers = true)]
    idempotency_keys_max: u64,
    /// Key Envoy's `Check` by this header of the checked request, as an Idempotency-Key
    /// would (default: none, every `Check` reserves). Name a header only if Envoy generates
    /// it and a caller cannot set it: `x-request-id` with `use_remote_address: true`,
    /// `preserve_external_request_id: false` and no internal hop in front of this Envoy
    /// (docs/serve.md, "Idempotency"). A header the budgeted caller can set would let it
    /// repeat a `Check`; a replay still never authorises a call whose reservation ended.
    #[arg(long, value_name = "HEADER")]
    check_key_header: Option<String>,
}

#[derive(clap::Subcommand)]
pub(super) enum TokenCommand {
    /// Appends a new token's SHA-256 to the tokens file and prints the token, once.
    #[command(
        after_help = "EXIT CODES: 0 a token added (printed once), 2 a bad role or an unwritable tokens file.\n\nEXAMPLES:\n  holon token new --role gateway --tokens .holon/tokens\n  holon token new --role account:alice --tokens .holon/tokens"
    )]
    New {
        /// `gateway`, or `account:NAME` for the issuer NAME.
        #[arg(long)]
        role: String,
        /// The tokens file to append to (created 0600 if missing).
        #[arg(long, default_value = ".holon/tokens")]
        tokens: PathBuf,
    },
}

pub(super) fn serve(a: ServeArgs, log_color: bool) -> anyhow::Result<u8> {
    crate::serve::run(&crate::serve::ServeOptions {
        documents: a.documents,
        listen: a.listen,
        grpc: a.grpc,
        mandate_header: a.mandate_header,
        agent_header: a.agent_header,
        store: a.store,
        node: a.node,
        tokens: a.tokens,
        receipts: a.receipts,
        grace_s: a.grace_s,
        expiry_grace_s: a.expiry_grace_s,
        request_ms: a.request_ms,
        concurrent_max: a.concurrent_max,
        conn: crate::serve::conn::ConnLimits {
            header_read_timeout_ms: a.header_read_timeout_ms,
            idle_timeout_ms: a.idle_timeout_ms,
            connections_max: a.connections_max.unwrap_or(crate::serve::conn::CONNECTIONS_MAX),
            connections_per_address_max: a.connections_per_address_max,
        },
        connections_max_given: a.connections_max.is_some(),
        json_logs: a.json_logs,
        log_color,
        trust_files: crate::serve::loader::TrustFiles { keys: a.keys, revocations: a.revocations },
        require_signatures: a.require_signatures,
        shadow: a.shadow,
        keys: crate::serve::service::idempotency::KeySettings {
            keep_s: a.idempotency_keep_s,
            keys_max: a.idempotency_keys_max,
            check_header: a.check_key_header.map(|h| h.to_ascii_lowercase()),
        },
    })?;
    Ok(exit::OK)
}

pub(super) fn token_new(role: &str, tokens: &Path) -> anyhow::Result<u8> {
    let role = crate::serve::auth::Role::parse(role).map_err(anyhow::Error::msg)?;
    let token = crate::serve::auth::new_token(&role, tokens).map_err(anyhow::Error::msg)?;
    out::text(format_args!("{token}\n"))?;
    Ok(exit::OK)
}
