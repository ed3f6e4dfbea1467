//! Messaging, mail, chat, support and CRM, and social platforms.

use super::row;
use crate::vendors::Rule;

pub(super) const ROWS: &[Rule] = &[
    // ---- messaging and voice ----
    // Twilio docs: an API key's SID is `SK` and 32 lower-case hex
    row("Twilio", "twilio_api_key", &["SK"], r"SK[0-9a-f]{32}"),
    // Twilio docs: the account's auth token is 32 lower-case hex
    keyed_row!(
        "Twilio",
        "twilio_auth_token",
        ["TWILIO_AUTH_TOKEN"],
        r"[a-f0-9]{32}"
    ),
    // Vonage (Nexmo): API secrets are 16 letters and digits
    keyed_row!(
        "Vonage",
        "vonage_api_secret",
        ["VONAGE_API_SECRET", "NEXMO_API_SECRET"],
        r"[A-Za-z0-9]{16}"
    ),
    // Plivo: auth tokens are 40 letters and digits
    keyed_row!(
        "Plivo",
        "plivo_auth_token",
        ["PLIVO_AUTH_TOKEN"],
        r"[A-Za-z0-9]{40}"
    ),
    // MessageBird (Bird): access keys are 25 letters and digits
    keyed_row!(
        "MessageBird",
        "messagebird_access_key",
        ["MESSAGEBIRD_ACCESS_KEY", "MESSAGEBIRD_API_KEY"],
        r"[A-Za-z0-9]{25}"
    ),
    // Telnyx: API v2 keys `KEY` and 55 base64url
    keyed_row!(
        "Telnyx",
        "telnyx_api_key",
        ["TELNYX_API_KEY"],
        r"KEY[A-Za-z0-9_-]{55}"
    ),
    // Infobip: API keys, 32 hex, `-`, a UUID
    keyed_row!(
        "Infobip",
        "infobip_api_key",
        ["INFOBIP_API_KEY"],
        concat!(r"[a-f0-9]{32}-", uuid!())
    ),
    // Sendbird: API tokens are 40 lower-case hex
    keyed_row!(
        "Sendbird",
        "sendbird_api_token",
        ["SENDBIRD_API_TOKEN", "SENDBIRD_MASTER_API_TOKEN"],
        r"[a-f0-9]{40}"
    ),
    // Pusher Channels: app secrets are 20 lower-case hex
    keyed_row!(
        "Pusher",
        "pusher_app_secret",
        ["PUSHER_APP_SECRET", "PUSHER_SECRET"],
        r"[a-f0-9]{20}"
    ),
    // Ably docs: API keys `<app id>.<key id>:<secret>`, the secret 43 base64
    keyed_row!(
        "Ably",
        "ably_api_key",
        ["ABLY_API_KEY", "ABLY_KEY"],
        r"[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{6}:[A-Za-z0-9_+/=-]{43}"
    ),
    // ---- mail ----
    // SendGrid docs: `SG.`, a 22-character key id and a 43-character secret, both base64url
    row(
        "SendGrid",
        "sendgrid_api_key",
        &["SG."],
        r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
    ),
    // Mailgun docs: private API keys `key-` and 32 lower-case hex
    row("Mailgun", "mailgun_api_key", &["key-"], r"key-[a-f0-9]{32}"),
    // Mailgun: keys of the newer form, 32 hex, `-`, 8 hex, `-`, 8 hex (or the older `key-` form)
    keyed_row!(
        "Mailgun",
        "mailgun_key",
        ["MAILGUN_API_KEY", "MAILGUN_SIGNING_KEY"],
        r"[a-f0-9]{32}-[a-f0-9]{8}-[a-f0-9]{8}|key-[a-f0-9]{32}"
    ),
    // Mailchimp docs: API keys, 32 hex, `-us` and the data centre's number
    keyed_row!(
        "Mailchimp",
        "mailchimp_api_key",
        ["MAILCHIMP_API_KEY", "MAILCHIMP_KEY", "MC_API_KEY"],
        r"[a-f0-9]{32}-us[0-9]{1,2}"
    ),
    // Postmark docs: server and account tokens are UUIDs, sent as `X-Postmark-Server-Token` or
    // `X-Postmark-Account-Token`
    keyed_row!(
        "Postmark",
        "postmark_token",
        [
            "X-Postmark-Server-Token",
            "X-Postmark-Account-Token",
            "POSTMARK_SERVER_TOKEN",
            "POSTMARK_API_TOKEN",
            "POSTMARK_ACCOUNT_TOKEN"
        ],
        uuid!()
    ),
    // Brevo (Sendinblue): API keys `xkeysib-` and SMTP keys `xsmtpsib-`, 64 hex, `-`, 16 letters
    // and digits
    row(
        "Brevo",
        "brevo_api_key",
        &["xkeysib-", "xsmtpsib-"],
        r"x(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}",
    ),
    // Mailjet: secret keys are 32 lower-case hex
    keyed_row!(
        "Mailjet",
        "mailjet_secret_key",
        [
            "MJ_APIKEY_PRIVATE",
            "MAILJET_API_SECRET",
            "MAILJET_SECRET_KEY"
        ],
        r"[a-f0-9]{32}"
    ),
    // Resend: API keys `re_`, 8 letters and digits, `_`, 24 letters and digits
    row(
        "Resend",
        "resend_api_key",
        &["re_"],
        r"re_[A-Za-z0-9]{8}_[A-Za-z0-9]{24}",
    ),
    // ---- chat ----
    // Discord docs: a webhook's URL, `/api/webhooks/<snowflake id>/<68-character token>`
    row(
        "Discord",
        "discord_webhook",
        &["discord.com/api/webhooks/", "discordapp.com/api/webhooks/"],
        r"discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/(?P<s>[A-Za-z0-9_-]{68})",
    ),
    // Telegram Bot API docs: a bot's token, `<bot id>:<35 base64url>`, read in the API's URL
    row(
        "Telegram",
        "telegram_bot_token",
        &["api.telegram.org/bot"],
        r"api\.telegram\.org/bot(?P<s>[0-9]{5,16}:[A-Za-z0-9_-]{35})",
    ),
    // Microsoft Teams: an incoming webhook's URL, two UUIDs, `IncomingWebhook`, 32 hex and a UUID
    // (and, in the newer form, a signature)
    row(
        "Microsoft",
        "teams_incoming_webhook",
        &[
            ".webhook.office.com/webhookb2/",
            "outlook.office.com/webhook/",
        ],
        concat!(
            r"(?:\.webhook\.office\.com/webhookb2|outlook\.office\.com/webhook)/(?P<s>",
            uuid!(),
            "@",
            uuid!(),
            r"/IncomingWebhook/[a-f0-9]{32}/",
            uuid!(),
            r"(?:/[A-Za-z0-9_-]{20,80})?)"
        ),
    ),
    // ---- support and CRM ----
    // Zendesk: API tokens are 40 letters and digits
    keyed_row!(
        "Zendesk",
        "zendesk_api_token",
        ["ZENDESK_API_TOKEN", "ZENDESK_TOKEN"],
        r"[A-Za-z0-9]{40}"
    ),
    // Freshdesk: API keys are 20 letters and digits
    keyed_row!(
        "Freshdesk",
        "freshdesk_api_key",
        ["FRESHDESK_API_KEY"],
        r"[A-Za-z0-9]{20}"
    ),
    // HubSpot docs: private app access tokens `pat-`, the region (`na1`, `eu1`, …), `-`, a UUID
    row(
        "HubSpot",
        "hubspot_private_app_token",
        &["pat-na", "pat-eu", "pat-ap"],
        concat!(r"pat-(?:na|eu|ap)[0-9]-", uuid!()),
    ),
    // Intercom: access tokens, 59 base64 and `=`
    keyed_row!(
        "Intercom",
        "intercom_access_token",
        ["INTERCOM_ACCESS_TOKEN", "INTERCOM_TOKEN"],
        r"[A-Za-z0-9+/]{59}="
    ),
    // Salesforce: session and access tokens, the org id (`00D` and 12), `!`, and the session key
    row(
        "Salesforce",
        "salesforce_access_token",
        &["00D"],
        r"00D[A-Za-z0-9]{12}![A-Za-z0-9_.]{80,128}",
    ),
    // Salesforce: OAuth refresh tokens `5AEP861` and 80 or more
    row(
        "Salesforce",
        "salesforce_refresh_token",
        &["5AEP861"],
        r"5AEP861[A-Za-z0-9_.]{80,200}",
    ),
    // Zoho docs: OAuth access and refresh tokens `1000.`, 32 hex, `.`, 32 hex
    row(
        "Zoho",
        "zoho_oauth_token",
        &["1000."],
        r"1000\.[a-f0-9]{32}\.[a-f0-9]{32}",
    ),
    // Klaviyo: private API keys `pk_` and 34 hex (or a 6-character prefix and `_` first)
    row(
        "Klaviyo",
        "klaviyo_private_api_key",
        &["pk_"],
        r"pk_(?:[A-Za-z0-9]{6}_)?[a-f0-9]{34}",
    ),
    // ---- social ----
    // Twitch docs: OAuth tokens are 30 lower-case letters and digits, given to chat as
    // `oauth:<token>`
    keyed_row!(
        "Twitch",
        "twitch_oauth_token",
        [
            "oauth",
            "TWITCH_OAUTH_TOKEN",
            "TWITCH_ACCESS_TOKEN",
            "TWITCH_CLIENT_SECRET"
        ],
        r"[a-z0-9]{30}"
    ),
    // X (Twitter): app-only bearer tokens open with a run of `A` and hold percent-encoded base64
    row(
        "X (Twitter)",
        "twitter_bearer_token",
        &["AAAAAAAAAAAAAAAAAAAA"],
        r"A{20}[A-Za-z0-9%]{80,120}",
    ),
    // Meta (Facebook): user and page access tokens `EAAC…` / `EAAM…`, 100 or more letters and
    // digits
    row(
        "Meta",
        "facebook_access_token",
        &["EAAC", "EAAM"],
        r"EAA[CM][A-Za-z0-9]{100,400}",
    ),
];
