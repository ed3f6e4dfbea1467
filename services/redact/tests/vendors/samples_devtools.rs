//! Samples of the rows in `src/vendors/table/devtools.rs`.

use super::{Positive, Sample, after, keyed, whole};

pub(super) const SAMPLES: &[Sample] = &[
    Sample {
        kind: "github_token",
        // glued to a word: only the checksum row reads it
        positive: |g| {
            let token = format!("ghp_{}", g.crc32_body());
            Positive {
                text: format!("token{token}"),
                secret: token,
            }
        },
        lookalike: |g| format!("xghp_{}", g.alnum(36)),
    },
    Sample {
        kind: "gitlab_session_cookie",
        positive: |g| {
            let value = g.hex(32);
            Positive {
                text: format!("Cookie: _gitlab_session={value}; path=/"),
                secret: value,
            }
        },
        lookalike: |_| "Cookie: _gitlab_session=deleted; path=/".to_owned(),
    },
    Sample {
        kind: "gitlab_feature_flag_client_token",
        positive: |g| whole(format!("glffct-{}", g.b64url(20))),
        lookalike: |g| format!("glffct-{}", g.alnum(8)),
    },
    Sample {
        kind: "atlassian_api_token",
        positive: |g| whole(format!("ATATT3xFfGF0{}={}", g.b64url(171), g.upper_hex(8))),
        lookalike: |g| format!("ATATT3xFfGF0{}", g.alnum(30)),
    },
    Sample {
        kind: "bitbucket_app_password",
        positive: |g| whole(format!("ATBB{}", g.alnum(32))),
        lookalike: |g| format!("ATBB{}", g.alnum(12)),
    },
    Sample {
        kind: "gitea_token",
        positive: |g| keyed("GITEA_TOKEN", g.hex(40)),
        lookalike: |_| "GITEA_TOKEN=${{ secrets.GITEA_TOKEN }}".to_owned(),
    },
    Sample {
        kind: "gitee_token",
        positive: |g| keyed("GITEE_TOKEN", g.hex(32)),
        lookalike: |g| format!("GITEE_TOKEN={}", g.hex(12)),
    },
    Sample {
        kind: "sourcegraph_access_token",
        positive: |g| whole(format!("sgp_{}_{}", g.hex(16), g.hex(40))),
        lookalike: |g| format!("sgp_{}", g.hex(20)),
    },
    Sample {
        kind: "sourcegraph_cody_token",
        positive: |g| whole(format!("slk_{}", g.hex(64))),
        lookalike: |g| format!("slk_{}", g.hex(32)),
    },
    Sample {
        kind: "jetbrains_permanent_token",
        positive: |g| whole(format!("perm:cm9vdA==.NDQtMQ==.{}", g.alnum(30))),
        lookalike: |_| "perm:read,write".to_owned(),
    },
    Sample {
        kind: "teamcity_access_token",
        positive: |g| {
            whole(format!(
                "eyJ0eXAiOiAiVENWMiJ9.{}.{}",
                g.alnum(36),
                g.b64url(48)
            ))
        },
        lookalike: |g| format!("eyJ0eXAiOiAiVENWMiJ9.{}", g.alnum(12)),
    },
    Sample {
        kind: "circleci_token",
        positive: |g| whole(format!("CCIPAT_{}_{}", g.alnum(22), g.hex(40))),
        lookalike: |g| format!("CCIPAT_{}", g.alnum(22)),
    },
    Sample {
        kind: "buildkite_api_token",
        positive: |g| whole(format!("bkua_{}", g.lower(40))),
        lookalike: |g| format!("bkua_{}", g.lower(20)),
    },
    Sample {
        kind: "travis_ci_token",
        positive: |g| keyed("TRAVIS_API_TOKEN", g.b64url(22)),
        lookalike: |g| format!("TRAVIS_API_TOKEN={}", g.alnum(10)),
    },
    Sample {
        kind: "harness_token",
        positive: |g| {
            whole(format!(
                "pat.{}.{}.{}",
                g.b64url(22),
                g.alnum(24),
                g.alnum(20)
            ))
        },
        lookalike: |_| "pat.example.token".to_owned(),
    },
    Sample {
        kind: "octopus_deploy_api_key",
        positive: |g| whole(format!("API-{}", g.upper(26))),
        lookalike: |_| "API-KEY-ROTATION".to_owned(),
    },
    Sample {
        kind: "infracost_api_key",
        positive: |g| whole(format!("ico-{}", g.alnum(32))),
        lookalike: |g| format!("ico-{}", g.alnum(12)),
    },
    Sample {
        kind: "codecov_token",
        positive: |g| keyed("CODECOV_TOKEN", g.uuid()),
        lookalike: |_| "CODECOV_TOKEN=${{ secrets.CODECOV_TOKEN }}".to_owned(),
    },
    Sample {
        kind: "coveralls_repo_token",
        positive: |g| keyed("COVERALLS_REPO_TOKEN", g.alnum(32)),
        lookalike: |g| format!("COVERALLS_REPO_TOKEN={}", g.alnum(12)),
    },
    Sample {
        kind: "codacy_token",
        positive: |g| keyed("CODACY_PROJECT_TOKEN", g.hex(32)),
        lookalike: |_| "CODACY_PROJECT_TOKEN=<token>".to_owned(),
    },
    Sample {
        kind: "codeclimate_reporter_id",
        positive: |g| keyed("CC_TEST_REPORTER_ID", g.hex(64)),
        lookalike: |g| format!("CC_TEST_REPORTER_ID={}", g.hex(32)),
    },
    Sample {
        kind: "semgrep_app_token",
        positive: |g| keyed("SEMGREP_APP_TOKEN", g.hex(64)),
        lookalike: |g| format!("SEMGREP_APP_TOKEN={}", g.hex(12)),
    },
    Sample {
        kind: "snyk_token",
        positive: |g| keyed("SNYK_TOKEN", g.uuid()),
        lookalike: |_| "SNYK_TOKEN=<api-token>".to_owned(),
    },
    Sample {
        kind: "sonarqube_token",
        positive: |g| whole(format!("squ_{}", g.hex(40))),
        lookalike: |g| format!("squ_{}", g.hex(20)),
    },
    Sample {
        kind: "sonarcloud_token",
        positive: |g| whole(format!("sqco_{}", g.alnum(59))),
        lookalike: |g| format!("sqco_{}", g.alnum(20)),
    },
    Sample {
        kind: "stackhawk_api_key",
        positive: |g| whole(format!("hawk.{}.{}", g.b64url(20), g.b64url(20))),
        lookalike: |_| "hawk.yml".to_owned(),
    },
    Sample {
        kind: "dependency_track_api_key",
        positive: |g| whole(format!("odt_{}", g.alnum(32))),
        lookalike: |g| format!("odt_{}", g.alnum(16)),
    },
    Sample {
        kind: "npm_token",
        positive: |g| whole(format!("npm_{}", g.crc32_body())),
        lookalike: |g| format!("npm_{}", g.lower(20)),
    },
    Sample {
        kind: "docker_personal_access_token",
        positive: |g| whole(format!("dckr_pat_{}", g.b64url(27))),
        lookalike: |g| format!("dckr_pat_{}", g.alnum(10)),
    },
    Sample {
        kind: "docker_organization_access_token",
        positive: |g| whole(format!("dckr_oat_{}", g.b64url(32))),
        lookalike: |g| format!("dckr_oat_{}", g.alnum(10)),
    },
    Sample {
        kind: "docker_config_auth",
        // base64 of `user:password`
        positive: |g| {
            use base64::Engine as _;
            let pair = format!("ci-bot:{}", g.alnum(20));
            let auth = base64::engine::general_purpose::STANDARD.encode(pair);
            after("{\"auths\": {\"ghcr.io\": {\"auth\": \"", auth)
        },
        lookalike: |_| "{\"auths\": {\"ghcr.io\": {\"auth\": true}}}".to_owned(),
    },
    Sample {
        kind: "nuget_api_key",
        positive: |g| whole(format!("oy2{}", g.lower(43))),
        lookalike: |g| format!("oy2{}", g.lower(20)),
    },
    Sample {
        kind: "crates_io_token",
        positive: |g| whole(format!("cio{}", g.alnum(32))),
        lookalike: |_| "ciopa-configuration".to_owned(),
    },
    Sample {
        kind: "rubygems_api_key",
        positive: |g| whole(format!("rubygems_{}", g.hex(48))),
        lookalike: |_| "rubygems_version_3_4".to_owned(),
    },
    Sample {
        kind: "clojars_deploy_token",
        positive: |g| whole(format!("CLOJARS_{}", g.lower(60))),
        lookalike: |_| "CLOJARS_USERNAME".to_owned(),
    },
    Sample {
        kind: "hex_api_key",
        positive: |g| keyed("HEX_API_KEY", g.hex(32)),
        lookalike: |g| format!("HEX_API_KEY={}", g.hex(12)),
    },
    Sample {
        kind: "artifactory_api_key",
        positive: |g| whole(format!("AKCp{}", g.alnum(69))),
        lookalike: |g| format!("AKCp{}", g.alnum(20)),
    },
    Sample {
        kind: "artifactory_reference_token",
        positive: |g| whole(format!("cmVmdGtuOjAxOj{}", g.alnum(50))),
        lookalike: |g| format!("cmVmdGtu{}", g.alnum(20)),
    },
    Sample {
        kind: "sidekiq_gem_credentials",
        positive: |g| {
            keyed(
                "BUNDLE_GEMS__CONTRIBSYS__COM",
                format!("{}:{}", g.hex(8), g.hex(8)),
            )
        },
        lookalike: |_| "BUNDLE_GEMS__CONTRIBSYS__COM=user:token".to_owned(),
    },
    Sample {
        kind: "linear_api_key",
        positive: |g| whole(format!("lin_api_{}", g.alnum(40))),
        lookalike: |g| format!("lin_api_{}", g.alnum(12)),
    },
    Sample {
        kind: "notion_integration_token",
        positive: |g| whole(format!("ntn_{}{}", g.digits(11), g.alnum(35))),
        lookalike: |g| format!("ntn_{}", g.alnum(20)),
    },
    Sample {
        kind: "notion_legacy_integration_token",
        positive: |g| whole(format!("secret_{}", g.alnum(43))),
        lookalike: |_| "secret_key_base".to_owned(),
    },
    Sample {
        kind: "postman_api_key",
        positive: |g| whole(format!("PMAK-{}-{}", g.hex(24), g.hex(34))),
        lookalike: |g| format!("PMAK-{}", g.hex(24)),
    },
    Sample {
        kind: "sentry_user_token",
        positive: |g| whole(format!("sntryu_{}", g.hex(64))),
        lookalike: |g| format!("sntryu_{}", g.hex(32)),
    },
    Sample {
        kind: "sentry_org_token",
        positive: |g| whole(format!("sntrys_eyJpYXQiO{}_{}", g.b64(150), g.b64(43))),
        lookalike: |g| format!("sntrys_eyJpYXQiO{}", g.b64(40)),
    },
    Sample {
        kind: "airtable_personal_access_token",
        positive: |g| whole(format!("pat{}.{}", g.alnum(14), g.hex(64))),
        lookalike: |_| "path.to.pattern.patch".to_owned(),
    },
    Sample {
        kind: "asana_personal_access_token",
        positive: |g| {
            keyed(
                "ASANA_ACCESS_TOKEN",
                format!("2/{}/{}:{}", g.digits(16), g.digits(16), g.hex(32)),
            )
        },
        lookalike: |_| "ASANA_ACCESS_TOKEN=<personal-access-token>".to_owned(),
    },
    Sample {
        kind: "trello_token",
        positive: |g| {
            keyed(
                "TRELLO_TOKEN",
                format!("ATTA{}{}", g.hex(64), g.upper_hex(8)),
            )
        },
        lookalike: |g| format!("TRELLO_TOKEN={}", g.hex(12)),
    },
    Sample {
        kind: "figma_personal_access_token",
        positive: |g| whole(format!("figd_{}", g.b64url(40))),
        lookalike: |g| format!("figd_{}", g.alnum(12)),
    },
    Sample {
        kind: "contentful_personal_access_token",
        positive: |g| whole(format!("CFPAT-{}", g.b64url(43))),
        lookalike: |g| format!("CFPAT-{}", g.alnum(12)),
    },
    Sample {
        kind: "readme_api_key",
        positive: |g| whole(format!("rdme_{}", g.lower(70))),
        lookalike: |g| format!("rdme_{}", g.lower(20)),
    },
    Sample {
        kind: "typeform_personal_access_token",
        positive: |g| whole(format!("tfp_{}", g.alnum(59))),
        lookalike: |g| format!("tfp_{}", g.alnum(20)),
    },
    Sample {
        kind: "frameio_developer_token",
        positive: |g| whole(format!("fio-u-{}", g.b64url(64))),
        lookalike: |g| format!("fio-u-{}", g.alnum(20)),
    },
    Sample {
        kind: "prefect_api_key",
        positive: |g| whole(format!("pnu_{}", g.alnum(36))),
        lookalike: |g| format!("pnu_{}", g.alnum(12)),
    },
    Sample {
        kind: "scalingo_api_token",
        positive: |g| whole(format!("tk-us-{}", g.b64url(48))),
        lookalike: |g| format!("tk-us-{}", g.alnum(12)),
    },
    Sample {
        kind: "lokalise_api_token",
        positive: |g| keyed("LOKALISE_API_TOKEN", g.hex(40)),
        lookalike: |g| format!("LOKALISE_API_TOKEN={}", g.hex(12)),
    },
    Sample {
        kind: "crowdin_personal_token",
        positive: |g| keyed("CROWDIN_PERSONAL_TOKEN", g.alnum(80)),
        lookalike: |_| "CROWDIN_PERSONAL_TOKEN=<personal-access-token>".to_owned(),
    },
    Sample {
        kind: "transifex_api_token",
        positive: |g| whole(format!("1/{}", g.hex(40))),
        lookalike: |_| "1/2 of the tests ran".to_owned(),
    },
    Sample {
        kind: "ionic_personal_access_token",
        positive: |g| whole(format!("ion_{}", g.alnum(42))),
        lookalike: |g| format!("ion_{}", g.alnum(12)),
    },
    Sample {
        kind: "deno_deploy_token",
        positive: |g| whole(format!("ddp_{}", g.alnum(36))),
        lookalike: |g| format!("ddp_{}", g.alnum(12)),
    },
    Sample {
        kind: "clickhouse_cloud_secret_key",
        positive: |g| whole(format!("4b1d{}", g.alnum(38))),
        lookalike: |g| format!("4b1d{}", g.hex(12)),
    },
    Sample {
        kind: "intra42_client_secret",
        positive: |g| whole(format!("s-s4t2ud-{}", g.hex(64))),
        lookalike: |g| format!("u-s4t2ud-{}", g.hex(64)),
    },
    Sample {
        kind: "settlemint_access_token",
        positive: |g| whole(format!("sm_pat_{}", g.alnum(16))),
        lookalike: |g| format!("sm_pat_{}", g.alnum(8)),
    },
    Sample {
        kind: "adafruit_io_key",
        positive: |g| whole(format!("aio_{}", g.alnum(28))),
        lookalike: |g| format!("aio_{}", g.alnum(12)),
    },
    Sample {
        kind: "maxmind_license_key",
        positive: |g| {
            keyed(
                "MAXMIND_LICENSE_KEY",
                format!("{}_{}_mmk", g.alnum(6), g.alnum(29)),
            )
        },
        lookalike: |_| "MAXMIND_LICENSE_KEY=<license-key>".to_owned(),
    },
    Sample {
        kind: "mapbox_secret_token",
        positive: |g| whole(format!("sk.eyJ1Ijoi{}.{}", g.b64url(60), g.b64url(22))),
        lookalike: |g| format!("sk.eyJ1Ijoi{}", g.b64url(20)),
    },
    Sample {
        kind: "dropbox_access_token",
        positive: |g| whole(format!("sl.{}", g.b64url(140))),
        lookalike: |_| "sl.no and sl.u.example".to_owned(),
    },
    Sample {
        kind: "rapidapi_key",
        positive: |g| {
            let key = format!("{}msh{}p{}jsn{}", g.hex(10), g.hex(15), g.hex(6), g.hex(12));
            Positive {
                text: format!("x-rapidapi-key: {key}"),
                secret: key,
            }
        },
        lookalike: |_| "x-rapidapi-key: <your-rapidapi-key>".to_owned(),
    },
    Sample {
        kind: "zapier_webhook",
        positive: |g| {
            let path = format!("{}/{}", g.digits(7), g.lower(7));
            Positive {
                text: format!("https://hooks.zapier.com/hooks/catch/{path}/"),
                secret: path,
            }
        },
        lookalike: |_| "https://hooks.zapier.com/hooks/catch/".to_owned(),
    },
    Sample {
        kind: "make_webhook",
        positive: |g| {
            let key = g.lower(32);
            Positive {
                text: format!("https://hook.eu1.make.com/{key}"),
                secret: key,
            }
        },
        lookalike: |g| format!("https://hook.eu1.make.com/{}", g.lower(12)),
    },
    Sample {
        kind: "ifttt_webhook_key",
        positive: |g| {
            let key = g.b64url(22);
            Positive {
                text: format!("https://maker.ifttt.com/trigger/deploy_done/with/key/{key}"),
                secret: key,
            }
        },
        lookalike: |_| "https://maker.ifttt.com/trigger/deploy_done/with/key/{key}".to_owned(),
    },
];
