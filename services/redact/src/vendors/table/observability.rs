//! Observability, product analytics and feature flags, search, and identity.

use super::row;
use crate::vendors::Rule;

pub(super) const ROWS: &[Rule] = &[
    // ---- observability ----
    // Datadog: API keys are 32 lower-case hex
    keyed_row!(
        "Datadog",
        "datadog_api_key",
        ["DD_API_KEY", "DATADOG_API_KEY", "DD-API-KEY"],
        r"[a-f0-9]{32}"
    ),
    // Datadog: application keys are 40 lower-case hex
    keyed_row!(
        "Datadog",
        "datadog_app_key",
        [
            "DD_APP_KEY",
            "DD_APPLICATION_KEY",
            "DATADOG_APP_KEY",
            "DD-APPLICATION-KEY"
        ],
        r"[a-f0-9]{40}"
    ),
    // New Relic docs: user keys `NRAK-` and 27 upper-case letters and digits
    row(
        "New Relic",
        "newrelic_user_api_key",
        &["NRAK-"],
        r"NRAK-[A-Z0-9]{27}",
    ),
    // New Relic: Insights insert (`NRII-`) and query (`NRIQ-`) keys, 32 base64url
    row(
        "New Relic",
        "newrelic_insights_key",
        &["NRII-", "NRIQ-"],
        r"NRI[IQ]-[A-Za-z0-9_-]{32}",
    ),
    // New Relic: REST API keys `NRRA-` and 42 hex; admin keys `NRAA-` and 27 hex
    row(
        "New Relic",
        "newrelic_rest_api_key",
        &["NRRA-", "NRAA-"],
        r"NR(?:RA-[a-f0-9]{42}|AA-[a-f0-9]{27})",
    ),
    // New Relic: browser keys `NRJS-` and 19 hex
    row(
        "New Relic",
        "newrelic_browser_key",
        &["NRJS-"],
        r"NRJS-[a-f0-9]{19}",
    ),
    // New Relic: ingest license keys, 36 hex and `NRAL`, or 40 hex (older)
    keyed_row!(
        "New Relic",
        "newrelic_license_key",
        ["NEW_RELIC_LICENSE_KEY", "NRIA_LICENSE_KEY"],
        r"[a-f0-9]{36}NRAL|[a-f0-9]{40}"
    ),
    // Dynatrace docs (token format): `dt0c01.` (API) or `dt0s…` (platform, OAuth), a 24-character
    // public part, `.`, a 64-character secret, upper-case letters and digits
    row(
        "Dynatrace",
        "dynatrace_token",
        &["dt0c", "dt0s"],
        r"dt0[cs][0-9]{2}\.[A-Z0-9]{24}\.[A-Z0-9]{64}",
    ),
    // Grafana: service account tokens `glsa_`, 32 letters and digits, `_`, an 8-hex check
    row(
        "Grafana",
        "grafana_service_account_token",
        &["glsa_"],
        r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
    ),
    // Grafana Cloud: access policy tokens `glc_` and a base64 JSON document
    row(
        "Grafana",
        "grafana_cloud_token",
        &["glc_"],
        r"glc_[A-Za-z0-9+/]{32,400}={0,3}",
    ),
    // Grafana: API keys (deprecated) are base64 of `{"k":"…`, so open `eyJrIjoi`
    row(
        "Grafana",
        "grafana_api_key",
        &["eyJrIjoi"],
        r"eyJrIjoi[A-Za-z0-9]{60,200}={0,3}",
    ),
    // PagerDuty docs: REST API keys (user tokens among them, `u+` and 18 more), 20 characters,
    // sent as `Authorization: Token token=`
    keyed_row!(
        "PagerDuty",
        "pagerduty_api_key",
        ["Token token", "PAGERDUTY_TOKEN", "PAGERDUTY_API_KEY"],
        r"[A-Za-z0-9_+-]{20}"
    ),
    // Sumo Logic docs: an HTTP source's URL ends in its token, base64url
    row(
        "Sumo Logic",
        "sumologic_http_source_token",
        &[".sumologic.com/receiver/v1/"],
        r"\.sumologic\.com/receiver/v1/(?:http|otlp)/(?P<s>[A-Za-z0-9_=-]{20,400})",
    ),
    // Sumo Logic: access keys are 64 letters and digits
    keyed_row!(
        "Sumo Logic",
        "sumologic_access_key",
        [
            "SUMOLOGIC_ACCESSKEY",
            "SUMOLOGIC_ACCESS_KEY",
            "SUMO_ACCESS_KEY"
        ],
        r"[A-Za-z0-9]{64}"
    ),
    // Splunk docs: HTTP Event Collector tokens are UUIDs, sent as `Authorization: Splunk <token>`
    keyed_row!(
        "Splunk",
        "splunk_hec_token",
        ["Splunk", "SPLUNK_HEC_TOKEN"],
        r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    ),
    // Rollbar: access tokens are 32 lower-case hex, sent as `X-Rollbar-Access-Token`
    keyed_row!(
        "Rollbar",
        "rollbar_access_token",
        [
            "ROLLBAR_ACCESS_TOKEN",
            "ROLLBAR_TOKEN",
            "X-Rollbar-Access-Token"
        ],
        r"[a-f0-9]{32}"
    ),
    // Bugsnag: API keys and auth tokens are 32 lower-case hex
    keyed_row!(
        "Bugsnag",
        "bugsnag_api_key",
        ["BUGSNAG_API_KEY", "BUGSNAG_AUTH_TOKEN"],
        r"[a-f0-9]{32}"
    ),
    // ---- product analytics and feature flags ----
    // LaunchDarkly: API access tokens `api-` and SDK keys `sdk-`, each with a version-4 UUID
    row(
        "LaunchDarkly",
        "launchdarkly_key",
        &["api-", "sdk-"],
        r"(?:api|sdk)-[a-f0-9]{8}-[a-f0-9]{4}-4[a-f0-9]{3}-[a-f0-9]{4}-[a-f0-9]{12}",
    ),
    // PostHog: personal API keys `phx_` and 43 to 48 letters, digits and `_`
    row(
        "PostHog",
        "posthog_personal_api_key",
        &["phx_"],
        r"phx_[A-Za-z0-9_]{43,48}",
    ),
    // PostHog: project API keys `phc_` and 43 letters, digits and `_`
    row(
        "PostHog",
        "posthog_project_api_key",
        &["phc_"],
        r"phc_[A-Za-z0-9_]{43}",
    ),
    // Mixpanel: API secrets and service account secrets are 32 letters and digits
    keyed_row!(
        "Mixpanel",
        "mixpanel_secret",
        [
            "MIXPANEL_API_SECRET",
            "MIXPANEL_SECRET",
            "MIXPANEL_SERVICE_ACCOUNT_SECRET"
        ],
        r"[A-Za-z0-9]{32}"
    ),
    // Amplitude: secret keys are 32 lower-case hex
    keyed_row!(
        "Amplitude",
        "amplitude_secret_key",
        ["AMPLITUDE_SECRET_KEY", "AMPLITUDE_API_SECRET"],
        r"[a-f0-9]{32}"
    ),
    // Segment docs (Public API): tokens `sgp_` and 64 letters and digits
    row(
        "Segment",
        "segment_public_api_token",
        &["sgp_"],
        r"sgp_[A-Za-z0-9]{64}",
    ),
    // Segment: write keys are 32 letters and digits
    keyed_row!(
        "Segment",
        "segment_write_key",
        ["SEGMENT_WRITE_KEY"],
        r"[A-Za-z0-9]{32}"
    ),
    // Algolia: admin and search API keys are 32 lower-case hex
    keyed_row!(
        "Algolia",
        "algolia_api_key",
        [
            "ALGOLIA_ADMIN_KEY",
            "ALGOLIA_ADMIN_API_KEY",
            "ALGOLIA_API_KEY",
            "X-Algolia-API-Key"
        ],
        r"[a-f0-9]{32}"
    ),
    // ---- identity ----
    // Okta docs: API tokens `00` and 40 base64url, sent as `Authorization: SSWS <token>`
    keyed_row!(
        "Okta",
        "okta_api_token",
        ["SSWS", "OKTA_API_TOKEN", "OKTA_CLIENT_TOKEN"],
        r"00[A-Za-z0-9_-]{40}"
    ),
    // Auth0: client secrets are 64 base64url
    keyed_row!(
        "Auth0",
        "auth0_client_secret",
        ["AUTH0_CLIENT_SECRET"],
        r"[A-Za-z0-9_-]{64}"
    ),
];
