//! The agent manifest (`holon.yaml`): what an agent offers.
mod interface_schema;
mod model;
mod validate;

pub use model::*;
pub use validate::{RESERVED_ERROR_CODES, validate};
