//! Per-run tokens (DESIGN §13): what admits a box's call back to its node — the tool bridge's
//! `POST /mcp/{token}`, the OTLP receiver's `POST /otlp/{token}/…` — without handing the box any
//! credential of the fleet's. A token names one run's job and one audience, expires, and is
//! signed with a key derived from a keyring key for that audience alone, so a token minted for
//! the OTLP receiver admits nothing at the bridge.
//!
//! Form: `bfr1.{key id}.{payload}.{mac}`, the payload base64url JSON
//! `{aud, turn_id, launch_id, exp}`, the MAC HMAC-SHA256 over `bfr1.{key id}.{payload}` under
//! `HMAC-SHA256(key secret, "boxfleet run token/" + aud)`, compared in constant time.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use ring::hmac;
use serde::{Deserialize, Serialize};

use crate::keyring::{Keyring, KeyringError};

const PREFIX: &str = "bfr1";

/// What a run token admits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunGrant {
    /// the endpoint it is for (`mcp`, `otlp`)
    pub aud: String,
    pub turn_id: String,
    pub launch_id: String,
    /// seconds since the epoch
    pub exp: i64,
}

fn audience_key(secret: &[u8], aud: &str) -> hmac::Key {
    let master = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let derived = hmac::sign(&master, format!("boxfleet run token/{aud}").as_bytes());
    hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref())
}

/// Mints a token for `grant` with the keyring's signing key.
pub fn mint(ring: &Keyring, grant: &RunGrant) -> String {
    let kid = ring.signing_key();
    let secret = ring.key(kid).map(|key| key.secret()).unwrap_or_default();
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(grant).unwrap_or_default());
    let signed = format!("{PREFIX}.{kid}.{payload}");
    let mac = hmac::sign(&audience_key(secret, &grant.aud), signed.as_bytes());
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(mac.as_ref()))
}

/// Verifies a token for audience `aud` at `now`: signed by a key of the ring that is not
/// retired, for this audience, not expired.
pub fn verify(
    ring: &Keyring,
    token: &str,
    aud: &str,
    now: DateTime<Utc>,
) -> Result<RunGrant, KeyringError> {
    let malformed = |why: &str| KeyringError::Malformed(format!("run token: {why}"));
    let mut parts = token.split('.');
    let (Some(prefix), Some(kid), Some(payload), Some(mac), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(malformed("not four dot-separated parts"));
    };
    if prefix != PREFIX {
        return Err(malformed("not a boxfleet run token"));
    }
    let key = ring
        .key(kid)
        .ok_or_else(|| KeyringError::UnknownKey(kid.to_owned()))?;
    if key.retired {
        return Err(KeyringError::RetiredKey(kid.to_owned()));
    }
    let mac = URL_SAFE_NO_PAD
        .decode(mac)
        .map_err(|_| malformed("its signature is not base64url"))?;
    let signed = format!("{prefix}.{kid}.{payload}");
    hmac::verify(&audience_key(key.secret(), aud), signed.as_bytes(), &mac)
        .map_err(|_| KeyringError::BadSignature)?;
    let body = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| malformed("its payload is not base64url"))?;
    let grant: RunGrant =
        serde_json::from_slice(&body).map_err(|_| malformed("its payload is not a grant"))?;
    if grant.aud != aud {
        return Err(KeyringError::BadSignature);
    }
    if grant.exp <= now.timestamp() {
        return Err(KeyringError::Expired);
    }
    Ok(grant)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(aud: &str, exp: i64) -> RunGrant {
        RunGrant {
            aud: aud.into(),
            turn_id: "turn-1".into(),
            launch_id: "launch-1".into(),
            exp,
        }
    }

    #[test]
    fn a_token_admits_its_run_at_its_audience_until_it_expires() {
        let ring = Keyring::generate(Utc::now());
        let now = Utc::now();
        let token = mint(&ring, &grant("mcp", now.timestamp() + 60));
        assert_eq!(
            verify(&ring, &token, "mcp", now).expect("admits"),
            grant("mcp", now.timestamp() + 60)
        );
        assert_eq!(
            verify(&ring, &token, "otlp", now),
            Err(KeyringError::BadSignature),
            "another audience's key"
        );
        let later = now + chrono::Duration::seconds(61);
        assert_eq!(
            verify(&ring, &token, "mcp", later),
            Err(KeyringError::Expired)
        );
    }

    #[test]
    fn an_altered_a_foreign_or_a_retired_keys_token_admits_nothing() {
        let mut ring = Keyring::generate(Utc::now());
        let now = Utc::now();
        let token = mint(&ring, &grant("mcp", now.timestamp() + 60));
        let mut parts: Vec<&str> = token.split('.').collect();
        let other = URL_SAFE_NO_PAD.encode(
            serde_json::to_vec(&RunGrant {
                turn_id: "turn-2".into(),
                ..grant("mcp", now.timestamp() + 60)
            })
            .expect("json"),
        );
        parts[2] = &other;
        assert_eq!(
            verify(&ring, &parts.join("."), "mcp", now),
            Err(KeyringError::BadSignature)
        );
        let foreign = Keyring::generate(now);
        assert!(verify(&foreign, &token, "mcp", now).is_err());
        let old = ring.signing_key().to_owned();
        ring.rotate(now);
        ring.retire(&old).expect("retire");
        assert_eq!(
            verify(&ring, &token, "mcp", now),
            Err(KeyringError::RetiredKey(old))
        );
        assert!(matches!(
            verify(&ring, "bfr1.x", "mcp", now),
            Err(KeyringError::Malformed(_))
        ));
    }
}
