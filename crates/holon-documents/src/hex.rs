//! Lower-case hex, the one encoding of bytes as text holon writes (SHA-256 digests of
//! documents, approved job mandates, pinned secrets and keyed requests; token hashes).

use sha2::{Digest, Sha256};

/// Lower-case hex of `bytes`, two digits a byte, in one allocation (a `format!` per byte
/// cost 8% of the server's time when every keyed request was hexed that way; a
/// `char::from_digit` per nibble, 1.8% of a keyed request's instructions: now ASCII
/// arithmetic).
pub fn lower(bytes: &[u8]) -> String {
    // A nibble (0 to 15) as its digit.
    let digit = |n: u8| char::from(if n < 10 { b'0' + n } else { b'a' + (n - 10) });
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(digit(b >> 4));
        out.push(digit(b & 0xf));
    }
    out
}

/// The SHA-256 of `bytes`, in lower-case hex (64 characters).
pub fn sha256(bytes: &[u8]) -> String {
    lower(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_lower_case_digits_a_byte() {
        assert_eq!(lower(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
        assert_eq!(sha256(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let every: Vec<u8> = (0..=255).collect();
        let formatted: String = every.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(lower(&every), formatted, "every byte as `format!` writes it");
    }
}
