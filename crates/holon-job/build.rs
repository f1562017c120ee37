//! The SHA-256 of the job mandate schema this build carries, from the file itself at build
//! time (`HOLON_JOB_SCHEMA_SHA256`): an approval records it, and a check compares it to
//! skip the schema's pass for a version this build's schema already passed. Computed here
//! so that no process hashes the schema and no hand-kept copy can drift from it.

use sha2::{Digest, Sha256};

fn main() {
    let schema = "../../schema/holon-job-mandate.schema.json";
    println!("cargo::rerun-if-changed={schema}");
    let text = match std::fs::read(schema) {
        Ok(text) => text,
        Err(e) => panic!("the job mandate schema {schema} cannot be read: {e}"),
    };
    let hex: String = Sha256::digest(&text).iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo::rustc-env=HOLON_JOB_SCHEMA_SHA256={hex}");
}
