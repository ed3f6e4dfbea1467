//! Scenario: the run environment (issue 16; the spec's "Credentials and the run environment"
//! and "The git-auth recipe") through the `boxfleet` binary, against a real git server (git's
//! own `git http-backend`, demanding a token): the spec's recipe as an engine-wide setup step
//! clones and pushes with the seat's token and commits as the seat (`BOXFLEET_AGENT_HANDLE`,
//! `BOXFLEET_AGENT_EMAIL`); an optional key whose variable is empty is left out whole; the
//! node's proxy and TLS-trust variables reach a direct box; and a required variable that is
//! unset or empty refuses that run (`sandbox_env_unresolved`) while the node runs on.
//!
//! Precedence, optional keys and the admission rule are unit tests in `runenv::tests`.

use std::path::Path;
use std::time::Duration;

use boxfleet_tests::git_server::GitServer;
use boxfleet_tests::node::{NodeProcess, launched_turn};

const TOKEN: &str = "ghp_t25TokenForTheGitServer0000000000000";

/// The spec's git-auth recipe, its host the local server's (`127.0.0.1:PORT` over http for
/// `github.com` over https); everything else as the spec writes it.
fn company(host: &str) -> String {
    format!(
        r#"
company:
  providers:
    sandbox:
      local: {{}}
      default_run_in: direct
      setup:
        - name: git-auth
          commands:
            - mkdir -p "$HOME/.local/bin"
            - |
              cat > "$HOME/.local/bin/git-credential-boxfleet" <<'SH'
              #!/bin/sh
              [ "$1" = "get" ] || exit 0
              [ -n "$GITHUB_TOKEN" ] || exit 0
              ok=""
              while IFS= read -r line; do
                  [ -z "$line" ] && break
                  [ "$line" = "host={host}" ] && ok=1
              done
              [ -n "$ok" ] || exit 0
              echo "username=x-access-token"
              echo "password=$GITHUB_TOKEN"
              SH
            - chmod +x "$HOME/.local/bin/git-credential-boxfleet"
            - 'git config --global credential."http://{host}".helper "!''$HOME/.local/bin/git-credential-boxfleet''"'
            - 'git config --global --add url."http://{host}/".insteadOf "git@{host}:"'
            - 'git config --global user.name "$BOXFLEET_AGENT_HANDLE"'
            - 'git config --global user.email "$BOXFLEET_AGENT_EMAIL"'
          env:
            GIT_TERMINAL_PROMPT: "0"
          brief: Use $GITHUB_TOKEN for all git work; never embed it in a URL.
  roles:
    - name: engineer
      sandbox:
        enabled: true
        env:
          GITHUB_TOKEN: "${{T25_TOKEN}}"
          DATABASE_URL: "postgres://${{T25_DB_HOST}}/app"
        optional_keys: [DATABASE_URL]
  seats:
    - {{ handle: eng, role: engineer, email: "${{T25_EMAIL}}" }}
"#
    )
}

/// The job: clone over HTTP with no credential in the URL, commit, push a branch, and say
/// what reached the box.
fn job(base: &str) -> String {
    format!(
        r#"set -e
git clone -q {base}/repo.git work
cd work
echo change > change.txt
git add change.txt
git commit -q -m "the agent's change"
git push -q origin HEAD:refs/heads/agent/fix
{{
  echo "seen DATABASE_URL=${{DATABASE_URL-unset}} NO_PROXY=${{NO_PROXY-}} NODE_EXTRA_CA_CERTS=${{NODE_EXTRA_CA_CERTS-}}"
  echo "helper $(git config --global --get-regexp 'credential\..*\.helper' | grep -c git-credential-boxfleet)"
  echo "token on disk $(grep -rlF "$GITHUB_TOKEN" "$HOME/.gitconfig" "$HOME/.local" | wc -l)"
  echo "Delivered: agent/fix"
}} > "$BOXFLEET_REPORT""#
    )
}

fn write(dir: &Path, body: &str) -> String {
    let path = dir.join("node.yaml");
    std::fs::write(&path, body).expect("write");
    path.to_str().expect("utf-8").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_git_auth_recipe_pushes_as_the_seat_with_its_token() {
    let server = GitServer::start(TOKEN).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(dir.path(), &company(&server.addr.to_string()));
    let node = NodeProcess::start_with_env(
        "gitauth",
        dir.path(),
        &["--config", &config],
        &[
            ("T25_TOKEN", TOKEN),
            ("T25_EMAIL", "eng@example.com"),
            ("T25_DB_HOST", ""),
            ("NO_PROXY", "127.0.0.1,localhost"),
            ("NODE_EXTRA_CA_CERTS", "/etc/ssl/corp-ca.pem"),
        ],
    );
    let (code, out, err) = node.cli(&[
        "launch",
        "--seat",
        "eng",
        "--command",
        &job(&server.base_url()),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let turn = launched_turn(&out);
    let phase = node.phase_record(&turn, Duration::from_secs(120)).await;
    assert_eq!(phase["failed"], false, "{phase:#}\n{}", node.log());
    assert!(
        phase.to_string().contains("agent/fix"),
        "the delivered branch: {phase:#}"
    );
    let author = server.repo_git(&["log", "-1", "--format=%an <%ae> %s", "agent/fix"]);
    assert_eq!(author.trim(), "eng <eng@example.com> the agent's change");
    assert!(
        server.refused() >= 1,
        "git asked without the token first, then used the helper"
    );
    assert!(
        !phase.to_string().contains(TOKEN),
        "the token is never on the record"
    );
    let report = phase["response"].as_str().unwrap_or_default();
    assert!(
        report.contains("helper 1") && report.contains("token on disk 0"),
        "the helper reads the token at git's runtime, never from disk: {report}\n{phase:#}"
    );
    assert!(
        report.contains(
            "seen DATABASE_URL=unset NO_PROXY=127.0.0.1,localhost NODE_EXTRA_CA_CERTS=/etc/ssl/corp-ca.pem"
        ),
        "an optional key whose variable is empty is left out whole; the node's proxy and trust reach a direct box: {report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_variable_unset_or_empty_refuses_that_run_not_the_node() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write(dir.path(), &company("127.0.0.1:9"));
    let node = NodeProcess::start_with_env(
        "unresolved",
        dir.path(),
        &["--config", &config],
        &[("T25_TOKEN", ""), ("T25_EMAIL", "eng@example.com")],
    );
    let (code, out, err) = node.cli(&["launch", "--seat", "eng", "--command", "true"]);
    assert_eq!(
        code, 4,
        "a refusal of class unavailable exits 4: {out}{err}"
    );
    let said = format!("{out}{err}");
    assert!(
        said.contains("refused (unavailable)")
            && said.contains("sandbox_env_unresolved")
            && said.contains("${T25_TOKEN}")
            && said.contains("GITHUB_TOKEN"),
        "{said}"
    );
    assert!(
        node.log().contains("sandbox_env_unresolved"),
        "{}",
        node.log()
    );
    let boxes = dir.path().join("boxes");
    assert!(
        !boxes.exists() || std::fs::read_dir(&boxes).expect("boxes").next().is_none(),
        "refused before any box"
    );
    // the node runs on: validate says the same of the document in this environment
    let (ok, said) = boxfleet_tests::node::validate(&config, &[("T25_TOKEN", "")]);
    assert!(ok, "{said}");
    assert!(
        said.contains("warning:")
            && said.contains("company.roles[0].sandbox.env.GITHUB_TOKEN: ${T25_TOKEN}"),
        "{said}"
    );
}
