//! Plan identity: a plan's state lives under the SHA-256 of its canonical path relative to its
//! plan workspace, `/`-separated. Two aliases of one file share a key; equal content at two
//! paths does not.

use sha2::{Digest, Sha256};

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The plan key for a workspace-relative path given as components (`["docs", "plan.md"]`).
pub fn plan_key<'a>(relative_components: impl IntoIterator<Item = &'a str>) -> String {
    let joined: Vec<&str> = relative_components.into_iter().collect();
    sha256_hex(joined.join("/").as_bytes())
}

/// True for a lowercase 64-digit hex string.
pub(crate) fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digest() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn key_joins_with_slash() {
        assert_eq!(plan_key(["docs", "plan.md"]), sha256_hex(b"docs/plan.md"));
        assert_ne!(plan_key(["docs", "a.md"]), plan_key(["other", "a.md"]));
        assert!(is_sha256_hex(&plan_key(["p.md"])));
        assert!(!is_sha256_hex("ABC"));
    }
}
