//! Samples of the rows in `src/vendors/table/observability.rs`.

use super::{Positive, Sample, keyed, whole};

pub(super) const SAMPLES: &[Sample] = &[
    Sample {
        kind: "datadog_api_key",
        positive: |g| keyed("DD_API_KEY", g.hex(32)),
        lookalike: |g| format!("DD_API_KEY={}", g.hex(12)),
    },
    Sample {
        kind: "datadog_app_key",
        positive: |g| {
            let key = g.hex(40);
            Positive {
                text: format!("-H \"DD-APPLICATION-KEY: {key}\""),
                secret: key,
            }
        },
        lookalike: |_| "-H \"DD-APPLICATION-KEY: ${DD_APP_KEY}\"".to_owned(),
    },
    Sample {
        kind: "newrelic_user_api_key",
        positive: |g| whole(format!("NRAK-{}", g.upper(27))),
        lookalike: |g| format!("NRAK-{}", g.upper(10)),
    },
    Sample {
        kind: "newrelic_insights_key",
        positive: |g| whole(format!("NRII-{}", g.b64url(32))),
        lookalike: |g| format!("NRII-{}", g.alnum(12)),
    },
    Sample {
        kind: "newrelic_rest_api_key",
        positive: |g| whole(format!("NRRA-{}", g.hex(42))),
        lookalike: |g| format!("NRRA-{}", g.hex(20)),
    },
    Sample {
        kind: "newrelic_browser_key",
        positive: |g| whole(format!("NRJS-{}", g.hex(19))),
        lookalike: |g| format!("NRJS-{}", g.hex(8)),
    },
    Sample {
        kind: "newrelic_license_key",
        positive: |g| keyed("NEW_RELIC_LICENSE_KEY", format!("{}NRAL", g.hex(36))),
        lookalike: |_| "NEW_RELIC_LICENSE_KEY=<license-key>".to_owned(),
    },
    Sample {
        kind: "dynatrace_token",
        positive: |g| whole(format!("dt0c01.{}.{}", g.upper(24), g.upper(64))),
        lookalike: |g| format!("dt0c01.{}", g.upper(24)),
    },
    Sample {
        kind: "grafana_service_account_token",
        positive: |g| whole(format!("glsa_{}_{}", g.alnum(32), g.hex(8))),
        lookalike: |g| format!("glsa_{}", g.alnum(32)),
    },
    Sample {
        kind: "grafana_cloud_token",
        positive: |g| whole(format!("glc_eyJ{}=", g.b64(120))),
        lookalike: |g| format!("glc_{}", g.alnum(12)),
    },
    Sample {
        kind: "grafana_api_key",
        positive: |g| whole(format!("eyJrIjoi{}", g.alnum(80))),
        lookalike: |g| format!("eyJrIjoi{}", g.alnum(20)),
    },
    Sample {
        kind: "pagerduty_api_key",
        positive: |g| {
            let key = g.alnum(20);
            Positive {
                text: format!("Token token={key}"),
                secret: key,
            }
        },
        lookalike: |_| "Token token=$PAGERDUTY_TOKEN".to_owned(),
    },
    Sample {
        kind: "sumologic_http_source_token",
        positive: |g| {
            let token = format!("{}==", g.b64url(120));
            Positive {
                text: format!(
                    "https://endpoint4.collection.us2.sumologic.com/receiver/v1/http/{token}"
                ),
                secret: token,
            }
        },
        lookalike: |_| {
            "https://endpoint4.collection.us2.sumologic.com/receiver/v1/http/".to_owned()
        },
    },
    Sample {
        kind: "sumologic_access_key",
        positive: |g| keyed("SUMOLOGIC_ACCESSKEY", g.alnum(64)),
        lookalike: |g| format!("SUMOLOGIC_ACCESSKEY={}", g.alnum(14)),
    },
    Sample {
        kind: "splunk_hec_token",
        positive: |g| {
            let token = g.uuid();
            Positive {
                text: format!("-H \"Authorization: Splunk {token}\""),
                secret: token,
            }
        },
        lookalike: |_| "Splunk Enterprise 9.1 started".to_owned(),
    },
    Sample {
        kind: "rollbar_access_token",
        positive: |g| {
            let token = g.hex(32);
            Positive {
                text: format!("X-Rollbar-Access-Token: {token}"),
                secret: token,
            }
        },
        lookalike: |_| "X-Rollbar-Access-Token: <token>".to_owned(),
    },
    Sample {
        kind: "bugsnag_api_key",
        positive: |g| keyed("BUGSNAG_API_KEY", g.hex(32)),
        lookalike: |g| format!("BUGSNAG_API_KEY={}", g.hex(12)),
    },
    Sample {
        kind: "launchdarkly_key",
        positive: |g| {
            whole(format!(
                "sdk-{}-{}-4{}-{}-{}",
                g.hex(8),
                g.hex(4),
                g.hex(3),
                g.hex(4),
                g.hex(12)
            ))
        },
        lookalike: |_| "sdk-version-4.2.0".to_owned(),
    },
    Sample {
        kind: "posthog_personal_api_key",
        positive: |g| whole(format!("phx_{}", g.alnum(47))),
        lookalike: |g| format!("phx_{}", g.alnum(20)),
    },
    Sample {
        kind: "posthog_project_api_key",
        positive: |g| whole(format!("phc_{}", g.alnum(43))),
        lookalike: |g| format!("phc_{}", g.alnum(20)),
    },
    Sample {
        kind: "mixpanel_secret",
        positive: |g| keyed("MIXPANEL_API_SECRET", g.alnum(32)),
        lookalike: |g| format!("MIXPANEL_API_SECRET={}", g.alnum(12)),
    },
    Sample {
        kind: "amplitude_secret_key",
        positive: |g| keyed("AMPLITUDE_SECRET_KEY", g.hex(32)),
        lookalike: |_| "AMPLITUDE_SECRET_KEY=<secret-key>".to_owned(),
    },
    Sample {
        kind: "segment_public_api_token",
        positive: |g| whole(format!("sgp_{}", g.alnum(64))),
        lookalike: |g| format!("sgp_{}", g.alnum(30)),
    },
    Sample {
        kind: "segment_write_key",
        positive: |g| keyed("SEGMENT_WRITE_KEY", g.alnum(32)),
        lookalike: |g| format!("SEGMENT_WRITE_KEY={}", g.alnum(10)),
    },
    Sample {
        kind: "algolia_api_key",
        positive: |g| keyed("ALGOLIA_ADMIN_KEY", g.hex(32)),
        lookalike: |g| format!("ALGOLIA_ADMIN_KEY={}", g.hex(10)),
    },
    Sample {
        kind: "okta_api_token",
        positive: |g| {
            let token = format!("00{}", g.b64url(40));
            Positive {
                text: format!("Authorization: SSWS {token}"),
                secret: token,
            }
        },
        lookalike: |_| "Authorization: SSWS ${OKTA_API_TOKEN}".to_owned(),
    },
    Sample {
        kind: "auth0_client_secret",
        positive: |g| keyed("AUTH0_CLIENT_SECRET", g.b64url(64)),
        lookalike: |_| "AUTH0_CLIENT_SECRET=${AUTH0_CLIENT_SECRET:?unset}".to_owned(),
    },
    Sample {
        kind: "authress_service_client_access_key",
        positive: |g| {
            whole(format!(
                "sc_{}.{}.acc_{}.{}",
                g.alnum(10),
                g.alnum(4),
                g.lower(10),
                g.alnum(40)
            ))
        },
        lookalike: |_| "sc_scheduler.main.acc_lookup".to_owned(),
    },
];
