//! Pre-shared-key challenge/response, one scheme for every nsperf service that takes a key
//! (`nsperf server`, `nsperf agent`): the service sends 32 random bytes from the operating
//! system, the peer answers HMAC-SHA256(key, context ‖ nonce) in hex. The key never crosses the
//! wire, a recorded answer is useless for another nonce, and the context string keeps an answer
//! made for one service useless for another (RFC 2104 for HMAC).

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Which service a challenge belongs to; part of every answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context(&'static [u8]);

impl Context {
    /// `nsperf server`'s control protocol.
    pub const SERVER: Context = Context(b"nsperf-psk-v1");
    /// `nsperf agent`'s coordinator sessions.
    pub const AGENT: Context = Context(b"nsperf-agent-v1");

    fn mac(self, key: &[u8], nonce: &[u8]) -> HmacSha256 {
        let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
        m.update(self.0);
        m.update(nonce);
        m
    }

    /// The answer to a challenge `nonce`, in hex.
    pub fn answer(self, key: &[u8], nonce: &[u8]) -> String {
        hex(&self.mac(key, nonce).finalize().into_bytes())
    }

    /// Whether `mac_hex` answers `nonce` under `key` (compared in constant time).
    pub fn verify(self, key: &[u8], nonce: &[u8], mac_hex: &str) -> bool {
        unhex(mac_hex).is_some_and(|mac| self.mac(key, nonce).verify_slice(&mac).is_ok())
    }
}

/// Draws `N` random bytes from the operating system (`getrandom(2)`): challenge nonces and
/// cookies. There is no fallback to a clock: a service without randomness refuses to serve.
pub fn os_random<const N: usize>() -> Result<[u8; N], String> {
    random_from(getrandom::fill)
}

fn random_from<const N: usize>(
    fill: impl FnOnce(&mut [u8]) -> Result<(), getrandom::Error>,
) -> Result<[u8; N], String> {
    let mut b = [0u8; N];
    fill(&mut b).map_err(|e| format!("the operating system's random source failed: {e}"))?;
    Ok(b)
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Parses lowercase or uppercase hex of at most 512 bytes; `None` on odd length, a non-hex
/// digit or more.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || s.len() > 1024 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_rejects_garbage() {
        assert_eq!(hex(&[0, 0xab, 0xff]), "00abff");
        assert_eq!(unhex("00ABff"), Some(vec![0, 0xab, 0xff]));
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("é1"), None);
        assert_eq!(unhex(&"00".repeat(513)), None);
    }

    #[test]
    fn an_answer_holds_only_for_its_key_nonce_and_context() {
        let (key, nonce) = (b"k".as_slice(), [1u8; 32]);
        let a = Context::AGENT.answer(key, &nonce);
        assert!(Context::AGENT.verify(key, &nonce, &a));
        assert!(!Context::SERVER.verify(key, &nonce, &a));
        assert!(!Context::AGENT.verify(b"other", &nonce, &a));
        assert!(!Context::AGENT.verify(key, &[2u8; 32], &a));
        assert!(!Context::AGENT.verify(key, &nonce, "not hex"));
    }

    #[test]
    fn randomness_fails_hard_without_a_source() {
        let a = os_random::<32>().unwrap();
        let b = os_random::<32>().unwrap();
        assert_ne!(a, b);
        let e = random_from::<32>(|_| Err(getrandom::Error::UNSUPPORTED)).unwrap_err();
        assert!(e.contains("random source failed"), "{e}");
    }
}
