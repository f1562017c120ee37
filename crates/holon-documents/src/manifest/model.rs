//! The typed agent manifest (`holon.yaml`), one struct per section of the document.
//! Shapes only: the rules that relate fields to each other live in `validate.rs`.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::money::{Amount, Currency, Fixed6};
use crate::pattern::{AgentId, ClassName, PatternError};
use crate::time::Retention;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub holon: String,
    pub id: AgentId,
    pub version: semver::Version,
    /// Short title (docs/rulings.md, "Document shapes": allowed for search).
    #[serde(default)]
    pub name: Option<String>,
    /// Free text for search relevance, at most a few KiB.
    #[serde(default)]
    pub description: Option<String>,
    pub license: String,
    pub authors: Vec<Author>,
    pub source: Source,
    pub interface: Interface,
    pub capabilities: Vec<Capability>,
    pub pricing: Pricing,
    pub runtime: Runtime,
    pub data: DataPolicy,
    #[serde(default)]
    pub calls: Vec<DeclaredCall>,
    #[serde(default)]
    pub lineage: Option<Lineage>,
    #[serde(default)]
    pub fork_policy: Option<ForkPolicy>,
    pub examples: Vec<Example>,
    /// The document's canonical form as read: what the publisher's provenance signature
    /// covers (docs/trust.md). `None` for a manifest built in code.
    #[serde(skip)]
    /// Set by the document pipeline (`holon::documents`) from the value it parsed; a
    /// document built or edited in code has `None` (or a form that no longer describes
    /// it, which the `_if_unchanged` digests see).
    pub canonical: Option<crate::sign::canonical::Canonical>,
}

impl Manifest {
    /// The digest of the canonical form it was read from, only if it is still what was
    /// read (`None` once edited in code, or for a manifest built in code).
    pub fn digest_if_unchanged(&self) -> Option<crate::sign::canonical::Digest> {
        self.canonical.as_ref().filter(|c| c.still_describes(self)).map(|c| c.digest())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Author {
    pub name: String,
    pub kind: AuthorKind,
    #[serde(default)]
    pub contact: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthorKind {
    Human,
    Organization,
    Agent,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub repository: String,
    #[serde(rename = "ref")]
    pub git_ref: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interface {
    pub input: Value,
    pub output: Value,
    #[serde(default)]
    pub errors: Vec<DeclaredError>,
    pub modes: Vec<Mode>,
    #[serde(default)]
    pub clarification: bool,
    #[serde(default)]
    pub cancellable: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredError {
    pub code: String,
    pub retryable: bool,
    pub billed: bool,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Sync,
    Async,
    Stream,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capability {
    pub class: ClassName,
    #[serde(default)]
    pub implements: Option<String>,
    #[serde(default)]
    pub params: Option<Value>,
    #[serde(default)]
    pub evals: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PricingModel {
    Free,
    PerRun,
    PerUnit,
    Quote,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChargeOn {
    Success,
    Attempt,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    pub model: PricingModel,
    #[serde(default)]
    pub amount: Option<Amount>,
    #[serde(default)]
    pub unit: Option<String>,
    #[serde(default)]
    pub max: Option<Amount>,
    #[serde(default)]
    pub currency: Option<Currency>,
    #[serde(default)]
    pub charge_on: Option<ChargeOn>,
    #[serde(default)]
    pub downstream: Option<Downstream>,
}

impl Pricing {
    /// The most one run can cost before downstream calls (docs/rulings.md, "Worst case"):
    /// `free` 0; `per_run` `amount`; `per_unit` and `quote` `max`. `None` when the field
    /// the model needs is missing (the validator reports it; admission denies).
    pub fn ceiling(&self) -> Option<Amount> {
        match self.model {
            PricingModel::Free => Some(Amount::ZERO),
            PricingModel::PerRun => self.amount,
            PricingModel::PerUnit | PricingModel::Quote => self.max,
        }
    }
    /// `charge_on`, defaulting to `success` as the document recommends.
    pub fn charge_on(&self) -> ChargeOn {
        self.charge_on.unwrap_or(ChargeOn::Success)
    }
    /// The passthrough cap billed on top of the ceiling, if any.
    pub fn passthrough_cap(&self) -> Option<Amount> {
        match &self.downstream {
            Some(Downstream { mode: DownstreamMode::Passthrough, cap }) => *cap,
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DownstreamMode {
    Included,
    Passthrough,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Downstream {
    pub mode: DownstreamMode,
    #[serde(default)]
    pub cap: Option<Amount>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeKind {
    Container,
    Mcp,
    A2a,
}

impl RuntimeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeKind::Container => "container",
            RuntimeKind::Mcp => "mcp",
            RuntimeKind::A2a => "a2a",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runtime {
    pub kind: RuntimeKind,
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub models: Vec<String>,
    pub limits: RuntimeLimits,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeLimits {
    /// Hard kill after this many seconds; also bounds how long a reservation may live.
    pub timeout_s: u64,
    #[serde(default)]
    pub memory_mb: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataPolicy {
    pub retention: Retention,
    pub training_use: bool,
    #[serde(default)]
    pub egress: Vec<String>,
}

/// A declared downstream call: a capability (any implementer) or an agent and range.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredCall {
    #[serde(default)]
    pub capability: Option<ClassName>,
    #[serde(default)]
    pub agent: Option<AgentRef>,
    /// The most one such call may cost, in the manifest's pricing currency.
    pub max_cost: Amount,
}

/// `namespace/name@range`, e.g. `acme/company-lookup@^1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AgentRef {
    pub id: AgentId,
    pub range: semver::VersionReq,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error(transparent)]
    Id(#[from] PatternError),
    #[error("`{0}` needs a SemVer version or range after `@`, like `acme/company-lookup@^1`")]
    Range(String),
    #[error("`{0}` needs an exact SemVer version after `@`, like `acme/table-extract@2.3.1`")]
    Version(String),
}

impl AgentRef {
    pub fn parse(s: &str) -> Result<Self, RefError> {
        let (id, range) = s.split_once('@').ok_or_else(|| RefError::Range(s.to_owned()))?;
        let id = AgentId::parse(id)?;
        let range = semver::VersionReq::parse(range).map_err(|_| RefError::Range(s.to_owned()))?;
        Ok(AgentRef { id, range, text: s.to_owned() })
    }
}
impl TryFrom<String> for AgentRef {
    type Error = RefError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        AgentRef::parse(&s)
    }
}
impl From<AgentRef> for String {
    fn from(r: AgentRef) -> String {
        r.text
    }
}
impl fmt::Display for AgentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `namespace/name@version`, exact (lineage).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AgentVersion {
    pub id: AgentId,
    pub version: semver::Version,
}
impl TryFrom<String> for AgentVersion {
    type Error = RefError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        let (id, version) = s.split_once('@').ok_or_else(|| RefError::Version(s.clone()))?;
        let id = AgentId::parse(id)?;
        let version = semver::Version::parse(version).map_err(|_| RefError::Version(s.clone()))?;
        Ok(AgentVersion { id, version })
    }
}
impl From<AgentVersion> for String {
    fn from(v: AgentVersion) -> String {
        format!("{}@{}", v.id, v.version)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lineage {
    pub forked_from: AgentVersion,
    pub royalty: Fixed6,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkPolicy {
    pub min_royalty: Fixed6,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    #[serde(default)]
    pub name: Option<String>,
    pub input: Value,
    #[serde(default)]
    pub output: Option<Value>,
    #[serde(default)]
    pub error: Option<String>,
}

impl Manifest {
    /// Every capability class this agent declares.
    pub fn classes(&self) -> impl Iterator<Item = &ClassName> {
        self.capabilities.iter().map(|c| &c.class)
    }
}
