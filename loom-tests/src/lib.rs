//! Tests only: see tests/.
