//! Patterns compiled into sorted integer sets: an agent's classes ([`ClassSet`]) and a
//! mandate's class and agent patterns ([`ClassMatcher`], [`AgentMatcher`]), so that a match
//! is binary searches over interned words.

use smallvec::SmallVec;

use crate::engine::EngineError;
use crate::engine::symbols::{Names, Symbols};
use crate::pattern::{AgentPattern, ClassPattern};

type Syms = SmallVec<[u32; 4]>;

fn sorted(mut v: Syms) -> Syms {
    v.sort_unstable();
    v.dedup();
    v
}

/// Whether two sorted sets share an element.
fn intersects(a: &[u32], b: &[u32]) -> bool {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    small.iter().any(|x| large.binary_search(x).is_ok())
}

/// Classes as interned sets: the classes themselves and their strict ancestors
/// (`a`, `a.b` for `a.b.c`), so `a.b.*` matches when `a.b` is among the ancestors.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClassSet {
    exact: Syms,
    ancestors: Syms,
}

impl ClassSet {
    /// Whether the set holds no class (a declared agent no known manifest resolves).
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.exact.is_empty()
    }

    pub(super) fn of<'a>(classes: impl Iterator<Item = &'a str>, words: &Symbols) -> Result<Self, EngineError> {
        let (mut exact, mut ancestors) = (Syms::new(), Syms::new());
        for class in classes {
            exact.push(words.intern(class)?);
            for (i, b) in class.bytes().enumerate() {
                if b == b'.' {
                    ancestors.push(words.intern(class.get(..i).unwrap_or_default())?);
                }
            }
        }
        Ok(ClassSet { exact: sorted(exact), ancestors: sorted(ancestors) })
    }

    /// Whether `class` (an interned word) is one of the set's classes.
    pub(super) fn has(&self, class: u32) -> bool {
        self.exact.binary_search(&class).is_ok()
    }
}

/// `allow.capabilities` compiled.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClassMatcher {
    any: bool,
    exact: Syms,
    subtree: Syms,
}

impl ClassMatcher {
    pub(super) fn of(patterns: &[ClassPattern], words: &Symbols) -> Result<Self, EngineError> {
        let mut m = ClassMatcher::default();
        for p in patterns {
            match p {
                ClassPattern::Any => m.any = true,
                ClassPattern::Exact(c) => m.exact.push(words.intern(c)?),
                ClassPattern::Subtree(root) => m.subtree.push(words.intern(root)?),
            }
        }
        m.exact = sorted(m.exact);
        m.subtree = sorted(m.subtree);
        Ok(m)
    }
    // Always inlined: with issue #14's receipts LLVM stopped inlining it into `decide`
    // (+27 instructions per admit+settle in the gate).
    #[inline(always)]
    pub(super) fn matches(&self, set: &ClassSet) -> bool {
        self.any || intersects(&self.exact, &set.exact) || intersects(&self.subtree, &set.ancestors)
    }
}

/// Agent patterns compiled.
#[derive(Debug, Clone, Default)]
pub(crate) struct AgentMatcher {
    any: bool,
    namespaces: Syms,
    ids: Syms,
}

impl AgentMatcher {
    pub(super) fn of(patterns: &[AgentPattern], names: &Names) -> Result<Self, EngineError> {
        let mut m = AgentMatcher::default();
        for p in patterns {
            match p {
                AgentPattern::Any => m.any = true,
                AgentPattern::Namespace(ns) => m.namespaces.push(names.words.intern(ns)?),
                AgentPattern::Exact(id) => m.ids.push(names.agents.intern(id.as_str())?),
            }
        }
        m.namespaces = sorted(m.namespaces);
        m.ids = sorted(m.ids);
        Ok(m)
    }
    #[inline]
    pub(super) fn matches(&self, id: u32, ns: u32) -> bool {
        self.any || self.ids.binary_search(&id).is_ok() || self.namespaces.binary_search(&ns).is_ok()
    }
}
