//! Payments, shops and marketplaces, shipping and travel.

use super::row;
use crate::vendors::Rule;

pub(super) const ROWS: &[Rule] = &[
    // ---- shops ----
    // Shopify docs: Admin API access tokens `shpat_`, custom app tokens `shpca_`, private app
    // tokens `shppa_` and shared secrets `shpss_`, each 32 hex
    row(
        "Shopify",
        "shopify_access_token",
        &["shpat_"],
        r"shpat_[a-fA-F0-9]{32}",
    ),
    row(
        "Shopify",
        "shopify_custom_app_token",
        &["shpca_"],
        r"shpca_[a-fA-F0-9]{32}",
    ),
    row(
        "Shopify",
        "shopify_private_app_token",
        &["shppa_"],
        r"shppa_[a-fA-F0-9]{32}",
    ),
    row(
        "Shopify",
        "shopify_shared_secret",
        &["shpss_"],
        r"shpss_[a-fA-F0-9]{32}",
    ),
    // Etsy: API keystrings are 24 lower-case letters and digits
    keyed_row!(
        "Etsy",
        "etsy_api_key",
        ["ETSY_API_KEY", "ETSY_KEYSTRING"],
        r"[a-z0-9]{24}"
    ),
    // Adobe: OAuth client secrets `p8e-` and 32 letters and digits
    row(
        "Adobe",
        "adobe_client_secret",
        &["p8e-"],
        r"p8e-[A-Za-z0-9]{32}",
    ),
    // ---- payments ----
    // Square docs: access tokens `EAAA` and 60 base64url, or (older) `sq0atp-` and 22
    row(
        "Square",
        "square_access_token",
        &["EAAA", "sq0atp-"],
        r"EAAA[A-Za-z0-9_-]{60}|sq0atp-[A-Za-z0-9_-]{22}",
    ),
    // Square docs: application secrets `sq0csp-` and 43 base64url
    row(
        "Square",
        "square_application_secret",
        &["sq0csp-"],
        r"sq0csp-[A-Za-z0-9_-]{43}",
    ),
    // Plaid docs: access tokens `access-<environment>-` and a UUID
    row(
        "Plaid",
        "plaid_access_token",
        &[
            "access-sandbox-",
            "access-development-",
            "access-production-",
        ],
        concat!(r"access-(?:sandbox|development|production)-", uuid!()),
    ),
    // Razorpay docs: key ids `rzp_live_` / `rzp_test_` and 14 letters and digits
    row(
        "Razorpay",
        "razorpay_key_id",
        &["rzp_live_", "rzp_test_"],
        r"rzp_(?:live|test)_[A-Za-z0-9]{14}",
    ),
    // Razorpay: key secrets are 24 letters and digits
    keyed_row!(
        "Razorpay",
        "razorpay_key_secret",
        ["RAZORPAY_KEY_SECRET", "RAZORPAY_SECRET"],
        r"[A-Za-z0-9]{24}"
    ),
    // Flutterwave docs: secret keys `FLWSECK-` (or `FLWSECK_TEST-`), 32 hex and `-X`
    row(
        "Flutterwave",
        "flutterwave_secret_key",
        &["FLWSECK"],
        r"FLWSECK(?:_TEST)?-[a-fA-F0-9]{32}-X",
    ),
    // Flutterwave docs: encryption keys `FLWSECK` (or `FLWSECK_TEST`) and 12 hex
    row(
        "Flutterwave",
        "flutterwave_encryption_key",
        &["FLWSECK"],
        r"FLWSECK(?:_TEST)?[a-fA-F0-9]{12}",
    ),
    // Braintree (PayPal): access tokens `access_token$<environment>$<merchant id>$<32 hex>`
    row(
        "Braintree",
        "braintree_access_token",
        &["access_token$"],
        r"access_token\$(?:production|sandbox)\$[a-z0-9]{16}\$[a-f0-9]{32}",
    ),
    // Paddle docs: API keys `pdl_<live|sdbx>_apikey_`, a 26-character id, `_`, a 22-character
    // secret, `_`, a 3-character check
    row(
        "Paddle",
        "paddle_api_key",
        &["pdl_live_apikey_", "pdl_sdbx_apikey_", "pdl_test_apikey_"],
        r"pdl_(?:live|sdbx|test)_apikey_[a-z0-9]{26}_[A-Za-z0-9]{22}_[A-Za-z0-9]{3}",
    ),
    // Mollie docs: API keys `live_` / `test_` and 30 letters and digits (keyed: the prefix alone
    // is too common)
    keyed_row!(
        "Mollie",
        "mollie_api_key",
        ["MOLLIE_API_KEY", "MOLLIE_KEY"],
        r"(?:live|test)_[A-Za-z0-9]{30}"
    ),
    // GoCardless docs: access tokens `live_` / `sandbox_` and 40 base64url (keyed, likewise)
    keyed_row!(
        "GoCardless",
        "gocardless_access_token",
        ["GOCARDLESS_ACCESS_TOKEN", "GOCARDLESS_TOKEN"],
        r"(?:live|sandbox)_[A-Za-z0-9_=-]{40}"
    ),
    // Kraken: API private keys are 64 bytes in base64 (86 and `==`)
    keyed_row!(
        "Kraken",
        "kraken_private_key",
        ["KRAKEN_PRIVATE_KEY", "KRAKEN_API_SECRET", "KRAKEN_SECRET"],
        r"[A-Za-z0-9+/]{86}=="
    ),
    // ---- shipping, mail and travel ----
    // Lob docs: secret API keys `live_` / `test_` and 35 lower-case hex
    row(
        "Lob",
        "lob_api_key",
        &["live_", "test_"],
        r"(?:live|test)_[a-f0-9]{35}",
    ),
    // Lob docs: publishable keys `live_pub_` / `test_pub_` and 31 lower-case hex
    row(
        "Lob",
        "lob_publishable_key",
        &["live_pub_", "test_pub_"],
        r"(?:live|test)_pub_[a-f0-9]{31}",
    ),
    // Shippo: API tokens `shippo_live_` / `shippo_test_` and 40 hex
    row(
        "Shippo",
        "shippo_api_token",
        &["shippo_live_", "shippo_test_"],
        r"shippo_(?:live|test)_[a-fA-F0-9]{40}",
    ),
    // EasyPost: production (`EZAK`) and test (`EZTK`) API keys and 54 letters and digits
    row(
        "EasyPost",
        "easypost_api_key",
        &["EZAK", "EZTK"],
        r"EZ[AT]K[A-Za-z0-9]{54}",
    ),
    // Duffel docs: access tokens `duffel_test_` / `duffel_live_` and 43 base64url
    row(
        "Duffel",
        "duffel_access_token",
        &["duffel_test_", "duffel_live_"],
        r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}",
    ),
];
