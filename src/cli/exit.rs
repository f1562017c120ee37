//! Exit codes shared by every verb (of `holon` and of `holon-job`).

pub(crate) const OK: u8 = 0;
pub(crate) const FAILED: u8 = 1;
pub(crate) const BAD_INPUT: u8 = 2;
pub(crate) const HELD: u8 = 3;
