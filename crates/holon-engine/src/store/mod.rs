//! The ledger store: the authority a gateway node draws budget **leases** from, so that
//! budgets hold across processes, machines and restarts (issue #12; docs/store.md).
//!
//! Per mandate (and per mandate and UTC day, for `per_day`) the store keeps the limit,
//! `spent` (settled by nodes and flushed, or counted by a reconcile; never lowered) and
//! `leased` (granted to nodes, not yet settled or given back), and grants a lease only when
//! `spent + leased <= limit` holds after it ([`escrow`]). A node admits calls only against
//! the leases it holds, so the nodes together never spend more than the limit.
//!
//! This module is the store's side: the rules ([`escrow`], one implementation), the
//! [`LedgerStore`] trait every backend implements, the backends (`memory`, `sqlite`,
//! `postgres`), and [`check_limits`] (a mandate's documents against the store's copy).

pub mod escrow;
pub mod held;
pub mod keys;
mod limits;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
pub mod sqlite;
mod steps;

pub use escrow::EscrowError;
pub use held::HeldCall;
pub use keys::{KeyAnswer, KeyClaim, KeyState};
pub use limits::{LimitsCheckError, check_limits};
pub use memory::MemoryStore;

/// Longest node name, in bytes.
pub const NODE_NAME_BYTES_MAX: usize = 128;
/// Longest mandate id the store accepts, in bytes.
pub const MANDATE_ID_BYTES_MAX: usize = 512;
/// Most entries in one flush (one group commit).
pub const FLUSH_ENTRIES_MAX: usize = 10_000;
/// How long a closed lease is kept after its expiry, in seconds: a flush sent again after
/// its commit's answer was lost finds it (and moves nothing) instead of an unknown lease.
pub const CLOSED_LEASE_KEEP_S: i64 = 3_600;
/// How long a held call's row is kept after its expiry, in seconds (a taken one is a
/// tombstone until then: a copy sent again cannot bring it back).
pub const HELD_KEEP_S: i64 = 86_400;

/// A mandate's limits as the store enforces them, in micro-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLimits {
    pub total_micros: u64,
    pub per_day_micros: Option<u64>,
}

/// How a lease ended (or that it has not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseState {
    Open,
    /// Its node settled or gave back everything and closed it. A closed lease is kept for
    /// [`CLOSED_LEASE_KEEP_S`] after its expiry: a later flush naming it moves nothing, and
    /// money through it is refused.
    Closed,
    /// Its remainder was counted as spent (its node crashed, or its time to live passed).
    Reconciled,
}

impl LeaseState {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseState::Open => "open",
            LeaseState::Closed => "closed",
            LeaseState::Reconciled => "reconciled",
        }
    }

    /// The state [`LeaseState::as_str`] names, or `None` for any other text.
    pub fn parse(text: &str) -> Option<Self> {
        [LeaseState::Open, LeaseState::Closed, LeaseState::Reconciled].into_iter().find(|s| s.as_str() == text)
    }
}

/// A node asks for budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantRequest {
    pub node: String,
    pub mandate: String,
    /// The UTC day number the lease also draws on (required when the mandate has `per_day`).
    pub day: Option<u64>,
    pub want_micros: u64,
    /// Less than this is no use to the node (for example one call's worst case): grant
    /// nothing rather than less.
    pub min_micros: u64,
    pub ttl_s: u64,
    pub now_unix: i64,
}

/// A lease granted to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub id: u64,
    pub amount_micros: u64,
    pub expires_unix: i64,
}

/// One lease's part of a flush: what its node settled since the last flush, what it gives
/// back unused, and whether it is done with the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlushEntry {
    pub lease: u64,
    pub settle_micros: u64,
    pub give_back_micros: u64,
    /// Close the lease when nothing is left outstanding.
    pub close: bool,
    /// Extend the lease's time to live from now (a live node renews its leases).
    pub renew_ttl_s: Option<u64>,
    /// What the node expects the lease to hold outstanding before this entry. With it a
    /// flush is idempotent: an entry the store already applied (a flush whose commit's
    /// answer was lost, sent again) moves nothing, and any other difference is refused.
    pub expect_outstanding_micros: Option<u64>,
}

/// What a flush did to one lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushOutcome {
    pub lease: u64,
    /// `Reconciled` tells the node the lease is gone: it must admit nothing more against it
    /// (its remainder was already counted as spent, so nothing it did was lost).
    pub state: LeaseState,
    pub outstanding_micros: u64,
}

/// What a reconcile did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reconciled {
    /// (lease id, mandate, micro-units counted as spent).
    pub leases: Vec<(u64, String, u64)>,
    pub counted_micros: u64,
}

/// One node's open leases on a mandate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLeases {
    pub node: String,
    pub leased_micros: u64,
    /// The latest expiry among its open leases.
    pub lease_expires_unix: i64,
}

/// A mandate as the store sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MandateStatus {
    pub mandate: String,
    pub limits: StoreLimits,
    pub spent_micros: u64,
    pub leased_micros: u64,
    pub nodes: Vec<NodeLeases>,
}

/// Why the store refused or could not do an operation. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Escrow(#[from] EscrowError),
    #[error("mandate `{0}` is not in the store; a node registers it when it publishes the mandate")]
    UnknownMandate(String),
    #[error("lease {0} is not in the store")]
    UnknownLease(u64),
    #[error("{what} is {got} bytes, above the store's limit of {max_bytes}")]
    TooLong { what: &'static str, got: usize, max_bytes: usize },
    #[error("a flush of {got} entries is above the limit of {max} per flush; split it")]
    FlushTooLarge { got: usize, max: usize },
    #[error("the store cannot be reached or used: {0}")]
    Unavailable(String),
    #[error(
        "a lease on a per_day mandate draws on the UTC day of its time ({now_unix}); the request named {asked:?}: a node's clock and its day must agree"
    )]
    WrongDay { asked: Option<u64>, now_unix: i64 },
    #[error(
        "the store was written by a newer holon (schema {found}, this build knows {known}); upgrade holon before using it"
    )]
    NewerSchema { found: i64, known: i64 },
}

/// The store every backend implements. Each method is one atomic step: it happens whole
/// or not at all.
pub trait LedgerStore: Send + Sync {
    /// Registers a mandate's limits or updates them: a publish (`raise: false`) may only
    /// lower what the store holds; an operator's explicit command (`raise: true`) sets them.
    /// Returns the limits the store now enforces.
    fn publish_limits(&self, mandate: &str, limits: StoreLimits, raise: bool) -> Result<StoreLimits, StoreError>;
    /// Grants a lease, or `None` when less than `min_micros` is left.
    fn grant(&self, request: &GrantRequest) -> Result<Option<Lease>, StoreError>;
    /// Applies a node's settlements and give-backs (a group commit), all or none.
    fn flush(&self, node: &str, entries: &[FlushEntry], now_unix: i64) -> Result<Vec<FlushOutcome>, StoreError>;
    /// Counts as spent the remainder of `node`'s open leases: all of them (the node itself,
    /// restarting after a crash) or only those whose time to live has passed by `now_unix`
    /// (anyone, for a node that is gone).
    fn reconcile(&self, node: &str, now_unix: i64, expired_only: bool) -> Result<Reconciled, StoreError>;
    /// Every mandate (or one) with its open leases per node.
    fn status(&self, mandate: Option<&str>) -> Result<Vec<MandateStatus>, StoreError>;
    /// Keeps a held call until it is taken or expires (an id already held is left as it is).
    fn hold(&self, call: &HeldCall) -> Result<(), StoreError>;
    /// Takes a held call out of the store, once: `None` when no such call is held, or it
    /// expired by `now_unix` (an expired call is removed).
    fn take_held(&self, id: &str, now_unix: i64) -> Result<Option<HeldCall>, StoreError>;
    /// The held calls not expired by `now_unix` (of one mandate, or all), by id.
    fn held_calls(&self, mandate: Option<&str>, now_unix: i64) -> Result<Vec<HeldCall>, StoreError>;
    /// Puts back a call its taker could not approve (not the issuer, or no lease yet): held
    /// again, as it was.
    fn release_held(&self, id: &str) -> Result<(), StoreError>;
    /// Claims a request's idempotency key ([`keys`]): the key is this request's, or the
    /// first request with it is in flight, was another request, or answered.
    fn claim_key(&self, _claim: &KeyClaim<'_>) -> Result<KeyState, StoreError> {
        Err(no_keys())
    }
    /// Keeps a claimed key's answer (a key answered already keeps its first). The answer
    /// is moved in: a store in this process keeps it without a copy.
    fn answer_key(&self, _scope: &str, _key: &str, _answer: KeyAnswer) -> Result<(), StoreError> {
        Err(no_keys())
    }
    /// Drops a claim still in flight whose request changed nothing (an answered key stays).
    fn forget_key(&self, _scope: &str, _key: &str) -> Result<(), StoreError> {
        Err(no_keys())
    }
    /// Drops `node`'s claims still in flight: its previous run's, when it restarts (their
    /// requests died with it). Returns how many.
    fn forget_node_keys(&self, _node: &str) -> Result<u64, StoreError> {
        Err(no_keys())
    }
    /// Drops the keys expired by `now_unix`, then the oldest answered ones past `keys_max`.
    /// Returns how many.
    fn prune_keys(&self, _now_unix: i64, _keys_max: u64) -> Result<u64, StoreError> {
        Err(no_keys())
    }
    /// Whether every step is in this process's memory (no I/O: callers need not move it
    /// off an async worker).
    fn in_process(&self) -> bool {
        false
    }
}

/// What a store that keeps no idempotency keys answers.
fn no_keys() -> StoreError {
    StoreError::Unavailable("this store keeps no idempotency keys".to_owned())
}

/// A store shared by handles in one process (a node and a reader of the same `memory`
/// store, say) is a store.
impl<S: LedgerStore + ?Sized> LedgerStore for std::sync::Arc<S> {
    fn publish_limits(&self, mandate: &str, limits: StoreLimits, raise: bool) -> Result<StoreLimits, StoreError> {
        (**self).publish_limits(mandate, limits, raise)
    }
    fn grant(&self, request: &GrantRequest) -> Result<Option<Lease>, StoreError> {
        (**self).grant(request)
    }
    fn flush(&self, node: &str, entries: &[FlushEntry], now_unix: i64) -> Result<Vec<FlushOutcome>, StoreError> {
        (**self).flush(node, entries, now_unix)
    }
    fn reconcile(&self, node: &str, now_unix: i64, expired_only: bool) -> Result<Reconciled, StoreError> {
        (**self).reconcile(node, now_unix, expired_only)
    }
    fn status(&self, mandate: Option<&str>) -> Result<Vec<MandateStatus>, StoreError> {
        (**self).status(mandate)
    }
    fn hold(&self, call: &HeldCall) -> Result<(), StoreError> {
        (**self).hold(call)
    }
    fn take_held(&self, id: &str, now_unix: i64) -> Result<Option<HeldCall>, StoreError> {
        (**self).take_held(id, now_unix)
    }
    fn held_calls(&self, mandate: Option<&str>, now_unix: i64) -> Result<Vec<HeldCall>, StoreError> {
        (**self).held_calls(mandate, now_unix)
    }
    fn release_held(&self, id: &str) -> Result<(), StoreError> {
        (**self).release_held(id)
    }
    fn claim_key(&self, claim: &KeyClaim<'_>) -> Result<KeyState, StoreError> {
        (**self).claim_key(claim)
    }
    fn answer_key(&self, scope: &str, key: &str, answer: KeyAnswer) -> Result<(), StoreError> {
        (**self).answer_key(scope, key, answer)
    }
    fn forget_key(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        (**self).forget_key(scope, key)
    }
    fn forget_node_keys(&self, node: &str) -> Result<u64, StoreError> {
        (**self).forget_node_keys(node)
    }
    fn prune_keys(&self, now_unix: i64, keys_max: u64) -> Result<u64, StoreError> {
        (**self).prune_keys(now_unix, keys_max)
    }
    fn in_process(&self) -> bool {
        (**self).in_process()
    }
}

pub(crate) fn check_name(what: &'static str, value: &str, max_bytes: usize) -> Result<(), StoreError> {
    if value.len() > max_bytes {
        return Err(StoreError::TooLong { what, got: value.len(), max_bytes });
    }
    Ok(())
}

/// Seconds in a UTC day.
const DAY_S: i64 = 86_400;

/// The UTC day a grant at `now_unix` draws on, checked against the node's `day`, and the
/// lease's expiry: at most the end of that day for a day lease (a lease of day D must not
/// serve calls on day D+1).
pub(crate) fn grant_day(request: &GrantRequest, per_day: bool) -> Result<(Option<u64>, i64), StoreError> {
    let expires = request.now_unix.saturating_add_unsigned(request.ttl_s);
    if !per_day {
        return Ok((None, expires));
    }
    let today = u64::try_from(request.now_unix.div_euclid(DAY_S))
        .map_err(|_| StoreError::WrongDay { asked: request.day, now_unix: request.now_unix })?;
    match request.day {
        Some(day) if day == today => {}
        asked => return Err(StoreError::WrongDay { asked, now_unix: request.now_unix }),
    }
    let day_end = i64::try_from(today).ok().and_then(|d| d.checked_add(1)?.checked_mul(DAY_S)).unwrap_or(i64::MAX);
    Ok((Some(today), expires.min(day_end)))
}

pub(crate) fn check_flush(entries: &[FlushEntry]) -> Result<(), StoreError> {
    if entries.len() > FLUSH_ENTRIES_MAX {
        return Err(StoreError::FlushTooLarge { got: entries.len(), max: FLUSH_ENTRIES_MAX });
    }
    Ok(())
}

/// Why a store URL cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "`{0}` is not a store URL; give `memory`, `sqlite:PATH` (a file, created if missing) or `postgres://USER@HOST:PORT/DB`"
    )]
    BadUrl(String),
    #[error(
        "no store file at `{0}`: check the path (a store is created by the node that first uses it, not by this command)"
    )]
    Missing(String),
    #[error(
        "the `memory` store lives inside one process and is empty anywhere else; name a `sqlite:PATH` or `postgres://…` store"
    )]
    NotShared,
    #[error("this build of holon has no `{feature}` store; rebuild with `--features {feature}`")]
    NotBuilt { feature: &'static str },
    #[error("the store at `{url}`: {source}")]
    Store {
        url: String,
        #[source]
        source: StoreError,
    },
}

/// Opens a store that must already exist, for commands that inspect or repair one
/// (`holon ledger`): `memory` is refused (it is empty outside its process) and a
/// `sqlite:PATH` whose file is missing is an error rather than a fresh, empty store.
pub fn open_existing(url: &str) -> Result<Box<dyn LedgerStore>, OpenError> {
    if url == "memory" {
        return Err(OpenError::NotShared);
    }
    if let Some(path) = url.strip_prefix("sqlite:")
        && !path.is_empty()
        && !std::path::Path::new(path).is_file()
    {
        return Err(OpenError::Missing(path.to_owned()));
    }
    open(url)
}

/// The kind of store a URL names (`memory`, `sqlite`, `postgres`: the names reports use),
/// or why it names none. The one reading of a store URL: [`open`] dispatches on it and the
/// command line checks every `--store` with it before anything runs.
pub fn kind_of(url: &str) -> Result<&'static str, OpenError> {
    if url == "memory" {
        Ok("memory")
    } else if url.strip_prefix("sqlite:").is_some_and(|path| !path.is_empty()) {
        Ok("sqlite")
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok("postgres")
    } else {
        Err(OpenError::BadUrl(url.to_owned()))
    }
}

/// Opens the store a URL names: `memory`, `sqlite:PATH`, or `postgres://…`
/// (`postgresql://…`).
pub fn open(url: &str) -> Result<Box<dyn LedgerStore>, OpenError> {
    let wrap = |source| OpenError::Store { url: url.to_owned(), source };
    match kind_of(url)? {
        "memory" => Ok(Box::new(MemoryStore::new())),
        #[cfg(feature = "sqlite")]
        "sqlite" => {
            let path = url.strip_prefix("sqlite:").unwrap_or_default();
            sqlite::SqliteStore::open(std::path::Path::new(path))
                .map(|s| Box::new(s) as Box<dyn LedgerStore>)
                .map_err(wrap)
        }
        #[cfg(feature = "postgres")]
        "postgres" => postgres::PostgresStore::connect(url).map(|s| Box::new(s) as Box<dyn LedgerStore>).map_err(wrap),
        feature => {
            let _ = wrap;
            Err(OpenError::NotBuilt { feature })
        }
    }
}
