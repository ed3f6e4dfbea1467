//! Fuzz targets on what a stranger can send: any text as a bearer credential, any text as a
//! run token, is refused (or, for a credential this ring signed, verified) without a panic.
//! bolero runs them as tests on stable (random inputs); `cargo bolero test` runs them under a
//! real fuzzer.

use boxfleet_auth::Keyring;
use boxfleet_auth::run_token;

#[test]
fn any_text_as_a_credential_is_refused_without_a_panic() {
    let ring = Keyring::generate(chrono::Utc::now());
    bolero::check!().for_each(|bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes);
        // only a credential this ring signed verifies; a stranger's bytes never do
        assert!(ring.verify(&text).is_err());
        let _ = run_token::verify(&ring, &text, "mcp", chrono::Utc::now());
    });
}

#[test]
fn a_signed_credential_with_any_byte_changed_is_refused() {
    let ring = Keyring::generate(chrono::Utc::now());
    let token = ring.issue(
        "ada",
        boxfleet_auth::Role::Operator,
        &[],
        std::time::Duration::from_secs(3600),
        chrono::Utc::now(),
    );
    bolero::check!()
        .with_type::<(usize, u8)>()
        .for_each(|(at, byte)| {
            let mut bytes = token.clone().into_bytes();
            let at = at % bytes.len();
            if bytes[at] == *byte {
                return;
            }
            bytes[at] = *byte;
            let altered = String::from_utf8_lossy(&bytes);
            // base64's last character can carry unused bits; anything that still verifies
            // must verify to the same claims
            if let Ok(principal) = ring.verify(&altered) {
                assert_eq!(principal.subject, "ada");
                assert_eq!(principal.role, boxfleet_auth::Role::Operator);
            }
        });
}
