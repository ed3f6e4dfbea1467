//! A fleet as a user runs one by hand: one real etcd, several `boxfleet node` processes on
//! loopback sharing it (each under its own data dir, all sharing one `--boxes-dir`, as nodes on
//! one host do), and the `boxfleet` CLI pointed at any of them.
//!
//! Jobs that spend tokens run a stand-in Claude Code CLI (a POSIX sh script that reads its
//! brief on stdin, sleeps as the brief says, and prints stream-json with a fixed usage), so
//! the tests can count what each seat was charged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use boxfleet_cluster::Store as _;
use boxfleet_proto::v1 as pb;

use crate::EtcdServer;
use crate::node::NodeProcess;

/// The input and output tokens the stand-in CLI reports for every job.
pub const JOB_TOKENS: (u64, u64) = (100, 10);

/// The model the fleet's default LLM entry names and the stand-in reports.
pub const MODEL: &str = "claude-fleet-test";

/// A fleet of node processes on one etcd.
#[derive(Debug)]
pub struct Fleet {
    pub dir: tempfile::TempDir,
    pub prefix: String,
    /// what the nodes' `--etcd` names (one URL, or several comma-separated)
    pub etcd_url: String,
    /// where [`Fleet::store`] reads (the etcd behind any proxy the nodes are pointed at)
    pub store_endpoints: Vec<String>,
    pub boxes: PathBuf,
    /// every node started from here on keeps its boxes in its own data dir (the default boxes
    /// dir), not the fleet's shared one
    pub own_boxes: bool,
    /// every node started from here on runs on a host of its own (`--host host-NAME`): no node
    /// reaches another's local boxes, as nodes on separate machines cannot
    pub own_hosts: bool,
    /// every node started from here on keeps its store embedded in its data dir (no etcd: a
    /// fleet of one node, restarted on that store)
    pub embedded: bool,
    pub ttl_seconds: u64,
    pub nodes: Vec<NodeProcess>,
    /// test failpoints every node started from here on arms (`BOXFLEET_FAILPOINTS`)
    pub failpoints: String,
    /// more environment for every node started from here on (e.g. `BOXFLEET_CRASH_AT`)
    pub env: Vec<(String, String)>,
    config: PathBuf,
    cli: PathBuf,
    /// the fleet's one keyring (the first node to start makes it)
    pub keyring: PathBuf,
}

impl Fleet {
    /// Starts `names` as nodes on the shared test etcd, under a prefix of their own, with a
    /// session lease of `ttl_seconds`.
    pub fn start(names: &[&str], ttl_seconds: u64) -> Fleet {
        Self::start_on(&EtcdServer::shared().client_url(), names, ttl_seconds)
    }

    /// [`Fleet::start`] with the nodes pointed at `etcd_url` (say, a proxy in front of etcd).
    pub fn start_on(etcd_url: &str, names: &[&str], ttl_seconds: u64) -> Fleet {
        Self::start_configured(etcd_url, names, ttl_seconds, "")
    }

    /// [`Fleet::start`] with more of `providers.sandbox` (`key: value, …`, flow style).
    pub fn start_configured(
        etcd_url: &str,
        names: &[&str],
        ttl_seconds: u64,
        sandbox: &str,
    ) -> Fleet {
        Self::start_with_llm(etcd_url, names, ttl_seconds, sandbox, None)
    }

    /// [`Fleet::start_configured`] with the `default` LLM entry's calls sent to `llm_base_url`
    /// (an Anthropic stand-in, or a closed port for a model that cannot be reached).
    pub fn start_with_llm(
        etcd_url: &str,
        names: &[&str],
        ttl_seconds: u64,
        sandbox: &str,
        llm_base_url: Option<&str>,
    ) -> Fleet {
        Self::start_with_company(etcd_url, names, ttl_seconds, sandbox, llm_base_url, "")
    }

    /// [`Fleet::start_with_llm`] with more of the company document (`chart`: its `roles:` and
    /// `seats:`, as YAML lines indented under `company:`).
    pub fn start_with_company(
        etcd_url: &str,
        names: &[&str],
        ttl_seconds: u64,
        sandbox: &str,
        llm_base_url: Option<&str>,
        chart: &str,
    ) -> Fleet {
        let dir = tempfile::tempdir().expect("tempdir");
        let boxes = dir.path().join("boxes");
        std::fs::create_dir_all(&boxes).expect("boxes dir");
        let cli = dir.path().join("stand-in-claude");
        let signals = dir.path().join("signals");
        std::fs::create_dir_all(&signals).expect("signals dir");
        write_stand_in_cli(&cli, &signals);
        let config = dir.path().join("fleet.yaml");
        std::fs::write(
            &config,
            format!(
                "company:\n  providers:\n    llm:\n      default: {{ provider: anthropic, model: {MODEL}, api_key: sk-ant-fleet-test{} }}\n    sandbox: {{ default_coding_agent: claude-code{} }}\n{chart}",
                llm_base_url.map_or(String::new(), |url| format!(", base_url: \"{url}\"")),
                if sandbox.is_empty() {
                    ", local: {}, default_run_in: direct".to_owned()
                } else {
                    format!(", {sandbox}")
                }
            ),
        )
        .expect("write config");
        let mut fleet = Fleet {
            prefix: format!("/fleet-{}", uuid::Uuid::new_v4().simple()),
            etcd_url: etcd_url.to_owned(),
            store_endpoints: EtcdServer::shared().endpoints(),
            boxes,
            own_boxes: false,
            own_hosts: false,
            embedded: false,
            ttl_seconds,
            nodes: Vec::new(),
            failpoints: String::new(),
            env: Vec::new(),
            config,
            cli,
            keyring: dir.path().join("keyring.json"),
            dir,
        };
        for name in names {
            fleet.add(name);
        }
        fleet
    }

    /// [`Fleet::start`] on every member of `cluster` (each node's `--etcd` names them all).
    pub fn start_on_cluster(
        cluster: &crate::EtcdCluster,
        names: &[&str],
        ttl_seconds: u64,
    ) -> Fleet {
        let mut fleet =
            Self::start_configured(&cluster.endpoints().join(","), &[], ttl_seconds, "");
        fleet.store_endpoints = cluster.endpoints();
        for name in names {
            fleet.add(name);
        }
        fleet
    }

    /// [`Fleet::start`] with every node arming `failpoints` (comma-separated).
    pub fn start_armed(names: &[&str], ttl_seconds: u64, failpoints: &str) -> Fleet {
        let mut fleet =
            Self::start_configured(&EtcdServer::shared().client_url(), &[], ttl_seconds, "");
        fleet.failpoints = failpoints.to_owned();
        for name in names {
            fleet.add(name);
        }
        fleet
    }

    /// Starts one more node.
    pub fn add(&mut self, name: &str) -> &NodeProcess {
        self.add_on(name, &self.etcd_url.clone())
    }

    /// Starts one more node whose store is at `etcd_url`.
    pub fn add_on(&mut self, name: &str, etcd_url: &str) -> &NodeProcess {
        let data_dir = self.dir.path().join(name);
        std::fs::create_dir_all(&data_dir).expect("data dir");
        let boxes = if self.own_boxes {
            data_dir.join("boxes")
        } else {
            self.boxes.clone()
        };
        let ttl = self.ttl_seconds.to_string();
        let host = format!("host-{name}");
        let mut args: Vec<&str> = if self.embedded {
            Vec::new()
        } else {
            vec!["--etcd", etcd_url, "--prefix", &self.prefix]
        };
        args.extend([
            "--config",
            self.config.to_str().expect("utf-8"),
            "--boxes-dir",
            boxes.to_str().expect("utf-8"),
            "--lease-ttl",
            &ttl,
            // one keyring for the fleet: a node verifies what its peers sign
            "--keyring",
            self.keyring.to_str().expect("utf-8"),
        ]);
        if self.own_hosts {
            args.extend(["--host", &host]);
        }
        let log = std::env::var("FLEET_LOG").unwrap_or_else(|_| "info".into());
        let mut env = vec![
            ("BOXFLEET_CLAUDE_CLI", self.cli.to_str().expect("utf-8")),
            // FLEET_LOG=debug for a closer look at a failing scenario
            ("BOXFLEET_LOG", log.as_str()),
            ("BOXFLEET_FAILPOINTS", self.failpoints.as_str()),
        ];
        env.extend(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let node = NodeProcess::start_with_env(name, &data_dir, &args, &env);
        self.nodes.push(node);
        self.nodes.last().expect("just pushed")
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> &NodeProcess {
        self.nodes
            .iter()
            .find(|n| n.id == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    pub fn node_mut(&mut self, name: &str) -> &mut NodeProcess {
        self.nodes
            .iter_mut()
            .find(|n| n.id == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    /// Lets every job waiting on `fleet-wait NAME` go on.
    pub fn signal(&self, name: &str) {
        std::fs::write(self.dir.path().join("signals").join(name), b"go").expect("signal");
    }

    /// Every node's log, for a failure message.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("===== {} =====\n{}", n.id, n.log()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A store client on the fleet's etcd (for what the CLI does not show: spend counters).
    pub async fn store(&self) -> crate::EtcdStore {
        crate::EtcdStore::connect(&self.store_endpoints, crate::STORE_CALL_TIMEOUT)
            .await
            .unwrap_or_else(|error| panic!("connect to the fleet's etcd: {error}"))
    }

    /// Who holds each seat, as `Ops.Seats` on `via` says.
    pub async fn holders(&self, via: &str) -> BTreeMap<String, String> {
        let mut ops = crate::grpc::ops(&self.node(via).addr())
            .await
            .expect("connect");
        ops.seats(pb::SeatsRequest {})
            .await
            .expect("seats")
            .into_inner()
            .seats
            .into_iter()
            .map(|s| (s.seat, s.holder_node))
            .collect()
    }

    /// A run's record (`None` once it is settled and gone), asked of `via`.
    pub async fn record(&self, via: &str, turn_id: &str) -> Option<serde_json::Value> {
        let got = self.get(via, turn_id).await;
        (!got.record_json.is_empty())
            .then(|| serde_json::from_str(&got.record_json).expect("record JSON"))
    }

    /// Waits (the test fails past `within`, naming `what`) until `turn_id`'s record is gone:
    /// the run settled.
    pub async fn until_settled(&self, via: &str, turn_id: &str, what: &str, within: Duration) {
        eventually(self, what, within, async || {
            self.record(via, turn_id).await.is_none().then_some(())
        })
        .await;
    }

    /// `Runs.Get` of one turn, asked of `via`.
    pub async fn get(&self, via: &str, turn_id: &str) -> pb::GetReply {
        let mut runs = crate::grpc::runs(&self.node(via).addr())
            .await
            .expect("connect");
        crate::grpc::get_turn(&mut runs, turn_id).await
    }

    /// Waits (up to 60 s) for `turn_id`'s run to park on its question, asked of `via`: the
    /// launch id of the job that asked.
    pub async fn parked_launch(&self, via: &str, turn_id: &str) -> String {
        eventually(
            self,
            "the run to park",
            Duration::from_secs(60),
            async || {
                let record = self.record(via, turn_id).await?;
                (record["status"] == "awaiting_clarification")
                    .then(|| record["launch_id"].as_str().unwrap_or_default().to_owned())
            },
        )
        .await
    }

    /// Every event of one turn (phase records included), asked of `via`.
    pub async fn events_of(&self, via: &str, turn_id: &str) -> Vec<serde_json::Value> {
        let got = self.get(via, turn_id).await;
        got.phase_records_json
            .iter()
            .chain(&got.events_json)
            .map(|json| serde_json::from_str(json).expect("event JSON"))
            .collect()
    }

    /// The node holding the poll duty (`duty/waiter`), once one does.
    pub async fn duty_holder(&self) -> Option<String> {
        let store = self.store().await;
        let kv = store
            .get(&format!("{}/duty/waiter", self.prefix))
            .await
            .ok()??;
        let holder: serde_json::Value = serde_json::from_slice(&kv.value).ok()?;
        holder["node"].as_str().map(str::to_owned)
    }

    /// The seat's day-window spend counter: (charges, input tokens, output tokens).
    pub async fn seat_spend(&self, seat: &str) -> (u64, u64, u64) {
        let store = self.store().await;
        // the store's windows are UTC days
        let day = format!("day-{}", chrono::Utc::now().format("%Y-%m-%d"));
        let key = format!("{}/spend/seat-{seat}/{day}", self.prefix);
        let Some(kv) = store.get(&key).await.expect("read spend") else {
            return (0, 0, 0);
        };
        let counter: serde_json::Value = serde_json::from_slice(&kv.value).expect("spend JSON");
        let n = |k: &str| counter[k].as_u64().unwrap_or(0);
        (n("charges"), n("input_tokens"), n("output_tokens"))
    }

    /// The boxes on the fleet's host: every directory in the shared boxes dir.
    pub fn boxes_on_host(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.boxes) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }
}

/// The seats among `candidates` placed on `node` when `nodes` are live.
pub fn seats_placed_on(node: &str, nodes: &[&str], count: usize, tag: &str) -> Vec<String> {
    (0..)
        .map(|i| format!("{tag}-{i}"))
        .filter(|seat| {
            boxfleet_cluster::placement::owner(seat, nodes.iter().copied()) == Some(node)
        })
        .take(count)
        .collect()
}

/// The stand-in Claude Code CLI: reads the brief on stdin (the runner's preamble, then the
/// task); a task naming `fleet-sleep N` sleeps N seconds first, and one naming
/// `fleet-wait NAME` waits until the test calls [`Fleet::signal`] with NAME; prints stream-json naming
/// [`MODEL`] and a result with [`JOB_TOKENS`] and a `Delivered: fix/NAME` line for the task's
/// `fleet-name NAME`.
fn write_stand_in_cli(path: &Path, signals: &Path) {
    let signals = signals.display();
    use std::os::unix::fs::PermissionsExt;
    let (input, output) = JOB_TOKENS;
    std::fs::write(
        path,
        format!(
            r#"#!/bin/sh
brief=$(cat)
n=$(printf '%s\n' "$brief" | sed -n 's/.*fleet-sleep \([0-9][0-9]*\).*/\1/p' | head -n 1)
last=$(printf '%s\n' "$brief" | sed -n 's/.*fleet-name \([a-z0-9-]*\).*/\1/p' | head -n 1)
wait=$(printf '%s\n' "$brief" | sed -n 's/.*fleet-wait \([a-z0-9-]*\).*/\1/p' | head -n 1)
if [ -n "$n" ]; then sleep "$n"; fi
if [ -n "$wait" ]; then while [ ! -e "{signals}/$wait" ]; do sleep 0.2; done; fi
echo '{{"type":"system","subtype":"init","model":"{MODEL}"}}'
echo '{{"type":"assistant","message":{{"model":"{MODEL}","content":[{{"type":"text","text":"working"}}]}}}}'
printf '%s\n' '{{"type":"result","subtype":"success","is_error":false,"result":"Done.\nDelivered: fix/'"$last"'","total_cost_usd":0.001,"usage":{{"input_tokens":{input},"output_tokens":{output}}}}}'
"#
        ),
    )
    .expect("write the stand-in CLI");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Waits `within` for `probe`, then panics with what it last saw and the fleet's logs.
pub async fn eventually<T>(
    fleet: &Fleet,
    what: &str,
    within: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        if std::time::Instant::now() > deadline {
            panic!(
                "timed out after {within:?} waiting for {what}\n{}",
                fleet.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
