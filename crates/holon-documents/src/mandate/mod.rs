//! The caller mandate: what an agent may do on behalf of its issuer.
pub mod limits;
mod model;
mod validate;

pub use model::*;
pub use validate::validate;
