//! SMB2 message signatures (MS-SMB2 3.1.4.1) computed over a message in pieces, so a READ
//! reply can be verified where its parts landed (header in a small buffer, data in the
//! caller's buffer) without first gathering it into one: HMAC-SHA256 for 2.0.2 and 2.1,
//! AES-128-CMAC for 3.0 and 3.0.2 (and 3.1.1 without GMAC), AES-128-GMAC for 3.1.1 when
//! negotiated. The keys are the session's (`smb2::client::Session::signing_key`); the
//! per-key setup (AES key schedule, GHASH key) is done once, not per message.

use aes::Aes128;
use aes::cipher::{BlockCipherEncrypt, KeyInit};
use ghash::GHash;
use ghash::universal_hash::UniversalHash;
use smb2::crypto::signing::SigningAlgorithm;

/// Where the 16-byte signature sits in the SMB2 header.
pub(crate) const SIGNATURE_AT: usize = 48;

/// A signing key, ready to sign requests and verify replies.
#[derive(Clone)]
pub(crate) enum Signer {
    /// Unsigned session (guest or anonymous).
    None,
    /// HMAC-SHA256 truncated to 16 bytes.
    Hmac([u8; 16]),
    /// AES-128-CMAC.
    Cmac(Box<cmac::Cmac<Aes128>>),
    /// AES-128-GMAC: the cipher and GHASH keyed with H = AES(K, 0).
    Gmac(Box<(Aes128, GHash)>),
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Signer::None => "unsigned",
            Signer::Hmac(_) => "HMAC-SHA256",
            Signer::Cmac(_) => "AES-CMAC",
            Signer::Gmac(_) => "AES-GMAC",
        })
    }
}

/// GHASH over a byte stream fed in pieces of any length (blocks are carried across pieces).
struct Stream {
    hash: GHash,
    carry: [u8; 16],
    held: usize,
    total: u64,
}

impl Stream {
    fn update(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.held > 0 {
            let n = (16 - self.held).min(data.len());
            self.carry[self.held..self.held + n].copy_from_slice(&data[..n]);
            self.held += n;
            data = &data[n..];
            if self.held < 16 {
                return;
            }
            self.hash.update_padded(&self.carry);
            self.held = 0;
        }
        let whole = data.len() & !15;
        self.hash.update_padded(&data[..whole]);
        let rest = &data[whole..];
        self.carry[..rest.len()].copy_from_slice(rest);
        self.held = rest.len();
    }

    fn finish(mut self) -> [u8; 16] {
        if self.held > 0 {
            self.hash.update_padded(&self.carry[..self.held]);
        }
        // The lengths block: AAD bits, then ciphertext bits (none).
        let mut lens = [0u8; 16];
        lens[..8].copy_from_slice(&(self.total * 8).to_be_bytes());
        self.hash.update_padded(&lens);
        self.hash.finalize().into()
    }
}

impl Signer {
    /// The signer for `algorithm` with `key` (16 bytes), or an error naming what is wrong.
    pub(crate) fn new(algorithm: SigningAlgorithm, key: &[u8]) -> Result<Signer, &'static str> {
        let key: [u8; 16] = key.try_into().map_err(|_| "signing key is not 16 bytes")?;
        Ok(match algorithm {
            SigningAlgorithm::HmacSha256 => Signer::Hmac(key),
            SigningAlgorithm::AesCmac => Signer::Cmac(Box::new(
                <cmac::Cmac<Aes128> as cmac::KeyInit>::new_from_slice(&key)
                    .map_err(|_| "bad AES-CMAC key")?,
            )),
            SigningAlgorithm::AesGmac => {
                let aes = Aes128::new(&key.into());
                let mut h = aes::Block::default();
                aes.encrypt_block(&mut h);
                Signer::Gmac(Box::new((aes, GHash::new(&h))))
            }
        })
    }

    /// True when messages are signed.
    pub(crate) fn active(&self) -> bool {
        !matches!(self, Signer::None)
    }

    /// The signature of the message made of `parts` in order, whose first part starts with
    /// the 64-byte header with its signature field zeroed. `response`: signed by the server
    /// (the GMAC nonce's role bit); `cancel`: the message is a CANCEL.
    pub(crate) fn signature(
        &self,
        parts: &[&[u8]],
        message_id: u64,
        response: bool,
        cancel: bool,
    ) -> [u8; 16] {
        let mut out = [0u8; 16];
        match self {
            Signer::None => {}
            Signer::Hmac(key) => {
                use hmac::{KeyInit as _, Mac};
                let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(key) else {
                    return out;
                };
                for p in parts {
                    mac.update(p);
                }
                out.copy_from_slice(&mac.finalize().into_bytes()[..16]);
            }
            Signer::Cmac(proto) => {
                use cmac::Mac;
                let mut mac = (**proto).clone();
                for p in parts {
                    mac.update(p);
                }
                out.copy_from_slice(&mac.finalize().into_bytes());
            }
            Signer::Gmac(k) => {
                let (aes, ghash) = &**k;
                let mut s = Stream {
                    hash: ghash.clone(),
                    carry: [0; 16],
                    held: 0,
                    total: 0,
                };
                for p in parts {
                    s.update(p);
                }
                let tag = s.finish();
                // J0 = nonce (message id, role and CANCEL bits) || 0x00000001.
                let mut j0 = aes::Block::default();
                j0[..8].copy_from_slice(&message_id.to_le_bytes());
                j0[8] = u8::from(response) | (u8::from(cancel) << 1);
                j0[15] = 1;
                aes.encrypt_block(&mut j0);
                for i in 0..16 {
                    out[i] = tag[i] ^ j0[i];
                }
            }
        }
        out
    }

    /// Checks the signature `got` of a server's message made of `parts` (the header part
    /// with its signature zeroed). Constant time in the signature's bytes.
    pub(crate) fn verify(&self, parts: &[&[u8]], message_id: u64, got: &[u8; 16]) -> bool {
        if !self.active() {
            return true;
        }
        let want = self.signature(parts, message_id, true, false);
        want.iter().zip(got).fold(0u8, |a, (x, y)| a | (x ^ y)) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb2::crypto::signing::sign_message;

    fn message(len: usize) -> Vec<u8> {
        let mut m: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        m[SIGNATURE_AT..SIGNATURE_AT + 16].fill(0);
        m
    }

    /// The signature computed in pieces is the smb2 crate's over the whole message, for
    /// every algorithm and for splits that cut blocks anywhere.
    #[test]
    fn pieces_sign_like_the_crate() {
        let key: Vec<u8> = (1..=16).collect();
        for algo in [
            SigningAlgorithm::HmacSha256,
            SigningAlgorithm::AesCmac,
            SigningAlgorithm::AesGmac,
        ] {
            let s = Signer::new(algo, &key).unwrap();
            for len in [64, 65, 80, 113, 1000, 70_001] {
                let m = message(len);
                let mut reference = m.clone();
                sign_message(&mut reference, &key, algo, 42, false).unwrap();
                let want = &reference[SIGNATURE_AT..SIGNATURE_AT + 16];
                for cut in [64, 65, 79, 80, 96, len] {
                    let cut = cut.min(len);
                    let (a, b) = m.split_at(cut);
                    let (b1, b2) = b.split_at(b.len() / 3);
                    let got = s.signature(&[a, b1, b2], 42, false, false);
                    assert_eq!(&got[..], want, "{algo:?} len {len} cut {cut}");
                }
                // A server's signature differs from a client's only for GMAC (role bit).
                let server = s.signature(&[&m], 42, true, false);
                assert_eq!(server[..] == *want, algo != SigningAlgorithm::AesGmac);
                assert!(s.verify(&[&m], 42, &server));
                let mut bad = server;
                bad[15] ^= 1;
                assert!(!s.verify(&[&m], 42, &bad));
            }
        }
        assert!(Signer::new(SigningAlgorithm::AesCmac, &[0; 15]).is_err());
        assert!(Signer::None.verify(&[b"x"], 1, &[0; 16]));
    }
}
