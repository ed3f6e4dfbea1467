//! Samples of the rows in `src/vendors/table/comms.rs`.

use super::{Positive, Sample, keyed, whole};

pub(super) const SAMPLES: &[Sample] = &[
    Sample {
        kind: "twilio_api_key",
        positive: |g| whole(format!("SK{}", g.hex(32))),
        lookalike: |g| format!("SK{}", g.upper_hex(32)),
    },
    Sample {
        kind: "twilio_auth_token",
        positive: |g| keyed("TWILIO_AUTH_TOKEN", g.hex(32)),
        lookalike: |_| "TWILIO_AUTH_TOKEN=your_auth_token".to_owned(),
    },
    Sample {
        kind: "vonage_api_secret",
        positive: |g| keyed("VONAGE_API_SECRET", g.alnum(16)),
        lookalike: |g| format!("VONAGE_API_SECRET={}", g.alnum(8)),
    },
    Sample {
        kind: "plivo_auth_token",
        positive: |g| keyed("PLIVO_AUTH_TOKEN", g.alnum(40)),
        lookalike: |g| format!("PLIVO_AUTH_TOKEN={}", g.alnum(12)),
    },
    Sample {
        kind: "messagebird_access_key",
        positive: |g| keyed("MESSAGEBIRD_ACCESS_KEY", g.alnum(25)),
        lookalike: |g| format!("MESSAGEBIRD_ACCESS_KEY={}", g.alnum(12)),
    },
    Sample {
        kind: "telnyx_api_key",
        positive: |g| keyed("TELNYX_API_KEY", format!("KEY{}", g.b64url(55))),
        lookalike: |g| format!("TELNYX_API_KEY=KEY{}", g.alnum(10)),
    },
    Sample {
        kind: "infobip_api_key",
        positive: |g| keyed("INFOBIP_API_KEY", format!("{}-{}", g.hex(32), g.uuid())),
        lookalike: |_| "INFOBIP_API_KEY=<api-key>".to_owned(),
    },
    Sample {
        kind: "sendbird_api_token",
        positive: |g| keyed("SENDBIRD_API_TOKEN", g.hex(40)),
        lookalike: |g| format!("SENDBIRD_API_TOKEN={}", g.hex(12)),
    },
    Sample {
        kind: "pusher_app_secret",
        positive: |g| keyed("PUSHER_APP_SECRET", g.hex(20)),
        lookalike: |g| format!("PUSHER_APP_SECRET={}", g.hex(10)),
    },
    Sample {
        kind: "ably_api_key",
        positive: |g| {
            keyed(
                "ABLY_API_KEY",
                format!("{}.{}:{}", g.alnum(6), g.alnum(6), g.b64(43)),
            )
        },
        lookalike: |_| "ABLY_API_KEY=appId.keyId:secret".to_owned(),
    },
    Sample {
        kind: "sendgrid_api_key",
        positive: |g| whole(format!("SG.{}.{}", g.b64url(22), g.b64url(43))),
        lookalike: |g| format!("SG.{}.{}", g.b64url(12), g.b64url(43)),
    },
    Sample {
        kind: "mailgun_api_key",
        positive: |g| whole(format!("key-{}", g.hex(32))),
        lookalike: |_| "key-value-store".to_owned(),
    },
    Sample {
        kind: "mailgun_key",
        positive: |g| {
            keyed(
                "MAILGUN_API_KEY",
                format!("{}-{}-{}", g.hex(32), g.hex(8), g.hex(8)),
            )
        },
        lookalike: |g| format!("MAILGUN_API_KEY={}", g.hex(12)),
    },
    Sample {
        kind: "mailchimp_api_key",
        positive: |g| {
            keyed(
                "MAILCHIMP_API_KEY",
                format!("{}-us{}", g.hex(32), g.digits(2)),
            )
        },
        lookalike: |g| format!("MAILCHIMP_API_KEY={}-us{}", g.hex(8), g.digits(2)),
    },
    Sample {
        kind: "postmark_token",
        positive: |g| {
            let token = g.uuid();
            Positive {
                text: format!("X-Postmark-Server-Token: {token}"),
                secret: token,
            }
        },
        lookalike: |_| "X-Postmark-Server-Token: server token".to_owned(),
    },
    Sample {
        kind: "brevo_api_key",
        positive: |g| whole(format!("xkeysib-{}-{}", g.hex(64), g.alnum(16))),
        lookalike: |g| format!("xkeysib-{}", g.hex(32)),
    },
    Sample {
        kind: "mailjet_secret_key",
        positive: |g| keyed("MJ_APIKEY_PRIVATE", g.hex(32)),
        lookalike: |g| format!("MJ_APIKEY_PRIVATE={}", g.hex(12)),
    },
    Sample {
        kind: "resend_api_key",
        positive: |g| whole(format!("re_{}_{}", g.alnum(8), g.alnum(24))),
        lookalike: |_| "re_render_all_templates".to_owned(),
    },
    Sample {
        kind: "discord_webhook",
        positive: |g| {
            let token = g.b64url(68);
            Positive {
                text: format!("https://discord.com/api/webhooks/{}/{token}", g.digits(18)),
                secret: token,
            }
        },
        lookalike: |_| "https://discord.com/api/webhooks/{id}/{token}".to_owned(),
    },
    Sample {
        kind: "telegram_bot_token",
        positive: |g| {
            let token = format!("{}:AA{}", g.digits(10), g.b64url(33));
            Positive {
                text: format!("https://api.telegram.org/bot{token}/getMe"),
                secret: token,
            }
        },
        lookalike: |_| "https://api.telegram.org/bot<token>/getMe".to_owned(),
    },
    Sample {
        kind: "teams_incoming_webhook",
        positive: |g| {
            let path = format!(
                "{}@{}/IncomingWebhook/{}/{}",
                g.uuid(),
                g.uuid(),
                g.hex(32),
                g.uuid()
            );
            Positive {
                text: format!("https://contoso.webhook.office.com/webhookb2/{path}"),
                secret: path,
            }
        },
        lookalike: |_| "https://contoso.webhook.office.com/webhookb2/".to_owned(),
    },
    Sample {
        kind: "zendesk_api_token",
        positive: |g| keyed("ZENDESK_API_TOKEN", g.alnum(40)),
        lookalike: |g| format!("ZENDESK_API_TOKEN={}", g.alnum(12)),
    },
    Sample {
        kind: "freshdesk_api_key",
        positive: |g| keyed("FRESHDESK_API_KEY", g.alnum(20)),
        lookalike: |g| format!("FRESHDESK_API_KEY={}", g.alnum(10)),
    },
    Sample {
        kind: "hubspot_private_app_token",
        positive: |g| whole(format!("pat-na1-{}", g.uuid())),
        lookalike: |_| "pat-na1-<token>".to_owned(),
    },
    Sample {
        kind: "intercom_access_token",
        positive: |g| keyed("INTERCOM_ACCESS_TOKEN", format!("dG9rOj{}=", g.b64(53))),
        lookalike: |g| format!("INTERCOM_ACCESS_TOKEN={}", g.alnum(12)),
    },
    Sample {
        kind: "salesforce_access_token",
        positive: |g| {
            whole(format!(
                "00D{}!{}.{}",
                g.alnum(12),
                g.alnum(40),
                g.alnum(55)
            ))
        },
        lookalike: |g| format!("00D{}", g.alnum(12)),
    },
    Sample {
        kind: "salesforce_refresh_token",
        positive: |g| whole(format!("5AEP861{}", g.alnum(90))),
        lookalike: |g| format!("5AEP861{}", g.alnum(20)),
    },
    Sample {
        kind: "zoho_oauth_token",
        positive: |g| whole(format!("1000.{}.{}", g.hex(32), g.hex(32))),
        lookalike: |_| "1000.0 ms elapsed".to_owned(),
    },
    Sample {
        kind: "klaviyo_private_api_key",
        positive: |g| whole(format!("pk_{}", g.hex(34))),
        lookalike: |g| format!("pk_{}", g.hex(20)),
    },
    Sample {
        kind: "twitch_oauth_token",
        positive: |g| {
            let token = g.lower(30);
            Positive {
                text: format!("PASS oauth:{token}"),
                secret: token,
            }
        },
        lookalike: |_| "urn:ietf:params:oauth:grant-type:device_code".to_owned(),
    },
    Sample {
        kind: "twitter_bearer_token",
        positive: |g| {
            whole(format!(
                "{}{}%2F{}%3D{}",
                "A".repeat(22),
                g.alnum(30),
                g.alnum(40),
                g.alnum(20)
            ))
        },
        lookalike: |g| format!("{}{}", "A".repeat(22), g.alnum(20)),
    },
    Sample {
        kind: "facebook_access_token",
        positive: |g| whole(format!("EAACEdEose0cBA{}", g.alnum(180))),
        lookalike: |g| format!("EAAC{}", g.alnum(40)),
    },
];
