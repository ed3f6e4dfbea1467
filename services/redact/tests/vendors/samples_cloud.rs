//! Samples of the rows in `src/vendors/table/cloud.rs`.

use super::{Gen, Positive, Sample, after, keyed, whole};

/// Entra client secrets' alphabets: the head's and the tail's.
const ENTRA_HEAD: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_~.";
const ENTRA_TAIL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_~.-";

/// A SAS signature as a URL writes it: 43 base64 characters, `+` and `/` percent-encoded, and
/// an encoded `=`.
fn sas_signature(g: &mut Gen) -> String {
    let raw = g.b64(43);
    let mut sig = raw.replace('+', "%2B").replace('/', "%2F");
    sig.push_str("%3D");
    sig
}

pub(super) const SAMPLES: &[Sample] = &[
    Sample {
        kind: "azure_storage_key",
        positive: |g| after("AccountKey=", format!("{}==", g.b64(86))),
        lookalike: |_| "AccountKey=<your-storage-key>".to_owned(),
    },
    Sample {
        kind: "azure_sas_signature",
        positive: |g| {
            let sig = sas_signature(g);
            Positive {
                text: format!(
                    "https://acct.blob.core.windows.net/logs/run.txt?sv=2022-11-02&sp=r&sr=b&se=2030-01-01T00%3A00%3A00Z&sig={sig}"
                ),
                secret: sig,
            }
        },
        // a signature too short to be an HMAC, and a placeholder
        lookalike: |g| format!("?sv=2022-11-02&sig={}&sig=<signature>", g.alnum(20)),
    },
    Sample {
        kind: "azure_shared_access_key",
        positive: |g| {
            let key = format!("{}=", g.b64(43));
            Positive {
                text: format!(
                    "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={key}"
                ),
                secret: key,
            }
        },
        lookalike: |_| {
            "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=<key>".to_owned()
        },
    },
    Sample {
        kind: "azure_signalr_access_key",
        positive: |g| {
            let key = format!("{}=", g.b64(43));
            Positive {
                text: format!(
                    "Endpoint=https://chat.service.signalr.net;AccessKey={key};Version=1.0;"
                ),
                secret: key,
            }
        },
        lookalike: |g| {
            format!(
                "Endpoint=https://chat.service.signalr.net;AccessKey={};",
                g.b64(12)
            )
        },
    },
    Sample {
        kind: "azure_app_configuration_secret",
        positive: |g| {
            let secret = format!("{}=", g.b64(43));
            Positive {
                text: format!(
                    "Endpoint=https://cfg.azconfig.io;Id=abcd-l0-s0:{};Secret={secret}",
                    g.alnum(20)
                ),
                secret,
            }
        },
        lookalike: |_| "Endpoint=https://cfg.azconfig.io;Id=<id>;Secret=<secret>".to_owned(),
    },
    Sample {
        kind: "azure_ad_client_secret",
        positive: |g| {
            let secret = format!(
                "{}{}Q~{}",
                g.from(ENTRA_HEAD, 3),
                g.digits(1),
                g.from(ENTRA_TAIL, 34)
            );
            keyed("AZURE_CLIENT_SECRET", secret)
        },
        // no `Q~` where the format puts it
        lookalike: |g| format!("AZURE_CLIENT_SECRET={}", g.alnum(12)),
    },
    Sample {
        kind: "aws_bedrock_api_key",
        positive: |g| whole(format!("ABSK{}=", g.b64(139))),
        lookalike: |g| format!("ABSK{}", g.b64(40)),
    },
    Sample {
        kind: "aws_session_token",
        positive: |g| whole(format!("IQoJb3JpZ2luX2Vj{}", g.b64(420))),
        lookalike: |g| format!("IQoJb3JpZ2luX2Vj{}", g.b64(40)),
    },
    Sample {
        kind: "aws_appsync_api_key",
        positive: |g| whole(format!("da2-{}", g.lower(26))),
        lookalike: |g| format!("da2-{}", g.lower(12)),
    },
    Sample {
        kind: "amazon_mws_auth_token",
        positive: |g| whole(format!("amzn.mws.{}", g.uuid())),
        lookalike: |_| "amzn.mws.<auth-token>".to_owned(),
    },
    Sample {
        kind: "google_oauth_client_secret",
        positive: |g| whole(format!("GOCSPX-{}", g.b64url(28))),
        lookalike: |g| format!("GOCSPX-{}", g.alnum(10)),
    },
    Sample {
        kind: "google_oauth_access_token",
        positive: |g| whole(format!("ya29.{}", g.b64url(180))),
        lookalike: |_| "ya29.<access-token>".to_owned(),
    },
    Sample {
        kind: "google_oauth_refresh_token",
        positive: |g| whole(format!("1//0{}", g.b64url(100))),
        lookalike: |g| format!("1//0{}", g.alnum(10)),
    },
    Sample {
        kind: "firebase_fcm_server_key",
        positive: |g| whole(format!("AAAA{}:APA91b{}", g.b64url(7), g.b64url(134))),
        lookalike: |g| format!("AAAA{}:APA91b{}", g.b64url(7), g.b64url(40)),
    },
    Sample {
        kind: "digitalocean_token",
        positive: |g| whole(format!("dop_v1_{}", g.hex(64))),
        lookalike: |g| format!("dop_v1_{}", g.hex(40)),
    },
    Sample {
        kind: "heroku_api_key",
        positive: |g| whole(format!("HRKU-AA{}", g.b64url(58))),
        lookalike: |g| format!("HRKU-AA{}", g.alnum(20)),
    },
    Sample {
        kind: "alibaba_access_key_id",
        positive: |g| whole(format!("LTAI{}", g.alnum(20))),
        // a longer run is some other identifier
        lookalike: |g| format!("LTAI{}", g.alnum(30)),
    },
    Sample {
        kind: "tencent_secret_id",
        positive: |g| whole(format!("AKID{}", g.alnum(32))),
        lookalike: |g| format!("AKID{}", g.alnum(16)),
    },
    Sample {
        kind: "yandex_cloud_api_key",
        positive: |g| whole(format!("AQVN{}", g.b64url(36))),
        lookalike: |g| format!("AQVN{}", g.alnum(12)),
    },
    Sample {
        kind: "yandex_cloud_iam_token",
        positive: |g| whole(format!("t1.9euelZq{}.{}", g.b64url(140), g.b64url(86))),
        lookalike: |_| "instance type t1.micro, t1.small".to_owned(),
    },
    Sample {
        kind: "huaweicloud_secret_key",
        positive: |g| keyed("HW_SECRET_KEY", g.alnum(40)),
        lookalike: |_| "HW_SECRET_KEY=${{ secrets.HW_SECRET_KEY }}".to_owned(),
    },
    Sample {
        kind: "ibm_cloud_api_key",
        positive: |g| keyed("IBMCLOUD_API_KEY", g.b64url(44)),
        lookalike: |g| format!("IBMCLOUD_API_KEY={}", g.alnum(12)),
    },
    Sample {
        kind: "softlayer_api_key",
        positive: |g| keyed("SL_API_KEY", g.hex(64)),
        lookalike: |_| "SL_API_KEY=${SL_API_KEY}".to_owned(),
    },
    Sample {
        kind: "linode_token",
        positive: |g| keyed("LINODE_TOKEN", g.hex(64)),
        lookalike: |_| "LINODE_TOKEN=$(cat ~/.config/linode-token)".to_owned(),
    },
    Sample {
        kind: "vultr_api_key",
        positive: |g| keyed("VULTR_API_KEY", g.upper(36)),
        lookalike: |g| format!("VULTR_API_KEY={}", g.upper(12)),
    },
    Sample {
        kind: "hetzner_cloud_token",
        positive: |g| keyed("HCLOUD_TOKEN", g.alnum(64)),
        lookalike: |g| format!("HCLOUD_TOKEN={}", g.alnum(12)),
    },
    Sample {
        kind: "scaleway_access_key",
        positive: |g| whole(format!("SCW{}", g.upper(17))),
        lookalike: |g| format!("SCW{}", g.lower(17)),
    },
    Sample {
        kind: "scaleway_secret_key",
        positive: |g| keyed("SCW_SECRET_KEY", g.uuid()),
        lookalike: |_| "SCW_SECRET_KEY=<secret-key-uuid>".to_owned(),
    },
    Sample {
        kind: "ovh_application_secret",
        positive: |g| keyed("OVH_APPLICATION_SECRET", g.alnum(32)),
        lookalike: |g| format!("OVH_APPLICATION_SECRET={}", g.alnum(12)),
    },
    Sample {
        kind: "cloudflare_origin_ca_key",
        positive: |g| whole(format!("v1.0-{}-{}", g.hex(24), g.hex(146))),
        lookalike: |_| "v1.0-beta release notes".to_owned(),
    },
    Sample {
        kind: "cloudflare_api_token",
        positive: |g| keyed("CLOUDFLARE_API_TOKEN", g.b64url(40)),
        lookalike: |g| format!("CLOUDFLARE_API_TOKEN={}", g.alnum(12)),
    },
    Sample {
        kind: "cloudflare_global_api_key",
        positive: |g| {
            let key = g.hex(37);
            Positive {
                text: format!("X-Auth-Key: {key}"),
                secret: key,
            }
        },
        lookalike: |_| "X-Auth-Key: $CLOUDFLARE_API_KEY".to_owned(),
    },
    Sample {
        kind: "fastly_api_token",
        positive: |g| keyed("FASTLY_API_TOKEN", g.b64url(32)),
        lookalike: |_| "FASTLY_API_TOKEN=<token>".to_owned(),
    },
    Sample {
        kind: "flyio_token",
        positive: |g| whole(format!("fo1_{}", g.b64url(43))),
        lookalike: |g| format!("fo1_{}", g.alnum(12)),
    },
    Sample {
        kind: "flyio_macaroon",
        positive: |g| {
            let token = format!("fm2_{}", g.b64(400));
            Positive {
                text: format!("FlyV1 {token}"),
                secret: token,
            }
        },
        lookalike: |g| format!("FlyV1 fm2_{}", g.alnum(30)),
    },
    Sample {
        kind: "vercel_token",
        positive: |g| whole(format!("vcp_{}", g.b64url(56))),
        lookalike: |g| format!("vcp_{}", g.alnum(10)),
    },
    Sample {
        kind: "vercel_legacy_token",
        positive: |g| keyed("VERCEL_TOKEN", g.alnum(24)),
        lookalike: |_| "VERCEL_TOKEN=${{ secrets.VERCEL_TOKEN }}".to_owned(),
    },
    Sample {
        kind: "netlify_token",
        positive: |g| whole(format!("nfp_{}", g.alnum(36))),
        lookalike: |g| format!("nfp_{}", g.alnum(20)),
    },
    Sample {
        kind: "netlify_legacy_token",
        positive: |g| keyed("NETLIFY_AUTH_TOKEN", g.b64url(43)),
        lookalike: |g| format!("NETLIFY_AUTH_TOKEN={}", g.alnum(12)),
    },
    Sample {
        kind: "render_api_key",
        positive: |g| whole(format!("rnd_{}", g.alnum(28))),
        lookalike: |g| format!("rnd_{}", g.alnum(12)),
    },
    Sample {
        kind: "railway_token",
        positive: |g| keyed("RAILWAY_TOKEN", g.uuid()),
        lookalike: |_| "RAILWAY_TOKEN=<project-token>".to_owned(),
    },
    Sample {
        kind: "supabase_access_token",
        positive: |g| whole(format!("sbp_{}", g.hex(40))),
        lookalike: |g| format!("sbp_{}", g.hex(20)),
    },
    Sample {
        kind: "supabase_secret_key",
        positive: |g| whole(format!("sb_secret_{}_{}", g.b64url(22), g.alnum(8))),
        lookalike: |_| "sb_secret_key_here".to_owned(),
    },
    Sample {
        kind: "planetscale_token",
        positive: |g| whole(format!("pscale_tkn_{}", g.alnum(43))),
        lookalike: |g| format!("pscale_tkn_{}", g.alnum(12)),
    },
    Sample {
        kind: "upstash_rest_token",
        positive: |g| keyed("UPSTASH_REDIS_REST_TOKEN", format!("{}=", g.b64url(64))),
        lookalike: |_| "UPSTASH_REDIS_REST_TOKEN=<token>".to_owned(),
    },
    Sample {
        kind: "mongodb_atlas_private_key",
        positive: |g| keyed("MONGODB_ATLAS_PRIVATE_KEY", g.uuid()),
        lookalike: |_| "MONGODB_ATLAS_PRIVATE_KEY=<private-key>".to_owned(),
    },
    Sample {
        kind: "databricks_token",
        positive: |g| whole(format!("dapi{}", g.hex(32))),
        lookalike: |g| format!("dapi{}", g.upper_hex(32)),
    },
    Sample {
        kind: "confluent_api_secret",
        positive: |g| keyed("CONFLUENT_CLOUD_API_SECRET", g.b64(64)),
        lookalike: |g| format!("CONFLUENT_CLOUD_API_SECRET={}", g.alnum(12)),
    },
    Sample {
        kind: "kubernetes_bootstrap_token",
        positive: |g| {
            let token = format!("{}.{}", g.lower(6), g.lower(16));
            Positive {
                text: format!("kubeadm join 10.0.0.1:6443 --token {token}"),
                secret: token,
            }
        },
        lookalike: |_| "kubeadm join 10.0.0.1:6443 --token <token>".to_owned(),
    },
    Sample {
        kind: "openshift_token",
        positive: |g| whole(format!("sha256~{}", g.b64url(43))),
        lookalike: |g| format!("sha256~{}", g.hex(12)),
    },
    Sample {
        kind: "tailscale_key",
        positive: |g| whole(format!("tskey-auth-{}CNTRL-{}", g.alnum(7), g.alnum(33))),
        lookalike: |_| "tskey-auth-<key>".to_owned(),
    },
    Sample {
        kind: "ngrok_authtoken",
        positive: |g| {
            let token = format!("2{}_{}{}", g.alnum(26), g.digits(1), g.alnum(20));
            Positive {
                text: format!("ngrok config add-authtoken {token}"),
                secret: token,
            }
        },
        lookalike: |_| "ngrok config add-authtoken $NGROK_AUTHTOKEN".to_owned(),
    },
    Sample {
        kind: "defined_networking_api_token",
        positive: |g| whole(format!("dnkey-{}-{}", g.upper(26), g.upper(52))),
        lookalike: |g| format!("dnkey-{}", g.upper(10)),
    },
    Sample {
        kind: "vault_service_token",
        positive: |g| whole(format!("hvs.{}", g.b64url(90))),
        lookalike: |g| format!("hvs.{}", g.alnum(10)),
    },
    Sample {
        kind: "vault_batch_token",
        positive: |g| whole(format!("hvb.{}", g.b64url(140))),
        lookalike: |_| "hvb.example".to_owned(),
    },
    Sample {
        kind: "vault_recovery_token",
        positive: |g| whole(format!("hvr.{}", g.alnum(24))),
        lookalike: |g| format!("hvr.{}", g.alnum(8)),
    },
    Sample {
        kind: "terraform_cloud_token",
        // the id before `.atlasv1.` stays; the secret after it goes
        positive: |g| {
            let secret = g.alnum(67);
            Positive {
                text: format!("{}.atlasv1.{secret}", g.alnum(14)),
                secret,
            }
        },
        lookalike: |g| format!("{}.atlasv1.{}", g.alnum(14), g.alnum(20)),
    },
    Sample {
        kind: "doppler_token",
        positive: |g| whole(format!("dp.st.dev.{}", g.alnum(40))),
        lookalike: |g| format!("dp.st.dev.{}", g.alnum(12)),
    },
    Sample {
        kind: "onepassword_service_account_token",
        positive: |g| whole(format!("ops_eyJ{}", g.b64(600))),
        lookalike: |g| format!("ops_eyJ{}", g.b64(40)),
    },
    Sample {
        kind: "onepassword_secret_key",
        positive: |g| {
            whole(format!(
                "A3-{}-{}-{}-{}-{}",
                g.upper(6),
                g.upper(11),
                g.upper(5),
                g.upper(5),
                g.upper(5)
            ))
        },
        lookalike: |g| format!("A3-{}-{}", g.upper(6), g.upper(6)),
    },
    Sample {
        kind: "bitwarden_access_token",
        positive: |g| {
            keyed(
                "BWS_ACCESS_TOKEN",
                format!("0.{}.{}:{}==", g.uuid(), g.alnum(30), g.b64(22)),
            )
        },
        lookalike: |_| "finished in 0.42s; BWS_ACCESS_TOKEN=<access-token>".to_owned(),
    },
    Sample {
        kind: "age_secret_key",
        positive: |g| whole(format!("AGE-SECRET-KEY-1{}", g.bech32_upper(58))),
        // `B`, `I`, `O` and `1` are not bech32
        lookalike: |g| format!("AGE-SECRET-KEY-1{}B", g.bech32_upper(57)),
    },
    Sample {
        kind: "pulumi_access_token",
        positive: |g| whole(format!("pul-{}", g.hex(40))),
        lookalike: |_| "pul-request-template".to_owned(),
    },
];
