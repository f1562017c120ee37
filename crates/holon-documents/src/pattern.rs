//! Identifiers and the patterns that match them (docs/rulings.md, "Matching").
//!
//! - capability classes are dotted lower-case names: `extraction.table`;
//! - class patterns: `a.b` exactly, `a.*` every class strictly below `a`, `*` every class;
//! - agent ids are `namespace/name`; agent patterns: the id, `ns/*`, or `*`;
//! - pattern P *covers* Q when every class or id that Q matches, P matches (attenuation).

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Longest accepted id, class or pattern: they are keys, not prose.
pub const NAME_BYTES_MAX: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PatternError {
    #[error("`{0}` is not an agent id: use `namespace/name` in lower case, like `acme/table-extract`")]
    AgentId(String),
    #[error("`{0}` is not an account or agent: use `name` for a person or organization, `namespace/name` for an agent")]
    Principal(String),
    #[error("`{0}` is not a capability class: use dotted lower-case words, like `extraction.table`")]
    Class(String),
    #[error("`{0}` is not a class pattern: use `extraction.table`, `extraction.*` or `*`")]
    ClassPattern(String),
    #[error("`{0}` is not an agent pattern: use `namespace/name`, `namespace/*` or `*`")]
    AgentPattern(String),
}

fn truncated(s: &str) -> String {
    s.chars().take(NAME_BYTES_MAX).collect()
}

/// One segment of a namespace or name: `[a-z0-9][a-z0-9._-]*`.
fn is_segment(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.'))
}

/// One word of a capability class: `[a-z][a-z0-9_-]*`.
fn is_class_word(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_'))
}

pub fn is_class_name(s: &str) -> bool {
    s.len() <= NAME_BYTES_MAX && s.split('.').all(is_class_word)
}

/// An agent id, `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AgentId(String);

impl AgentId {
    pub fn parse(s: &str) -> Result<Self, PatternError> {
        match s.split_once('/') {
            Some((ns, name)) if s.len() <= NAME_BYTES_MAX && is_segment(ns) && is_segment(name) => {
                Ok(AgentId(s.to_owned()))
            }
            _ => Err(PatternError::AgentId(truncated(s))),
        }
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub fn namespace(&self) -> &str {
        self.0.split_once('/').map_or("", |(ns, _)| ns)
    }
}

impl TryFrom<String> for AgentId {
    type Error = PatternError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        AgentId::parse(&s)
    }
}
impl From<AgentId> for String {
    fn from(a: AgentId) -> String {
        a.0
    }
}
impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who issues or holds a mandate: a person/organization account (`alice`) or an agent
/// (`alice/assistant`). Only an account can approve a held call.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Principal(String);

impl Principal {
    pub fn parse(s: &str) -> Result<Self, PatternError> {
        let ok = s.len() <= NAME_BYTES_MAX
            && match s.split_once('/') {
                Some((ns, name)) => is_segment(ns) && is_segment(name),
                None => is_segment(s),
            };
        if ok { Ok(Principal(s.to_owned())) } else { Err(PatternError::Principal(truncated(s))) }
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub fn is_agent(&self) -> bool {
        self.0.contains('/')
    }
    /// The namespace an account owns, or an agent lives in.
    pub fn namespace(&self) -> &str {
        self.0.split_once('/').map_or(self.0.as_str(), |(ns, _)| ns)
    }
}
impl From<AgentId> for Principal {
    fn from(a: AgentId) -> Self {
        Principal(a.0)
    }
}
impl TryFrom<String> for Principal {
    type Error = PatternError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Principal::parse(&s)
    }
}
impl From<Principal> for String {
    fn from(p: Principal) -> String {
        p.0
    }
}
impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A capability class, `extraction.table`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ClassName(String);

impl ClassName {
    pub fn parse(s: &str) -> Result<Self, PatternError> {
        if is_class_name(s) { Ok(ClassName(s.to_owned())) } else { Err(PatternError::Class(truncated(s))) }
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}
impl TryFrom<String> for ClassName {
    type Error = PatternError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        ClassName::parse(&s)
    }
}
impl From<ClassName> for String {
    fn from(c: ClassName) -> String {
        c.0
    }
}
impl fmt::Display for ClassName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `is_strictly_below("a.b.c", "a")`: `child` is in the subtree of `root`, not `root` itself.
fn is_strictly_below(child: &str, root: &str) -> bool {
    child.len() > root.len() && child.starts_with(root) && child.as_bytes().get(root.len()) == Some(&b'.')
}

/// A capability class pattern.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ClassPattern {
    /// `*`
    Any,
    /// `a.b`
    Exact(String),
    /// `a.*`: holds `a`, matches strictly below it.
    Subtree(String),
}

impl ClassPattern {
    pub fn parse(s: &str) -> Result<Self, PatternError> {
        if s == "*" {
            return Ok(ClassPattern::Any);
        }
        if let Some(root) = s.strip_suffix(".*") {
            if is_class_name(root) {
                return Ok(ClassPattern::Subtree(root.to_owned()));
            }
        } else if is_class_name(s) {
            return Ok(ClassPattern::Exact(s.to_owned()));
        }
        Err(PatternError::ClassPattern(truncated(s)))
    }
    pub fn matches(&self, class: &str) -> bool {
        match self {
            ClassPattern::Any => true,
            ClassPattern::Exact(c) => c == class,
            ClassPattern::Subtree(root) => is_strictly_below(class, root),
        }
    }
    /// Every class `other` matches, `self` matches.
    pub fn covers(&self, other: &ClassPattern) -> bool {
        match (self, other) {
            (ClassPattern::Any, _) => true,
            (_, ClassPattern::Any) => false,
            (ClassPattern::Exact(a), ClassPattern::Exact(b)) => a == b,
            (ClassPattern::Exact(_), ClassPattern::Subtree(_)) => false,
            (ClassPattern::Subtree(root), ClassPattern::Exact(b)) => is_strictly_below(b, root),
            (ClassPattern::Subtree(root), ClassPattern::Subtree(b)) => b == root || is_strictly_below(b, root),
        }
    }
}
impl TryFrom<String> for ClassPattern {
    type Error = PatternError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        ClassPattern::parse(&s)
    }
}
impl From<ClassPattern> for String {
    fn from(p: ClassPattern) -> String {
        p.to_string()
    }
}
impl fmt::Display for ClassPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClassPattern::Any => f.write_str("*"),
            ClassPattern::Exact(c) => f.write_str(c),
            ClassPattern::Subtree(root) => write!(f, "{root}.*"),
        }
    }
}

/// An agent pattern.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum AgentPattern {
    /// `*`
    Any,
    /// `ns/*`
    Namespace(String),
    /// `ns/name`
    Exact(AgentId),
}

impl AgentPattern {
    pub fn parse(s: &str) -> Result<Self, PatternError> {
        if s == "*" {
            return Ok(AgentPattern::Any);
        }
        if let Some(ns) = s.strip_suffix("/*") {
            if is_segment(ns) && ns.len() <= NAME_BYTES_MAX {
                return Ok(AgentPattern::Namespace(ns.to_owned()));
            }
            return Err(PatternError::AgentPattern(truncated(s)));
        }
        AgentId::parse(s).map(AgentPattern::Exact).map_err(|_| PatternError::AgentPattern(truncated(s)))
    }
    pub fn matches(&self, agent: &AgentId) -> bool {
        match self {
            AgentPattern::Any => true,
            AgentPattern::Namespace(ns) => agent.namespace() == ns,
            AgentPattern::Exact(id) => id == agent,
        }
    }
    pub fn covers(&self, other: &AgentPattern) -> bool {
        match (self, other) {
            (AgentPattern::Any, _) => true,
            (_, AgentPattern::Any) => false,
            (AgentPattern::Namespace(a), AgentPattern::Namespace(b)) => a == b,
            (AgentPattern::Namespace(a), AgentPattern::Exact(id)) => id.namespace() == a,
            (AgentPattern::Exact(_), AgentPattern::Namespace(_)) => false,
            (AgentPattern::Exact(a), AgentPattern::Exact(b)) => a == b,
        }
    }
}
impl TryFrom<String> for AgentPattern {
    type Error = PatternError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        AgentPattern::parse(&s)
    }
}
impl From<AgentPattern> for String {
    fn from(p: AgentPattern) -> String {
        p.to_string()
    }
}
impl fmt::Display for AgentPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentPattern::Any => f.write_str("*"),
            AgentPattern::Namespace(ns) => write!(f, "{ns}/*"),
            AgentPattern::Exact(id) => f.write_str(id.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cp(s: &str) -> ClassPattern {
        ClassPattern::parse(s).unwrap()
    }
    fn ap(s: &str) -> AgentPattern {
        AgentPattern::parse(s).unwrap()
    }
    fn id(s: &str) -> AgentId {
        AgentId::parse(s).unwrap()
    }

    #[test]
    fn class_pattern_matching_follows_the_ruling() {
        assert!(cp("a.b").matches("a.b"));
        assert!(!cp("a.b").matches("a.b.c"));
        assert!(cp("a.*").matches("a.b"));
        assert!(cp("a.*").matches("a.b.c"));
        assert!(!cp("a.*").matches("a"));
        assert!(!cp("a.*").matches("ab.c"));
        assert!(cp("*").matches("anything.at.all"));
    }

    #[test]
    fn agent_pattern_matching() {
        assert!(ap("acme/x").matches(&id("acme/x")));
        assert!(!ap("acme/x").matches(&id("acme/y")));
        assert!(ap("acme/*").matches(&id("acme/y")));
        assert!(!ap("acme/*").matches(&id("acmex/y")));
        assert!(ap("*").matches(&id("z/z")));
    }

    #[test]
    fn bad_names_are_refused() {
        for bad in ["Acme/x", "acme", "acme/", "/x", "a/b/c", "acme/x y", ""] {
            assert!(AgentId::parse(bad).is_err(), "{bad}");
        }
        for bad in ["Extraction", "a..b", ".a", "a.", "a.*.b", "1a", "**", "a*"] {
            assert!(ClassPattern::parse(bad).is_err(), "{bad}");
        }
        for bad in ["acme/x*", "*/x", "acme", "acme/**"] {
            assert!(AgentPattern::parse(bad).is_err(), "{bad}");
        }
        assert!(Principal::parse("alice").is_ok());
        assert!(Principal::parse("alice/assistant").unwrap().is_agent());
        assert!(Principal::parse("Alice").is_err());
    }

    #[test]
    fn coverage() {
        assert!(cp("a.*").covers(&cp("a.b.*")));
        assert!(cp("a.*").covers(&cp("a.*")));
        assert!(!cp("a.*").covers(&cp("a")));
        assert!(!cp("a.b").covers(&cp("a.*")));
        assert!(!cp("a.*").covers(&cp("*")));
        assert!(ap("acme/*").covers(&ap("acme/x")));
        assert!(!ap("acme/x").covers(&ap("acme/*")));
        assert!(!ap("acme/*").covers(&ap("*")));
    }

    fn class_strategy() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(vec!["a", "b", "ab"]), 1..4).prop_map(|w| w.join("."))
    }
    fn class_pattern_strategy() -> impl Strategy<Value = ClassPattern> {
        prop_oneof![
            Just(ClassPattern::Any),
            class_strategy().prop_map(ClassPattern::Exact),
            class_strategy().prop_map(ClassPattern::Subtree),
        ]
    }

    proptest! {
        /// covers() is sound: if P covers Q then every class Q matches, P matches.
        #[test]
        fn class_cover_is_sound(p in class_pattern_strategy(), q in class_pattern_strategy(), c in class_strategy()) {
            if p.covers(&q) && q.matches(&c) {
                prop_assert!(p.matches(&c));
            }
        }
    }
}
