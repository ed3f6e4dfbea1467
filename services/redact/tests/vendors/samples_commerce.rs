//! Samples of the rows in `src/vendors/table/commerce.rs`.

use super::{Sample, keyed, whole};

pub(super) const SAMPLES: &[Sample] = &[
    Sample {
        kind: "shopify_access_token",
        positive: |g| whole(format!("shpat_{}", g.hex(32))),
        lookalike: |g| format!("shpat_{}", g.hex(16)),
    },
    Sample {
        kind: "shopify_custom_app_token",
        positive: |g| whole(format!("shpca_{}", g.hex(32))),
        lookalike: |g| format!("shpca_{}", g.lower(32)),
    },
    Sample {
        kind: "shopify_private_app_token",
        positive: |g| whole(format!("shppa_{}", g.hex(32))),
        lookalike: |g| format!("shppa_{}", g.hex(40)),
    },
    Sample {
        kind: "shopify_shared_secret",
        positive: |g| whole(format!("shpss_{}", g.upper_hex(32))),
        lookalike: |_| "shpss_<shared-secret>".to_owned(),
    },
    Sample {
        kind: "etsy_api_key",
        positive: |g| keyed("ETSY_API_KEY", g.lower(24)),
        lookalike: |g| format!("ETSY_API_KEY={}", g.lower(12)),
    },
    Sample {
        kind: "adobe_client_secret",
        positive: |g| whole(format!("p8e-{}", g.alnum(32))),
        lookalike: |g| format!("p8e-{}", g.alnum(12)),
    },
    Sample {
        kind: "square_access_token",
        positive: |g| whole(format!("EAAA{}", g.b64url(60))),
        lookalike: |g| format!("EAAA{}", g.b64url(30)),
    },
    Sample {
        kind: "square_application_secret",
        positive: |g| whole(format!("sq0csp-{}", g.b64url(43))),
        lookalike: |g| format!("sq0csp-{}", g.alnum(12)),
    },
    Sample {
        kind: "plaid_access_token",
        positive: |g| whole(format!("access-sandbox-{}", g.uuid())),
        lookalike: |_| "access-sandbox-environment".to_owned(),
    },
    Sample {
        kind: "razorpay_key_id",
        positive: |g| whole(format!("rzp_live_{}", g.alnum(14))),
        lookalike: |g| format!("rzp_live_{}", g.alnum(8)),
    },
    Sample {
        kind: "razorpay_key_secret",
        positive: |g| keyed("RAZORPAY_KEY_SECRET", g.alnum(24)),
        lookalike: |g| format!("RAZORPAY_KEY_SECRET={}", g.alnum(12)),
    },
    Sample {
        kind: "flutterwave_secret_key",
        positive: |g| whole(format!("FLWSECK_TEST-{}-X", g.hex(32))),
        lookalike: |g| format!("FLWSECK_TEST-{}", g.hex(16)),
    },
    Sample {
        kind: "flutterwave_encryption_key",
        positive: |g| whole(format!("FLWSECK_TEST{}", g.hex(12))),
        lookalike: |_| "FLWSECK_TEST_KEY".to_owned(),
    },
    Sample {
        kind: "braintree_access_token",
        positive: |g| {
            whole(format!(
                "access_token$production${}${}",
                g.lower(16),
                g.hex(32)
            ))
        },
        lookalike: |_| "access_token$production$<merchant>$<token>".to_owned(),
    },
    Sample {
        kind: "paddle_api_key",
        positive: |g| {
            whole(format!(
                "pdl_live_apikey_{}_{}_{}",
                g.lower(26),
                g.alnum(22),
                g.alnum(3)
            ))
        },
        lookalike: |g| format!("pdl_live_apikey_{}", g.lower(26)),
    },
    Sample {
        kind: "mollie_api_key",
        positive: |g| keyed("MOLLIE_API_KEY", format!("live_{}", g.alnum(30))),
        // the prefix alone, unkeyed, is no key
        lookalike: |g| format!("test_{}", g.alnum(30)),
    },
    Sample {
        kind: "gocardless_access_token",
        positive: |g| {
            keyed(
                "GOCARDLESS_ACCESS_TOKEN",
                format!("sandbox_{}", g.b64url(40)),
            )
        },
        lookalike: |g| format!("sandbox_{}", g.b64url(40)),
    },
    Sample {
        kind: "kraken_private_key",
        positive: |g| keyed("KRAKEN_PRIVATE_KEY", format!("{}==", g.b64(86))),
        lookalike: |g| format!("KRAKEN_PRIVATE_KEY={}", g.b64(12)),
    },
    Sample {
        kind: "lob_api_key",
        positive: |g| whole(format!("live_{}", g.hex(35))),
        lookalike: |g| format!("test_{}", g.alnum(35)),
    },
    Sample {
        kind: "lob_publishable_key",
        positive: |g| whole(format!("test_pub_{}", g.hex(31))),
        lookalike: |g| format!("test_pub_{}", g.hex(12)),
    },
    Sample {
        kind: "shippo_api_token",
        positive: |g| whole(format!("shippo_live_{}", g.hex(40))),
        lookalike: |g| format!("shippo_live_{}", g.hex(20)),
    },
    Sample {
        kind: "easypost_api_key",
        positive: |g| whole(format!("EZAK{}", g.alnum(54))),
        lookalike: |g| format!("EZAK{}", g.alnum(20)),
    },
    Sample {
        kind: "duffel_access_token",
        positive: |g| whole(format!("duffel_test_{}", g.b64url(43))),
        lookalike: |g| format!("duffel_test_{}", g.alnum(12)),
    },
];
