//! The caller mandate: what an agent may do on behalf of its issuer.
mod model;
mod validate;

pub use model::*;
pub use validate::validate;
