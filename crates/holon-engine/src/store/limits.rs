//! A mandate's documents against the store's copy of its limits. A publish can only lower
//! what the store enforces ([`super::LedgerStore::publish_limits`]), so documents raised
//! without the operator's explicit command (`holon ledger raise`) leave the store at the
//! old, lower figures: [`check_limits`] finds that and says what to do. It only reads.

use crate::money::Amount;

use super::{LedgerStore, StoreError, StoreLimits};

/// The documents and the store disagree, or the store could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LimitsCheckError {
    /// The store enforces less than the documents say: the documents were raised without
    /// `holon ledger raise`.
    #[error("{}", store_lower_text(mandate, store, documents))]
    StoreLower { mandate: String, store: StoreLimits, documents: StoreLimits },
    #[error("cannot compare the limits of mandate `{mandate}` with the store's: {source}")]
    Store {
        mandate: String,
        #[source]
        source: StoreError,
    },
}

fn money(micros: u64) -> String {
    Amount::from_micros(micros).to_string()
}

/// `None` as text: no `per_day` limit.
fn per_day(limit: Option<u64>) -> String {
    limit.map_or_else(|| "none".to_owned(), money)
}

/// Whether `store` enforces less than `documents` on the total.
fn total_lower(store: &StoreLimits, documents: &StoreLimits) -> bool {
    store.total_micros < documents.total_micros
}

/// Whether `store` enforces less than `documents` per day (no `per_day` is no limit).
fn per_day_lower(store: &StoreLimits, documents: &StoreLimits) -> bool {
    match (store.per_day_micros, documents.per_day_micros) {
        (Some(s), Some(d)) => s < d,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

fn store_lower_text(mandate: &str, store: &StoreLimits, documents: &StoreLimits) -> String {
    let mut figures = Vec::new();
    if total_lower(store, documents) {
        figures.push(format!(
            "total {} in the store, {} in the documents",
            money(store.total_micros),
            money(documents.total_micros)
        ));
    }
    if per_day_lower(store, documents) {
        figures.push(format!(
            "per day {} in the store, {} in the documents",
            per_day(store.per_day_micros),
            per_day(documents.per_day_micros)
        ));
    }
    // The command sets the store to the documents' figures exactly: without `--per-day`
    // `raise` keeps the store's day limit, so documents with none say `--no-per-day`.
    let day_flag = match (documents.per_day_micros, store.per_day_micros) {
        (Some(d), _) => format!(" --per-day {}", money(d)),
        (None, Some(_)) => " --no-per-day".to_owned(),
        (None, None) => String::new(),
    };
    format!(
        "the store enforces lower limits for mandate `{mandate}` than its documents say: {}. A publish can only \
         lower the store's copy, so documents raised on their own change nothing. Raise the store with \
         `holon ledger raise --store URL --mandate {mandate} --total {}{day_flag}`, or lower the documents \
         to the store's figures",
        figures.join("; "),
        money(documents.total_micros)
    )
}

/// Checks the limits the documents give `mandate` against those the store enforces. A
/// store copy equal to the documents' or higher is fine (the next publish lowers it), and
/// so is a mandate the store does not hold yet (its first publish registers it). A store
/// copy lower than the documents' is [`LimitsCheckError::StoreLower`], naming both
/// figures and the command that raises the store. Reads only (`status`): nothing is
/// written.
pub fn check_limits(store: &dyn LedgerStore, mandate: &str, documents: StoreLimits) -> Result<(), LimitsCheckError> {
    let stored = match store.status(Some(mandate)) {
        Ok(all) => all.into_iter().find(|s| s.mandate == mandate).map(|s| s.limits),
        Err(StoreError::UnknownMandate(_)) => None,
        Err(source) => return Err(LimitsCheckError::Store { mandate: mandate.to_owned(), source }),
    };
    match stored {
        Some(store) if total_lower(&store, &documents) || per_day_lower(&store, &documents) => {
            Err(LimitsCheckError::StoreLower { mandate: mandate.to_owned(), store, documents })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{FlushEntry, FlushOutcome, GrantRequest, Lease, MandateStatus, MemoryStore, Reconciled};

    const fn limits(total_micros: u64, per_day_micros: Option<u64>) -> StoreLimits {
        StoreLimits { total_micros, per_day_micros }
    }

    /// Every case on one store: what it enforces, what the documents say, and whether
    /// they disagree. Nothing the check does changes what the store holds.
    fn the_cases(store: &dyn LedgerStore) {
        assert!(check_limits(store, "new", limits(1_000_000, None)).is_ok(), "not in the store yet");
        let cases: [(StoreLimits, StoreLimits, bool); 8] = [
            (limits(5_000_000, None), limits(5_000_000, None), false),
            (limits(5_000_000, None), limits(4_000_000, None), false),
            (limits(5_000_000, None), limits(8_000_000, None), true),
            (limits(5_000_000, Some(1_000_000)), limits(5_000_000, Some(1_000_000)), false),
            (limits(5_000_000, Some(1_000_000)), limits(5_000_000, Some(500_000)), false),
            (limits(5_000_000, Some(1_000_000)), limits(5_000_000, Some(2_000_000)), true),
            (limits(5_000_000, Some(1_000_000)), limits(5_000_000, None), true),
            (limits(5_000_000, None), limits(5_000_000, Some(1_000_000)), false),
        ];
        for (n, (stored, documents, disagree)) in cases.into_iter().enumerate() {
            let mandate = format!("m{n}");
            store.publish_limits(&mandate, stored, true).unwrap();
            let before = store.status(None).unwrap();
            let result = check_limits(store, &mandate, documents);
            assert_eq!(store.status(None).unwrap(), before, "case {n} wrote");
            assert_eq!(result.is_err(), disagree, "case {n}: {stored:?} in the store, {documents:?} in the documents");
        }
        // The words: both figures as money, and the command with the documents' figures.
        let err = check_limits(store, "m2", limits(8_000_000, None)).unwrap_err().to_string();
        assert!(err.contains("total 5.00 in the store, 8.00 in the documents"), "{err}");
        assert!(err.contains("holon ledger raise --store URL --mandate m2 --total 8.00`"), "{err}");
        assert!(err.contains("or lower the documents"), "{err}");
        let err = check_limits(store, "m5", limits(5_000_000, Some(2_000_000))).unwrap_err().to_string();
        assert!(err.contains("per day 1.00 in the store, 2.00 in the documents"), "{err}");
        assert!(!err.contains("total 5.00 in the store"), "the totals agree: {err}");
        assert!(err.contains("--mandate m5 --total 5.00 --per-day 2.00`"), "{err}");
        let err = check_limits(store, "m6", limits(5_000_000, None)).unwrap_err().to_string();
        assert!(err.contains("per day 1.00 in the store, none in the documents"), "{err}");
        assert!(err.contains("--total 5.00 --no-per-day`"), "{err}");
        // Once the operator raised the store, they agree.
        store.publish_limits("m2", limits(8_000_000, None), true).unwrap();
        assert!(check_limits(store, "m2", limits(8_000_000, None)).is_ok());
    }

    #[test]
    fn the_memory_store_lower_than_the_documents_is_found() {
        the_cases(&MemoryStore::new());
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn the_sqlite_store_lower_than_the_documents_is_found() {
        let dir = std::env::temp_dir().join(format!("holon-check-limits-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = crate::store::sqlite::SqliteStore::open(&dir.join("ledger.db")).unwrap();
        the_cases(&store);
        drop(store);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_store_that_cannot_be_read_is_an_error_not_a_pass() {
        struct Down;
        impl LedgerStore for Down {
            fn publish_limits(&self, _: &str, _: StoreLimits, _: bool) -> Result<StoreLimits, StoreError> {
                Err(StoreError::Unavailable("down".into()))
            }
            fn grant(&self, _: &GrantRequest) -> Result<Option<Lease>, StoreError> {
                Err(StoreError::Unavailable("down".into()))
            }
            fn flush(&self, _: &str, _: &[FlushEntry], _: i64) -> Result<Vec<FlushOutcome>, StoreError> {
                Err(StoreError::Unavailable("down".into()))
            }
            fn reconcile(&self, _: &str, _: i64, _: bool) -> Result<Reconciled, StoreError> {
                Err(StoreError::Unavailable("down".into()))
            }
            fn status(&self, _: Option<&str>) -> Result<Vec<MandateStatus>, StoreError> {
                Err(StoreError::Unavailable("down".into()))
            }
            fn hold(&self, _: &crate::store::HeldCall) -> Result<(), StoreError> {
                Err(StoreError::Unavailable("down".into()))
            }
            fn take_held(&self, _: &str, _: i64) -> Result<Option<crate::store::HeldCall>, StoreError> {
                Err(StoreError::Unavailable("down".into()))
            }
            fn held_calls(&self, _: Option<&str>, _: i64) -> Result<Vec<crate::store::HeldCall>, StoreError> {
                Err(StoreError::Unavailable("down".into()))
            }
            fn release_held(&self, _: &str) -> Result<(), StoreError> {
                Err(StoreError::Unavailable("down".into()))
            }
        }
        let err = check_limits(&Down, "m", limits(1, None)).unwrap_err();
        assert!(matches!(err, LimitsCheckError::Store { .. }), "{err:?}");
    }
}
