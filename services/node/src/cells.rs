//! The node's sandbox cells and coding-agent runners, made from its configuration: a backend
//! for each cell the company reaches (`direct` and `container` from `providers.sandbox.local`,
//! `e2b` from `providers.sandbox.e2b`, every one from `fake: true`); the `command`,
//! `claude-code` and `opencode` runners.

use std::collections::BTreeMap;
use std::sync::Arc;

use boxfleet_actors::lifecycle::cells::Cells;
use boxfleet_actors::ports::{Provider, Runner};
use boxfleet_config::NodeConfig;

/// The fake cell as `providers.sandbox.fake` tunes it: each call's latency, and the job every
/// agent run does.
fn fake_provider(fake: &boxfleet_config::fake::FakeSection) -> boxfleet_sandbox::FakeProvider {
    use boxfleet_sandbox::fake::{Pace, ScriptedJob};
    let ms = std::time::Duration::from_millis;
    let latency = fake.latency_ms;
    let pace = Pace {
        create: ms(latency.create),
        poll: ms(latency.poll),
        read: ms(latency.read),
        write: ms(latency.write),
        exec: ms(latency.exec),
        manage: ms(latency.kill),
    };
    let report = fake.job.report.clone().unwrap_or_else(|| {
        "A fake box ran this job: providers.sandbox.fake is set, so no agent ran and no code changed.\n"
            .to_owned()
    });
    let mut job = ScriptedJob::timed(
        std::time::Duration::from_secs(fake.job.seconds),
        fake.job.exit_code,
        Some(report),
    );
    job.until_file = fake.job.until_file.clone();
    boxfleet_sandbox::FakeProvider::new()
        .with_pace(pace)
        .with_default_job(job)
}

/// The sandbox providers, by cell: one for each cell the company reaches and no other
/// ([`Company::reached_cells`](boxfleet_config::company::Company::reached_cells)); with
/// `fake: true`, one in-process fake answering every reached cell (and its own, `fake`).
pub(crate) fn providers(
    config: &NodeConfig,
) -> anyhow::Result<BTreeMap<String, Arc<dyn Provider>>> {
    let mut providers: BTreeMap<String, Arc<dyn Provider>> = BTreeMap::new();
    let sandbox = &config.company.providers.sandbox;
    let reached = config.company.reached_cells();
    if sandbox.fake.enabled {
        let fake: Arc<dyn Provider> = Arc::new(fake_provider(&sandbox.fake));
        for cell in reached.iter().map(String::as_str).chain(["fake"]) {
            providers.insert(cell.to_owned(), fake.clone());
        }
        return Ok(providers);
    }
    let disk = disk_budget(config);
    if reached.contains("direct") {
        // boxes live under {boxes_dir}/{sandbox_id}, {data_dir}/boxes unless configured
        providers.insert(
            "direct".into(),
            Arc::new(
                boxfleet_sandbox::direct::DirectProvider::in_boxes_dir(config.boxes_dir.clone())
                    .with_disk_budget(disk.clone()),
            ),
        );
    }
    if let Some(local) = sandbox
        .local
        .as_ref()
        .filter(|_| reached.contains("container"))
    {
        let mut container = container_config(local, &config.data_dir)?;
        container.disk = disk;
        providers.insert(
            "container".into(),
            Arc::new(boxfleet_sandbox::ContainerProvider::new(container)),
        );
    }
    if let Some(e2b) = sandbox.e2b.as_ref().filter(|_| reached.contains("e2b")) {
        let mut cell = boxfleet_sandbox::e2b::E2bConfig::new(
            e2b.api_key.clone(),
            // empty: each box from the prebuilt template of its coding agent
            e2b.template.clone().unwrap_or_default(),
        );
        if let Some(domain) = e2b.domain.as_deref().filter(|d| !d.is_empty()) {
            cell.domain = domain.to_owned();
        }
        cell.api_url = e2b.api_url.clone().filter(|u| !u.is_empty());
        cell.envd_url = e2b.envd_url.clone().filter(|u| !u.is_empty());
        let provider = boxfleet_sandbox::e2b::E2bProvider::new(cell)
            .map_err(|error| anyhow::anyhow!("company.providers.sandbox.e2b: {error}"))?;
        providers.insert("e2b".into(), Arc::new(provider));
    }
    Ok(providers)
}

/// The cells `config` reaches, as the lifecycle holds them: each backend with what it was built
/// from (a reload keeps the running backend of a cell whose configuration is unchanged), the
/// cell a row that names none ran in (the catalogue's default, else `direct`), and the box
/// keepalive (`default_timeout_seconds`).
pub(crate) fn build(config: &NodeConfig) -> anyhow::Result<Cells> {
    let sandbox = &config.company.providers.sandbox;
    let default_cell = sandbox.resolved_default().unwrap_or("direct");
    let mut cells = Cells::of(providers(config)?, default_cell);
    for (name, cell) in &mut cells.active {
        cell.built_from = built_from(config, name);
    }
    if let Some(seconds) = sandbox.default_timeout_seconds {
        cells.box_timeout = std::time::Duration::from_secs(seconds);
    }
    Ok(cells)
}

/// What a cell's backend is built from, to compare across a reload (held in memory, never
/// shown: it holds the E2B key).
fn built_from(config: &NodeConfig, cell: &str) -> String {
    let sandbox = &config.company.providers.sandbox;
    let disk = disk_budget(config);
    match cell {
        _ if sandbox.fake.enabled => "fake".to_owned(),
        "direct" => format!("{:?} {:?}", config.boxes_dir, disk),
        "container" => format!("{:?} {:?} {:?}", sandbox.local, config.data_dir, disk),
        "e2b" => sandbox.e2b.as_ref().map_or_else(String::new, |e2b| {
            format!(
                "{} {:?} {:?} {:?} {:?}",
                e2b.api_key, e2b.domain, e2b.template, e2b.api_url, e2b.envd_url
            )
        }),
        other => other.to_owned(),
    }
}

/// What a local box may write, and what the disk holding the store keeps free
/// (`providers.sandbox.local.max_box_bytes`, `.store_reserve_bytes`).
pub(crate) fn disk_budget(config: &NodeConfig) -> boxfleet_sandbox::DiskBudget {
    let local = config.company.providers.sandbox.local.as_ref();
    let defaults = boxfleet_sandbox::DiskBudget::default();
    boxfleet_sandbox::DiskBudget {
        max_box_bytes: local
            .and_then(|l| l.max_box_bytes)
            .unwrap_or(defaults.max_box_bytes),
        store_reserve_bytes: local
            .and_then(|l| l.store_reserve_bytes)
            .unwrap_or(defaults.store_reserve_bytes),
        store_dir: Some(config.data_dir.clone()),
    }
}

/// The coding-agent runners, by name. The coding CLIs are found on the box's PATH (`claude`,
/// `opencode`), or where `BOXFLEET_CLAUDE_CLI` / `BOXFLEET_OPENCODE_CLI` name them.
pub(crate) fn runners() -> anyhow::Result<BTreeMap<String, Arc<dyn Runner>>> {
    let mut runners: BTreeMap<String, Arc<dyn Runner>> = BTreeMap::new();
    runners.insert(
        "command".into(),
        Arc::new(boxfleet_agents::command::CommandRunner::new()),
    );
    let mut claude = boxfleet_agents::ClaudeCodeRunner::new();
    if let Some(cli) = cli_override("BOXFLEET_CLAUDE_CLI")? {
        claude = claude.with_cli(cli);
    }
    runners.insert("claude-code".into(), Arc::new(claude));
    let mut opencode = boxfleet_agents::OpenCodeRunner::new();
    if let Some(cli) = cli_override("BOXFLEET_OPENCODE_CLI")? {
        opencode = opencode.with_cli(cli);
    }
    runners.insert("opencode".into(), Arc::new(opencode));
    Ok(runners)
}

/// A coding CLI named by `var`: a bare name is looked up on the box's `PATH`; a path with a
/// `/` in it, if relative, is resolved now against the node's working directory (a job runs
/// in its box's home, where the relative path would name nothing).
fn cli_override(var: &str) -> anyhow::Result<Option<String>> {
    let Ok(cli) = std::env::var(var) else {
        return Ok(None);
    };
    if cli.is_empty() || !cli.contains('/') {
        return Ok(Some(cli).filter(|cli| !cli.is_empty()));
    }
    let resolved = boxfleet_config::paths::Base::of_process().absolute_text(var, &cli)?;
    Ok(Some(resolved))
}

/// The `container` cell from `providers.sandbox.local` (boxes under `{state_dir}` or
/// `{data_dir}/containers`).
fn container_config(
    local: &boxfleet_config::providers::LocalSection,
    data_dir: &std::path::Path,
) -> anyhow::Result<boxfleet_sandbox::ContainerConfig> {
    use boxfleet_sandbox::container::Runtime;
    let state_dir = container_state_dir(
        local.state_dir.as_deref(),
        std::env::var_os("BOXFLEET_SANDBOX_LOCAL_HOME"),
        data_dir,
    );
    let mut cell =
        boxfleet_sandbox::ContainerConfig::new(local.image.clone().unwrap_or_default(), state_dir);
    cell.runtime = match local.runtime.as_deref().unwrap_or("auto") {
        "auto" | "" => Runtime::Auto,
        "docker" => Runtime::Docker,
        "podman" => Runtime::Podman,
        other => anyhow::bail!(
            "company.providers.sandbox.local.runtime: {other:?} is not a runtime; use auto, docker or podman"
        ),
    };
    cell.run_args = local.run_args.clone();
    cell.network = local.network.clone().filter(|n| !n.is_empty());
    cell.runtime_env = local.runtime_env.clone();
    Ok(cell)
}

/// Where a container cell keeps its boxes' state: `local.state_dir`; empty, the environment's
/// `$BOXFLEET_SANDBOX_LOCAL_HOME` (made absolute); empty too, the data dir's `containers`.
fn container_state_dir(
    configured: Option<&str>,
    from_env: Option<std::ffi::OsString>,
    data_dir: &std::path::Path,
) -> std::path::PathBuf {
    configured
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            from_env
                .filter(|d| !d.is_empty())
                .map(|d| std::path::absolute(&d).unwrap_or_else(|_| d.into()))
        })
        .unwrap_or_else(|| data_dir.join("containers"))
}

#[cfg(test)]
mod tests {
    use super::container_state_dir;
    use std::path::Path;

    fn built(company: &str) -> Vec<String> {
        let file: boxfleet_config::File =
            serde_yaml::from_str(&format!("company:\n{company}")).expect("parses");
        let config = file.validate().expect("valid");
        super::providers(&config)
            .expect("built")
            .into_keys()
            .collect()
    }

    /// A backend is built for each cell the company reaches and no other: an E2B block beside
    /// a direct-only company builds no E2B client, and a container is built only when reached.
    #[test]
    fn backends_are_built_only_for_the_cells_the_company_reaches() {
        let both = "  providers:\n    sandbox: { local: {}, e2b: { api_key: k }, default_run_in: direct }\n";
        assert_eq!(built(both), ["direct"]);
        let container = "  providers:\n    sandbox: { local: { image: busybox }, e2b: { api_key: k }, default_run_in: e2b }\n  roles:\n    - { name: box, sandbox: { enabled: true, run_in: container } }\n";
        assert_eq!(built(container), ["container", "e2b"]);
        let fake = "  providers:\n    sandbox: { fake: true }\n";
        assert_eq!(built(fake), ["direct", "fake"]);
        let none = "  seats: [{ handle: eng }]\n";
        assert!(built(none).is_empty());
    }

    #[test]
    fn the_state_dir_is_the_configured_one_then_the_environments_then_the_data_dirs() {
        let data = Path::new("/var/lib/boxfleet");
        let env = || Some("/srv/boxes".into());
        assert_eq!(
            container_state_dir(Some("/opt/state"), env(), data),
            Path::new("/opt/state")
        );
        assert_eq!(
            container_state_dir(Some(""), env(), data),
            Path::new("/srv/boxes")
        );
        assert_eq!(
            container_state_dir(None, env(), data),
            Path::new("/srv/boxes")
        );
        assert_eq!(
            container_state_dir(None, Some("".into()), data),
            Path::new("/var/lib/boxfleet/containers")
        );
        assert_eq!(
            container_state_dir(None, None, data),
            Path::new("/var/lib/boxfleet/containers")
        );
        let relative = container_state_dir(None, Some("boxes".into()), data);
        assert!(
            relative.is_absolute() && relative.ends_with("boxes"),
            "{relative:?}"
        );
    }
}
