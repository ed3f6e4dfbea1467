//! Clouds, hosting platforms, databases, infrastructure and secret managers.

use super::row;
use crate::vendors::Rule;

pub(super) const ROWS: &[Rule] = &[
    // ---- Microsoft Azure ----
    // Azure Storage docs: a connection string's AccountKey, 64 bytes in base64 (86 and `==`)
    row(
        "Azure",
        "azure_storage_key",
        &["AccountKey="],
        r"AccountKey=(?P<s>[A-Za-z0-9+/]{86}==)",
    ),
    // Azure Storage docs (SAS): `sig=`, the base64 HMAC-SHA256 of the string to sign (43 and `=`),
    // URL-encoded in a URL (`%2B`, `%2F`, `%3D`)
    row(
        "Azure",
        "azure_sas_signature",
        &["sig="],
        r"sig=(?P<s>(?:[A-Za-z0-9+/]|%2[BbFf]){43}(?:=|%3[Dd]))",
    ),
    // Azure Service Bus / Event Hubs / IoT Hub docs: `SharedAccessKey=`, a 256-bit key in base64
    // (43 and `=`)
    row(
        "Azure",
        "azure_shared_access_key",
        &["SharedAccessKey="],
        r"SharedAccessKey=(?P<s>[A-Za-z0-9+/]{43}=)",
    ),
    // Azure SignalR / Web PubSub docs: a connection string's `;AccessKey=`, 43 base64 and `=`
    row(
        "Azure",
        "azure_signalr_access_key",
        &[";AccessKey="],
        r";AccessKey=(?P<s>[A-Za-z0-9+/]{43}=)",
    ),
    // Azure App Configuration docs: a connection string's `;Secret=`, base64 ending `=`
    row(
        "Azure",
        "azure_app_configuration_secret",
        &[";Secret="],
        r";Secret=(?P<s>[A-Za-z0-9+/]{36,50}=)",
    ),
    // Microsoft Entra (Azure AD) client secrets: 40 characters, three of `[A-Za-z0-9_~.]`, a
    // digit, `Q~`, then 31 to 34 of `[A-Za-z0-9_~.-]` (gitleaks, trufflehog); keyed on the names
    // the Azure SDKs and Terraform read it from
    keyed_row!(
        "Azure",
        "azure_ad_client_secret",
        [
            "AZURE_CLIENT_SECRET",
            "ARM_CLIENT_SECRET",
            "client_secret",
            "clientSecret",
            "ClientSecret",
            "client-secret"
        ],
        r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}"
    ),
    // ---- Amazon Web Services (forms tokens.rs does not read) ----
    // Amazon Bedrock docs: long-term API keys `ABSK` and 109 to 269 base64, padded
    row(
        "AWS",
        "aws_bedrock_api_key",
        &["ABSK"],
        r"ABSK[A-Za-z0-9+/]{109,269}={0,2}",
    ),
    // AWS STS session tokens: base64 of a serialized credential that opens `IQoJb3JpZ2luX2Vj`
    // (current) or `FwoGZXIvYXdz` / `FQoGZXIvYXdz` (older), hundreds of characters
    row(
        "AWS",
        "aws_session_token",
        &["IQoJb3JpZ2luX2Vj", "FwoGZXIvYXdz", "FQoGZXIvYXdz"],
        r"(?:IQoJb3JpZ2luX2Vj|F[wQ]oGZXIvYXdz)[A-Za-z0-9+/]{100,1000}={0,2}",
    ),
    // AWS AppSync docs: API keys `da2-` and 26 lower-case letters and digits
    row("AWS", "aws_appsync_api_key", &["da2-"], r"da2-[a-z0-9]{26}"),
    // Amazon MWS docs: auth tokens `amzn.mws.` and a UUID
    row(
        "AWS",
        "amazon_mws_auth_token",
        &["amzn.mws."],
        concat!(r"amzn\.mws\.", uuid!()),
    ),
    // ---- Google (forms tokens.rs does not read) ----
    // Google OAuth client secrets: `GOCSPX-` and 28 base64url
    row(
        "Google",
        "google_oauth_client_secret",
        &["GOCSPX-"],
        r"GOCSPX-[A-Za-z0-9_-]{28}",
    ),
    // Google OAuth 2.0 access tokens: `ya29.` and a base64url run
    row(
        "Google",
        "google_oauth_access_token",
        &["ya29."],
        r"ya29\.[A-Za-z0-9_-]{20,1000}",
    ),
    // Google OAuth 2.0 refresh tokens: `1//0` and a base64url run
    row(
        "Google",
        "google_oauth_refresh_token",
        &["1//0"],
        r"1//0[A-Za-z0-9_-]{40,500}",
    ),
    // Firebase Cloud Messaging legacy server keys: `AAAA`, 7 base64url, `:APA91b`, 134 base64url
    row(
        "Firebase",
        "firebase_fcm_server_key",
        &["AAAA"],
        r"AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{134}",
    ),
    // ---- other clouds ----
    // DigitalOcean docs: personal (`dop_v1_`), OAuth (`doo_v1_`) and refresh (`dor_v1_`) tokens,
    // each 64 lower-case hex
    row(
        "DigitalOcean",
        "digitalocean_token",
        &["dop_v1_", "doo_v1_", "dor_v1_"],
        r"do[por]_v1_[a-f0-9]{64}",
    ),
    // Heroku: API keys `HRKU-AA` and 58 base64url (gitleaks, trufflehog)
    row(
        "Heroku",
        "heroku_api_key",
        &["HRKU-AA"],
        r"HRKU-AA[A-Za-z0-9_-]{58}",
    ),
    // Alibaba Cloud docs: AccessKey IDs `LTAI` and 12 to 20 letters and digits
    row(
        "Alibaba Cloud",
        "alibaba_access_key_id",
        &["LTAI"],
        r"LTAI[A-Za-z0-9]{12,20}",
    ),
    // Tencent Cloud docs: SecretId `AKID` and 32 letters and digits (36 in all)
    row(
        "Tencent Cloud",
        "tencent_secret_id",
        &["AKID"],
        r"AKID[A-Za-z0-9]{32}",
    ),
    // Yandex Cloud docs: API keys `AQVN` and 35 to 38 base64url
    row(
        "Yandex",
        "yandex_cloud_api_key",
        &["AQVN"],
        r"AQVN[A-Za-z0-9_-]{35,38}",
    ),
    // Yandex Cloud docs: IAM tokens `t1.`, a base64url header, `.`, an 86-character signature
    row(
        "Yandex",
        "yandex_cloud_iam_token",
        &["t1."],
        r"t1\.[A-Za-z0-9_-]{20,600}={0,2}\.[A-Za-z0-9_-]{86}={0,2}",
    ),
    // Huawei Cloud: the secret access key (SK) is 40 letters and digits, read from the SDK's and
    // Terraform's variables
    keyed_row!(
        "Huawei Cloud",
        "huaweicloud_secret_key",
        [
            "HUAWEICLOUD_SDK_SK",
            "HW_SECRET_KEY",
            "HUAWEICLOUD_SECRET_KEY"
        ],
        r"[A-Za-z0-9]{40}"
    ),
    // IBM Cloud IAM API keys: 44 base64url, read from the CLI's and Terraform's variables
    keyed_row!(
        "IBM Cloud",
        "ibm_cloud_api_key",
        ["IBMCLOUD_API_KEY", "IC_API_KEY", "IBM_CLOUD_API_KEY"],
        r"[A-Za-z0-9_-]{44}"
    ),
    // SoftLayer (IBM Cloud classic infrastructure): API keys are 64 lower-case hex
    keyed_row!(
        "SoftLayer",
        "softlayer_api_key",
        ["SL_API_KEY", "SOFTLAYER_API_KEY", "IAAS_CLASSIC_API_KEY"],
        r"[a-f0-9]{64}"
    ),
    // Linode (Akamai) personal access tokens: 64 lower-case hex
    keyed_row!(
        "Linode",
        "linode_token",
        ["LINODE_TOKEN", "LINODE_CLI_TOKEN", "LINODE_API_TOKEN"],
        r"[a-f0-9]{64}"
    ),
    // Vultr API keys: 36 upper-case letters and digits
    keyed_row!("Vultr", "vultr_api_key", ["VULTR_API_KEY"], r"[A-Z0-9]{36}"),
    // Hetzner Cloud API tokens: 64 letters and digits, read from `HCLOUD_TOKEN`
    keyed_row!(
        "Hetzner",
        "hetzner_cloud_token",
        ["HCLOUD_TOKEN"],
        r"[A-Za-z0-9]{64}"
    ),
    // Scaleway docs: access keys `SCW` and 17 upper-case letters and digits
    row(
        "Scaleway",
        "scaleway_access_key",
        &["SCW"],
        r"SCW[A-Z0-9]{17}",
    ),
    // Scaleway docs: secret keys are UUIDs
    keyed_row!(
        "Scaleway",
        "scaleway_secret_key",
        ["SCW_SECRET_KEY"],
        uuid!()
    ),
    // OVHcloud: application secrets and consumer keys are 32 letters and digits
    keyed_row!(
        "OVHcloud",
        "ovh_application_secret",
        ["OVH_APPLICATION_SECRET", "OVH_CONSUMER_KEY"],
        r"[A-Za-z0-9]{32}"
    ),
    // Cloudflare docs: Origin CA keys `v1.0-`, 24 hex, `-`, 146 hex
    row(
        "Cloudflare",
        "cloudflare_origin_ca_key",
        &["v1.0-"],
        r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}",
    ),
    // Cloudflare API tokens: 40 base64url, read from the names wrangler and Terraform use
    keyed_row!(
        "Cloudflare",
        "cloudflare_api_token",
        ["CLOUDFLARE_API_TOKEN", "CF_API_TOKEN"],
        r"[A-Za-z0-9_-]{40}"
    ),
    // Cloudflare global API keys: 37 lower-case hex, sent as `X-Auth-Key`
    keyed_row!(
        "Cloudflare",
        "cloudflare_global_api_key",
        ["CLOUDFLARE_API_KEY", "CF_API_KEY", "X-Auth-Key"],
        r"[a-f0-9]{37}"
    ),
    // Fastly API tokens: 32 base64url, read from the CLI's variables or sent as `Fastly-Key`
    keyed_row!(
        "Fastly",
        "fastly_api_token",
        ["FASTLY_API_TOKEN", "FASTLY_API_KEY", "Fastly-Key"],
        r"[A-Za-z0-9_-]{32}"
    ),
    // Fly.io: org and deploy tokens `fo1_` and 43 base64url
    row("Fly.io", "flyio_token", &["fo1_"], r"fo1_[A-Za-z0-9_-]{43}"),
    // Fly.io: macaroon tokens (`FlyV1 fm2_…`, `fm1a_`, `fm1r_`), a long base64 run each
    row(
        "Fly.io",
        "flyio_macaroon",
        &["fm2_", "fm1a_", "fm1r_"],
        r"fm(?:2|1[ar])_[A-Za-z0-9+/]{100,1000}={0,3}",
    ),
    // Vercel changelog ("new token formats"): `vcp_` personal, `vci_` integration, `vca_` app
    // access, `vcr_` app refresh, `vck_` API key, each followed by a base64url run
    row(
        "Vercel",
        "vercel_token",
        &["vcp_", "vci_", "vca_", "vcr_", "vck_"],
        r"vc[piark]_[A-Za-z0-9_-]{24,64}",
    ),
    // Vercel: tokens from before the prefixed format are 24 letters and digits
    keyed_row!(
        "Vercel",
        "vercel_legacy_token",
        ["VERCEL_TOKEN", "VERCEL_ACCESS_TOKEN"],
        r"[A-Za-z0-9]{24}"
    ),
    // Netlify: personal access tokens `nfp_` and 36 letters, digits and `_` (trufflehog)
    row(
        "Netlify",
        "netlify_token",
        &["nfp_"],
        r"nfp_[A-Za-z0-9_]{36}",
    ),
    // Netlify: tokens from before the prefixed format, 43 to 45 base64url
    keyed_row!(
        "Netlify",
        "netlify_legacy_token",
        ["NETLIFY_AUTH_TOKEN"],
        r"[A-Za-z0-9_-]{43,45}"
    ),
    // Render: API keys `rnd_` and 28 to 32 letters and digits
    row(
        "Render",
        "render_api_key",
        &["rnd_"],
        r"rnd_[A-Za-z0-9]{28,32}",
    ),
    // Railway: project and account tokens are UUIDs, read from the CLI's variables
    keyed_row!(
        "Railway",
        "railway_token",
        ["RAILWAY_TOKEN", "RAILWAY_API_TOKEN"],
        uuid!()
    ),
    // Supabase: personal access tokens `sbp_` and 40 lower-case letters and digits
    row(
        "Supabase",
        "supabase_access_token",
        &["sbp_"],
        r"sbp_[a-z0-9]{40}",
    ),
    // Supabase docs (API keys): secret keys `sb_secret_`; as issued, 22 base64url, `_` and an
    // 8-character check (31 after the prefix)
    row(
        "Supabase",
        "supabase_secret_key",
        &["sb_secret_"],
        r"sb_secret_[A-Za-z0-9_-]{31}",
    ),
    // PlanetScale: service tokens `pscale_tkn_`, passwords `pscale_pw_`, OAuth tokens
    // `pscale_oauth_`, each 32 to 64 base64url (43 as issued)
    row(
        "PlanetScale",
        "planetscale_token",
        &["pscale_tkn_", "pscale_pw_", "pscale_oauth_"],
        r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_-]{32,64}",
    ),
    // Upstash: REST tokens, a base64url run, read from the SDK's variable
    keyed_row!(
        "Upstash",
        "upstash_rest_token",
        ["UPSTASH_REDIS_REST_TOKEN", "UPSTASH_VECTOR_REST_TOKEN"],
        r"[A-Za-z0-9_-]{40,120}={0,2}"
    ),
    // MongoDB Atlas: programmatic API private keys are UUIDs
    keyed_row!(
        "MongoDB Atlas",
        "mongodb_atlas_private_key",
        [
            "MONGODB_ATLAS_PRIVATE_KEY",
            "MONGODB_ATLAS_PRIVATE_API_KEY",
            "MCLI_PRIVATE_API_KEY"
        ],
        uuid!()
    ),
    // Databricks docs: personal access tokens `dapi` and 32 lower-case hex, optionally `-` and
    // a digit
    row(
        "Databricks",
        "databricks_token",
        &["dapi"],
        r"dapi[a-f0-9]{32}(?:-[0-9])?",
    ),
    // Confluent Cloud: API secrets are 64 characters of base64
    keyed_row!(
        "Confluent",
        "confluent_api_secret",
        ["CONFLUENT_CLOUD_API_SECRET", "CONFLUENT_API_SECRET"],
        r"[A-Za-z0-9+/]{64}"
    ),
    // Kubernetes docs (bootstrap tokens): `[a-z0-9]{6}.[a-z0-9]{16}`, given to `kubeadm` as
    // `--token`
    row(
        "Kubernetes",
        "kubernetes_bootstrap_token",
        &["--token"],
        r"--token[ =](?P<s>[a-z0-9]{6}\.[a-z0-9]{16})",
    ),
    // OpenShift: OAuth access tokens `sha256~` and 43 base64url
    row(
        "OpenShift",
        "openshift_token",
        &["sha256~"],
        r"sha256~[A-Za-z0-9_-]{43}",
    ),
    // Tailscale docs: `tskey-<type>-<key id>-<secret>` for auth, API, OAuth client, SCIM and
    // webhook keys
    row(
        "Tailscale",
        "tailscale_key",
        &["tskey-"],
        r"tskey-(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{8,24}-[A-Za-z0-9]{24,64}",
    ),
    // ngrok: authtokens and API keys, `2`, 26 letters and digits, `_`, a digit and 20 more
    keyed_row!(
        "ngrok",
        "ngrok_authtoken",
        ["authtoken", "NGROK_AUTHTOKEN", "NGROK_API_KEY"],
        r"2[A-Za-z0-9]{26}_[0-9][A-Za-z0-9]{20}"
    ),
    // Defined Networking: API tokens `dnkey-`, 26 characters, `-`, 52 characters
    row(
        "Defined Networking",
        "defined_networking_api_token",
        &["dnkey-"],
        r"dnkey-[A-Za-z0-9_=]{26}-[A-Za-z0-9_=]{52}",
    ),
    // ---- HashiCorp ----
    // Vault docs (tokens): service `hvs.`, batch `hvb.`, recovery `hvr.`, then base64url
    row(
        "HashiCorp",
        "vault_service_token",
        &["hvs."],
        r"hvs\.[A-Za-z0-9_-]{24,300}",
    ),
    row(
        "HashiCorp",
        "vault_batch_token",
        &["hvb."],
        r"hvb\.[A-Za-z0-9_-]{24,400}",
    ),
    row(
        "HashiCorp",
        "vault_recovery_token",
        &["hvr."],
        r"hvr\.[A-Za-z0-9_-]{24,300}",
    ),
    // Terraform Cloud / Vagrant Cloud: a 14-character id, `.atlasv1.`, and the secret, 60 to 70
    // base64url; the id before the keyword stays, the secret after it goes
    row(
        "HashiCorp",
        "terraform_cloud_token",
        &[".atlasv1."],
        r"\.atlasv1\.[A-Za-z0-9_=-]{60,70}",
    ),
    // ---- secret managers and encryption ----
    // Doppler docs: `dp.pt.` personal, `dp.ct.` CLI, `dp.sa.` service account, `dp.scim.`,
    // `dp.audit.`, and `dp.st.` service tokens (with the config's name), then 40 to 44 base62
    row(
        "Doppler",
        "doppler_token",
        &[
            "dp.pt.",
            "dp.ct.",
            "dp.sa.",
            "dp.scim.",
            "dp.audit.",
            "dp.st.",
        ],
        r"dp\.(?:pt|ct|sa|scim|audit|st(?:\.[a-z0-9_-]{2,35})?)\.[A-Za-z0-9]{40,44}",
    ),
    // 1Password: service account tokens `ops_` and a base64 JSON document (`eyJ…`), hundreds of
    // characters
    row(
        "1Password",
        "onepassword_service_account_token",
        &["ops_eyJ"],
        r"ops_eyJ[A-Za-z0-9+/_-]{250,1000}={0,3}",
    ),
    // 1Password secret keys: `A3-`, then dash-separated groups of upper-case letters and digits
    // (6, 6-5 or 11, then 5, 5, 5)
    row(
        "1Password",
        "onepassword_secret_key",
        &["A3-"],
        r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
    ),
    // Bitwarden Secrets Manager access tokens: `0.`, the service account's UUID, `.`, a
    // 30-character client secret, `:`, and the 16-byte encryption key in base64 (22 and `==`);
    // keyed on `BWS_ACCESS_TOKEN`, the variable `bws` and the SDKs read (`0.` alone starts
    // every timing a test log prints)
    keyed_row!(
        "Bitwarden",
        "bitwarden_access_token",
        ["BWS_ACCESS_TOKEN"],
        concat!(r"0\.", uuid!(), r"\.[A-Za-z0-9]{30}:[A-Za-z0-9+/]{22}==")
    ),
    // age: secret keys `AGE-SECRET-KEY-1` and 58 characters of upper-case bech32
    row(
        "age",
        "age_secret_key",
        &["AGE-SECRET-KEY-1"],
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
    ),
    // Pulumi: access tokens `pul-` and 40 lower-case hex
    row(
        "Pulumi",
        "pulumi_access_token",
        &["pul-"],
        r"pul-[a-f0-9]{40}",
    ),
];
