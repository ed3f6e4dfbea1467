//! Source hosting, CI and delivery, package registries, productivity and developer APIs.

use super::row;
use crate::vendors::{Checksum, Rule};

pub(super) const ROWS: &[Rule] = &[
    // ---- source hosting ----
    // GitHub docs: a classic token glued to a word (tokens.rs reads it at a word's start); its
    // CRC32 is the evidence
    Rule {
        vendor: "GitHub",
        kind: "github_token",
        keywords: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        shape: r"gh[pousr]_[A-Za-z0-9]{36}",
        checksum: Checksum::Crc32Base62,
    },
    // GitLab docs: the session cookie `_gitlab_session`, 32 lower-case hex
    row(
        "GitLab",
        "gitlab_session_cookie",
        &["_gitlab_session="],
        r"_gitlab_session=(?P<s>[a-f0-9]{32})",
    ),
    // GitLab docs (token prefixes): feature flag client tokens `glffct-` and 20 base64url
    row(
        "GitLab",
        "gitlab_feature_flag_client_token",
        &["glffct-"],
        r"glffct-[A-Za-z0-9_-]{20}",
    ),
    // Atlassian: API tokens `ATATT3xFfGF0`, a base64url run, `=` and an 8-hex check (192 in all)
    row(
        "Atlassian",
        "atlassian_api_token",
        &["ATATT3xFfGF0"],
        r"ATATT3xFfGF0[A-Za-z0-9_-]{100,250}=[A-F0-9]{8}",
    ),
    // Bitbucket docs: app passwords `ATBB` and 32 letters and digits
    row(
        "Bitbucket",
        "bitbucket_app_password",
        &["ATBB"],
        r"ATBB[A-Za-z0-9]{32}",
    ),
    // Gitea: access tokens are 40 lower-case hex
    keyed_row!("Gitea", "gitea_token", ["GITEA_TOKEN"], r"[a-f0-9]{40}"),
    // Gitee: personal access tokens are 32 lower-case hex
    keyed_row!(
        "Gitee",
        "gitee_token",
        ["GITEE_TOKEN", "GITEE_ACCESS_TOKEN"],
        r"[a-f0-9]{32}"
    ),
    // Sourcegraph docs: access tokens `sgp_`, optionally the instance's 16 hex or `local` and
    // `_`, then 40 hex
    row(
        "Sourcegraph",
        "sourcegraph_access_token",
        &["sgp_"],
        r"sgp_(?:[a-f0-9]{16}_|local_)?[a-f0-9]{40}",
    ),
    // Sourcegraph Cody: gateway tokens `slk_` and 64 lower-case hex
    row(
        "Sourcegraph",
        "sourcegraph_cody_token",
        &["slk_"],
        r"slk_[a-f0-9]{64}",
    ),
    // JetBrains YouTrack / Hub docs: permanent tokens `perm:`, the base64 login, `.`, the base64
    // token name, `.`, 30 letters and digits
    row(
        "JetBrains",
        "jetbrains_permanent_token",
        &["perm:"],
        r"perm:[A-Za-z0-9+/=_-]{2,100}\.[A-Za-z0-9+/=_-]{2,100}\.[A-Za-z0-9]{30}",
    ),
    // JetBrains TeamCity: access tokens open with the header `{"typ": "TCV2"}` in base64url,
    // then `.`, 36 and `.`, 48 base64url
    row(
        "JetBrains",
        "teamcity_access_token",
        &["eyJ0eXAiOiAiVENWMiJ9."],
        r"eyJ0eXAiOiAiVENWMiJ9\.[A-Za-z0-9_-]{36}\.[A-Za-z0-9_-]{48}",
    ),
    // ---- CI and delivery ----
    // CircleCI changelog: personal `CCIPAT_` and project `CCIPRJ_` tokens, a base58 UUID (22),
    // `_`, 40 hex
    row(
        "CircleCI",
        "circleci_token",
        &["CCIPAT_", "CCIPRJ_"],
        r"CCIP(?:AT|RJ)_[A-Za-z0-9]{22}_[a-f0-9]{40}",
    ),
    // Buildkite: user API tokens `bkua_` and 40 lower-case letters and digits
    row(
        "Buildkite",
        "buildkite_api_token",
        &["bkua_"],
        r"bkua_[a-z0-9]{40}",
    ),
    // Travis CI: API tokens are 22 base64url
    keyed_row!(
        "Travis CI",
        "travis_ci_token",
        ["TRAVIS_API_TOKEN", "TRAVIS_TOKEN"],
        r"[A-Za-z0-9_-]{22}"
    ),
    // Harness: personal (`pat.`) and service account (`sat.`) tokens, the account id (22),
    // `.`, the token id (24), `.`, the secret (20)
    row(
        "Harness",
        "harness_token",
        &["pat.", "sat."],
        r"[ps]at\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}",
    ),
    // Octopus Deploy docs: API keys `API-` and 26 upper-case letters and digits
    row(
        "Octopus Deploy",
        "octopus_deploy_api_key",
        &["API-"],
        r"API-[A-Z0-9]{26}",
    ),
    // Infracost: API keys `ico-` and 32 letters and digits
    row(
        "Infracost",
        "infracost_api_key",
        &["ico-"],
        r"ico-[A-Za-z0-9]{32}",
    ),
    // Codecov: upload tokens are UUIDs
    keyed_row!("Codecov", "codecov_token", ["CODECOV_TOKEN"], uuid!()),
    // Coveralls: repo tokens are 32 to 40 letters and digits
    keyed_row!(
        "Coveralls",
        "coveralls_repo_token",
        ["COVERALLS_REPO_TOKEN"],
        r"[A-Za-z0-9]{32,40}"
    ),
    // Codacy: project and account API tokens are 20 to 40 letters and digits
    keyed_row!(
        "Codacy",
        "codacy_token",
        ["CODACY_PROJECT_TOKEN", "CODACY_API_TOKEN"],
        r"[A-Za-z0-9]{20,40}"
    ),
    // Code Climate: test reporter ids and repo tokens are 64 lower-case hex
    keyed_row!(
        "Code Climate",
        "codeclimate_reporter_id",
        ["CC_TEST_REPORTER_ID", "CODECLIMATE_REPO_TOKEN"],
        r"[a-f0-9]{64}"
    ),
    // Semgrep: app tokens are 64 lower-case hex
    keyed_row!(
        "Semgrep",
        "semgrep_app_token",
        ["SEMGREP_APP_TOKEN"],
        r"[a-f0-9]{64}"
    ),
    // Snyk: API tokens are UUIDs
    keyed_row!(
        "Snyk",
        "snyk_token",
        ["SNYK_TOKEN", "SNYK_API_TOKEN"],
        uuid!()
    ),
    // SonarQube docs: user `squ_`, project analysis `sqp_` and global analysis `sqa_` tokens,
    // each 40 lower-case hex
    row(
        "SonarSource",
        "sonarqube_token",
        &["squ_", "sqp_", "sqa_"],
        r"sq[upa]_[a-f0-9]{40}",
    ),
    // SonarQube Cloud: tokens `sqco_` and 59 letters and digits
    row(
        "SonarSource",
        "sonarcloud_token",
        &["sqco_"],
        r"sqco_[A-Za-z0-9]{59}",
    ),
    // StackHawk: API keys `hawk.`, 20 and `.`, 20 base64url
    row(
        "StackHawk",
        "stackhawk_api_key",
        &["hawk."],
        r"hawk\.[A-Za-z0-9_-]{20}\.[A-Za-z0-9_-]{20}",
    ),
    // Dependency-Track docs: API keys `odt_` and 32 or more letters and digits
    row(
        "OWASP Dependency-Track",
        "dependency_track_api_key",
        &["odt_"],
        r"odt_[A-Za-z0-9]{32,255}",
    ),
    // ---- package registries and artifact stores ----
    Rule {
        vendor: "npm",
        kind: "npm_token",
        keywords: &["npm_"],
        shape: r"npm_[A-Za-z0-9]{36}",
        checksum: Checksum::Crc32Base62,
    },
    // Docker docs: personal access tokens `dckr_pat_` and 27 base64url; organization access
    // tokens `dckr_oat_` and 32
    row(
        "Docker",
        "docker_personal_access_token",
        &["dckr_pat_"],
        r"dckr_pat_[A-Za-z0-9_-]{27}",
    ),
    row(
        "Docker",
        "docker_organization_access_token",
        &["dckr_oat_"],
        r"dckr_oat_[A-Za-z0-9_-]{32}",
    ),
    // NuGet: API keys `oy2` and 43 lower-case letters and digits
    row("NuGet", "nuget_api_key", &["oy2"], r"oy2[a-z0-9]{43}"),
    // crates.io source (util/token.rs): API tokens `cio` and 32 letters and digits
    row(
        "crates.io",
        "crates_io_token",
        &["cio"],
        r"cio[A-Za-z0-9]{32}",
    ),
    // RubyGems docs: API keys `rubygems_` and 48 lower-case hex
    row(
        "RubyGems",
        "rubygems_api_key",
        &["rubygems_"],
        r"rubygems_[a-f0-9]{48}",
    ),
    // Clojars: deploy tokens `CLOJARS_` and 60 letters and digits
    row(
        "Clojars",
        "clojars_deploy_token",
        &["CLOJARS_"],
        r"CLOJARS_[A-Za-z0-9]{60}",
    ),
    // Hex: API keys are 32 lower-case hex, read from `HEX_API_KEY`
    keyed_row!("Hex", "hex_api_key", ["HEX_API_KEY"], r"[a-f0-9]{32}"),
    // JFrog Artifactory: API keys `AKCp` and 69 letters and digits
    row(
        "JFrog",
        "artifactory_api_key",
        &["AKCp"],
        r"AKCp[A-Za-z0-9]{69}",
    ),
    // JFrog Artifactory: reference tokens, base64 of `reftkn:` (`cmVmdGtu`), 64 in all
    row(
        "JFrog",
        "artifactory_reference_token",
        &["cmVmdGtu"],
        r"cmVmdGtu[A-Za-z0-9]{56}",
    ),
    // Sidekiq Pro/Enterprise: gem server credentials `8 hex:8 hex`, read from Bundler's variables
    keyed_row!(
        "Sidekiq",
        "sidekiq_gem_credentials",
        [
            "BUNDLE_ENTERPRISE__CONTRIBSYS__COM",
            "BUNDLE_GEMS__CONTRIBSYS__COM"
        ],
        r"[a-f0-9]{8}:[a-f0-9]{8}"
    ),
    // ---- productivity and content ----
    // Linear docs: personal API keys `lin_api_` and 40 letters and digits
    row(
        "Linear",
        "linear_api_key",
        &["lin_api_"],
        r"lin_api_[A-Za-z0-9]{40}",
    ),
    // Notion docs: integration tokens, `ntn_`, 11 digits and 35 letters and digits, or (before
    // September 2024) `secret_` and 43 letters and digits
    row(
        "Notion",
        "notion_integration_token",
        &["ntn_"],
        r"ntn_[0-9]{11}[A-Za-z0-9]{35}",
    ),
    row(
        "Notion",
        "notion_legacy_integration_token",
        &["secret_"],
        r"secret_[A-Za-z0-9]{43}",
    ),
    // Postman docs: API keys `PMAK-`, 24 hex, `-`, 34 hex
    row(
        "Postman",
        "postman_api_key",
        &["PMAK-"],
        r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}",
    ),
    // Sentry docs: user auth tokens `sntryu_` and 64 hex
    row(
        "Sentry",
        "sentry_user_token",
        &["sntryu_"],
        r"sntryu_[a-f0-9]{64}",
    ),
    // Sentry docs: organization tokens `sntrys_`, base64 of a JSON document (`eyJ…`), `_`, and
    // a 43-character base64 secret
    row(
        "Sentry",
        "sentry_org_token",
        &["sntrys_"],
        r"sntrys_eyJ[A-Za-z0-9+/]{30,400}={0,2}_[A-Za-z0-9+/]{43}",
    ),
    // Airtable docs: personal access tokens `pat`, 14 letters and digits, `.`, 64 hex
    row(
        "Airtable",
        "airtable_personal_access_token",
        &["pat"],
        r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}",
    ),
    // Asana docs: personal access tokens `<version>/<user gid>[/<app gid>]:<32 hex>`
    keyed_row!(
        "Asana",
        "asana_personal_access_token",
        ["ASANA_ACCESS_TOKEN", "ASANA_TOKEN", "ASANA_PAT"],
        r"[0-9]/[0-9]{10,20}(?:/[0-9]{10,20})?:[a-f0-9]{32}"
    ),
    // Trello: user tokens, 64 hex, or `ATTA`, 64 hex and an 8-hex check
    keyed_row!(
        "Trello",
        "trello_token",
        ["TRELLO_TOKEN", "TRELLO_API_TOKEN"],
        r"ATTA[a-fA-F0-9]{72}|[a-f0-9]{64}"
    ),
    // Figma docs: personal access tokens `figd_` and 40 base64url
    row(
        "Figma",
        "figma_personal_access_token",
        &["figd_"],
        r"figd_[A-Za-z0-9_-]{40}",
    ),
    // Contentful docs: personal access tokens `CFPAT-` and 43 base64url
    row(
        "Contentful",
        "contentful_personal_access_token",
        &["CFPAT-"],
        r"CFPAT-[A-Za-z0-9_-]{43}",
    ),
    // ReadMe: API keys `rdme_` and 70 lower-case letters and digits
    row("ReadMe", "readme_api_key", &["rdme_"], r"rdme_[a-z0-9]{70}"),
    // Typeform: personal access tokens `tfp_` and 40 to 59 letters, digits and `_`
    row(
        "Typeform",
        "typeform_personal_access_token",
        &["tfp_"],
        r"tfp_[A-Za-z0-9_]{40,59}",
    ),
    // Frame.io: developer tokens `fio-u-` and 64 base64url
    row(
        "Frame.io",
        "frameio_developer_token",
        &["fio-u-"],
        r"fio-u-[A-Za-z0-9_=-]{64}",
    ),
    // Prefect docs: API keys, user `pnu_` and service account `pnb_`, 36 letters and digits
    row(
        "Prefect",
        "prefect_api_key",
        &["pnu_", "pnb_"],
        r"pn[ub]_[A-Za-z0-9]{36}",
    ),
    // Scalingo docs: API tokens `tk-us-` and 48 base64url
    row(
        "Scalingo",
        "scalingo_api_token",
        &["tk-us-"],
        r"tk-us-[A-Za-z0-9_-]{48}",
    ),
    // Lokalise: API tokens are 40 lower-case hex
    keyed_row!(
        "Lokalise",
        "lokalise_api_token",
        ["LOKALISE_API_TOKEN", "LOKALISE_TOKEN"],
        r"[a-f0-9]{40}"
    ),
    // Crowdin: personal access tokens are 80 letters and digits
    keyed_row!(
        "Crowdin",
        "crowdin_personal_token",
        ["CROWDIN_PERSONAL_TOKEN", "CROWDIN_API_TOKEN"],
        r"[A-Za-z0-9]{80}"
    ),
    // Transifex docs: API tokens `1/` and 40 lower-case hex
    row(
        "Transifex",
        "transifex_api_token",
        &["1/"],
        r"1/[a-f0-9]{40}",
    ),
    // Ionic: personal access tokens `ion_` and 42 letters and digits
    row(
        "Ionic",
        "ionic_personal_access_token",
        &["ion_"],
        r"ion_[A-Za-z0-9]{42}",
    ),
    // Deno Deploy: personal (`ddp_`) and organization (`ddw_`) tokens, 36 letters and digits
    row(
        "Deno",
        "deno_deploy_token",
        &["ddp_", "ddw_"],
        r"dd[pw]_[A-Za-z0-9]{36}",
    ),
    // ClickHouse Cloud: API secret keys `4b1d` and 38 letters and digits
    row(
        "ClickHouse",
        "clickhouse_cloud_secret_key",
        &["4b1d"],
        r"4b1d[A-Za-z0-9]{38}",
    ),
    // 42 (intra API): client secrets `s-s4t2ud-` or `s-s4t2af-` and 64 hex
    row(
        "42",
        "intra42_client_secret",
        &["s-s4t2"],
        r"s-s4t2(?:ud|af)-[a-f0-9]{64}",
    ),
    // SettleMint: personal (`sm_pat_`), application (`sm_aat_`) and service (`sm_sat_`) access
    // tokens, 16 letters and digits
    row(
        "SettleMint",
        "settlemint_access_token",
        &["sm_pat_", "sm_aat_", "sm_sat_"],
        r"sm_[pas]at_[A-Za-z0-9]{16}",
    ),
    // Adafruit IO docs: keys `aio_` and 28 letters and digits
    row(
        "Adafruit",
        "adafruit_io_key",
        &["aio_"],
        r"aio_[A-Za-z0-9]{28}",
    ),
    // MaxMind: license keys, 6, `_`, 29 letters and digits and `_mmk`, or 16 (older), read from
    // the updater's variable or GeoIP.conf's `LicenseKey`
    keyed_row!(
        "MaxMind",
        "maxmind_license_key",
        [
            "MAXMIND_LICENSE_KEY",
            "GEOIPUPDATE_LICENSE_KEY",
            "LicenseKey"
        ],
        r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk|[A-Za-z0-9]{16}"
    ),
    // Mapbox docs: secret tokens `sk.`, a base64 JSON document (`eyJ…`), `.`, a base64url signature
    row(
        "Mapbox",
        "mapbox_secret_token",
        &["sk.eyJ"],
        r"sk\.eyJ[A-Za-z0-9_-]{20,300}\.[A-Za-z0-9_-]{20,30}",
    ),
    // Dropbox docs: short-lived access tokens `sl.` (or `sl.u.`) and a base64url run of 130 or more
    row(
        "Dropbox",
        "dropbox_access_token",
        &["sl."],
        r"sl\.(?:u\.)?[A-Za-z0-9_-]{130,1000}",
    ),
    // RapidAPI: keys, 10 hex, `msh`, 15 hex, `p`, 6 hex, `jsn`, 12 hex, sent as `X-RapidAPI-Key`
    keyed_row!(
        "RapidAPI",
        "rapidapi_key",
        ["X-RapidAPI-Key", "x-rapidapi-key", "RAPIDAPI_KEY"],
        r"[a-f0-9]{10}msh[a-f0-9]{15}p[a-f0-9]{6}jsn[a-f0-9]{12}"
    ),
    // ---- automation webhooks ----
    // Zapier: a catch hook's URL holds its account id and secret path
    row(
        "Zapier",
        "zapier_webhook",
        &["hooks.zapier.com/hooks/catch/"],
        r"hooks\.zapier\.com/hooks/catch/(?P<s>[0-9]{4,12}/[A-Za-z0-9]{5,12})",
    ),
    // Make (Integromat): a webhook's URL ends in its 32-character key
    row(
        "Make",
        "make_webhook",
        &[
            "hook.eu1.make.com/",
            "hook.eu2.make.com/",
            "hook.us1.make.com/",
            "hook.us2.make.com/",
            "hook.integromat.com/",
        ],
        r"hook\.(?:(?:eu|us)[12]\.make|integromat)\.com/(?P<s>[a-z0-9]{32})",
    ),
    // IFTTT: Webhooks service URLs end in the account's 22-character key
    row(
        "IFTTT",
        "ifttt_webhook_key",
        &["maker.ifttt.com/"],
        r"maker\.ifttt\.com/(?:trigger/[A-Za-z0-9_-]{1,64}/(?:json/)?with/key|use)/(?P<s>[A-Za-z0-9_-]{22})",
    ),
];
