//! The typed caller mandate. The shape is the one in docs/mandate.md, kept key for key,
//! because users and other tools write it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::manifest::RuntimeKind;
use crate::money::{Amount, Currency, Fixed6, FxRate};
use crate::pattern::{AgentPattern, ClassPattern, Principal};
use crate::sign::canonical::{Canonical, Digest};
use crate::sign::signature::SignatureBlock;
use crate::time::{Retention, Timestamp};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mandate {
    pub holon_mandate: String,
    pub id: String,
    /// Set on sub-mandates only.
    #[serde(default)]
    pub parent: Option<String>,
    pub issuer: Principal,
    pub grantee: Principal,
    pub valid: Validity,
    pub budget: Budget,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    pub allow: Allow,
    #[serde(default)]
    pub deny: Deny,
    #[serde(default)]
    pub require: Require,
    #[serde(default)]
    pub data: DataRules,
    #[serde(default)]
    pub delegation: Delegation,
    /// The issuer's signature over the canonical form of the document without this block
    /// (`holon mandate sign`; docs/trust.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<SignatureBlock>,
    /// The document's canonical form as read (`None` for one built in code, or one with a
    /// number that has no canonical form).
    #[serde(skip)]
    /// Set by the document pipeline (`holon::documents`) from the value it parsed; a
    /// document built or edited in code has `None` (or a form that no longer describes
    /// it, which the `_if_unchanged` digests see).
    pub canonical: Option<Canonical>,
}

/// How a sub-mandate names its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentRef<'a> {
    /// By id (`parent: alice/m-2026-11`).
    Id(&'a str),
    /// By the digest of the parent's canonical form (`parent: sha256:<hex>`): the form a
    /// signed chain uses, since an id names whatever document has it.
    Digest(Digest),
}

impl Mandate {
    /// The SHA-256 of the canonical form it was read from (how a child names it, and what
    /// its signature covers); `None` for a mandate built in code.
    pub fn digest(&self) -> Option<Digest> {
        self.canonical.as_ref().map(Canonical::digest)
    }

    /// [`Mandate::digest`] only if the mandate is still what was read: `None` once it was
    /// edited in code (a signature must not vouch for the edit).
    pub fn digest_if_unchanged(&self) -> Option<Digest> {
        self.canonical.as_ref().filter(|c| c.still_describes(self)).map(Canonical::digest)
    }

    /// How this mandate names its parent; `None` for a root mandate. A `sha256:` value
    /// that is not a digest is refused by the schema, so it is never read as an id.
    pub fn parent_ref(&self) -> Option<ParentRef<'_>> {
        let parent = self.parent.as_deref()?;
        Some(match parent.parse::<Digest>() {
            Ok(digest) => ParentRef::Digest(digest),
            Err(_) => ParentRef::Id(parent),
        })
    }

    /// Whether this mandate names `parent` as its parent, by id or by digest.
    pub fn names_as_parent(&self, parent: &Mandate) -> bool {
        match self.parent_ref() {
            Some(ParentRef::Id(id)) => id == parent.id,
            Some(ParentRef::Digest(d)) => parent.digest() == Some(d),
            None => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Validity {
    pub from: Timestamp,
    pub until: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    pub currency: Currency,
    pub total: Amount,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_call: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_day: Option<Amount>,
    /// 1 unit of the key currency = this many units of `currency`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fx: BTreeMap<Currency, FxRate>,
}

impl Budget {
    /// The rate from `from` into this budget's currency; the identity for its own.
    pub fn rate(&self, from: Currency) -> Option<FxRate> {
        if from == self.currency { Some(FxRate::ONE) } else { self.fx.get(&from).copied() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    pub above: Amount,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allow {
    #[serde(default)]
    pub capabilities: Vec<ClassPattern>,
    #[serde(default)]
    pub agents: Vec<AgentPattern>,
    #[serde(default)]
    pub published: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deny {
    #[serde(default)]
    pub agents: Vec<AgentPattern>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Require {
    #[serde(default)]
    pub charge_on_success: bool,
    /// Absent = any runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtimes: Option<Vec<RuntimeKind>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_success_rate: Option<Fixed6>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_latency_p95_s: Option<Fixed6>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_runs_30d: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_eval_score: Option<Fixed6>,
}

impl Require {
    /// Whether any measured threshold is set (an agent without a record then fails).
    pub fn has_thresholds(&self) -> bool {
        self.min_success_rate.is_some()
            || self.max_latency_p95_s.is_some()
            || self.min_runs_30d.is_some()
            || self.min_eval_score.is_some()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataRules {
    /// Absent = no limit on retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retention: Option<Retention>,
    /// `false` requires agents that do not train on the data; absent or `true` = no rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_use: Option<bool>,
    /// `false` requires agents with an empty `egress` list; absent or `true` = no rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_egress: Option<bool>,
}

impl DataRules {
    pub fn forbids_training(&self) -> bool {
        self.training_use == Some(false)
    }
    pub fn forbids_egress(&self) -> bool {
        self.allow_egress == Some(false)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delegation {
    #[serde(default)]
    pub max_depth: u32,
}
