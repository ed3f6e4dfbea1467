//! [`EtcdCluster`]: a real etcd cluster of several members on loopback, as operators run one
//! (three or five members, so one can die), each member its own process, data and log, with
//! etcd's default timing (100 ms heartbeat, 1 s election timeout). A test kills, stops and
//! restarts members, and asks which one leads.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use boxfleet_cluster::store::etcd::EtcdStore;

use super::bounds::{ETCD_UP_WITHIN, STORE_CALL_TIMEOUT, block_on_own_runtime};
use super::process::{Member, base_dir, free_ports, listening, next_seq, sweep_stale_dirs};

/// How many times a start is retried when a port picked was taken before etcd bound it.
const START_ATTEMPTS: usize = 5;

/// A running etcd cluster; dropping it kills every member and removes its directory (kept,
/// and named on stderr, when the test is panicking).
pub struct EtcdCluster {
    members: Vec<Member>,
    dir: PathBuf,
}

impl std::fmt::Debug for EtcdCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdCluster")
            .field("endpoints", &self.endpoints())
            .field("dir", &self.dir)
            .finish()
    }
}

impl EtcdCluster {
    /// Starts `size` members and waits until the cluster has a leader and every member
    /// answers.
    pub fn start(size: usize) -> EtcdCluster {
        assert!(size >= 1, "a cluster has at least one member");
        sweep_stale_dirs();
        let mut last_error = String::new();
        for attempt in 1..=START_ATTEMPTS {
            let cluster = Self::spawn_all(size);
            match block_on_own_runtime(cluster.wait_all_answer(ETCD_UP_WITHIN)) {
                Ok(()) => return cluster,
                Err(error) => {
                    let taken = cluster
                        .members
                        .iter()
                        .any(|m| m.log_tail(40).contains("address already in use"));
                    last_error = format!("{error}\n{}", cluster.describe_logs());
                    if taken && attempt < START_ATTEMPTS {
                        continue;
                    }
                    cluster.stop_and_remove(true);
                    std::mem::forget(cluster);
                    break;
                }
            }
        }
        panic!("the etcd cluster did not come up within {ETCD_UP_WITHIN:?}: {last_error}");
    }

    fn spawn_all(size: usize) -> EtcdCluster {
        let seq = next_seq();
        let dir = base_dir().join(format!("etcd-{}-{seq}", std::process::id()));
        let mut members: Vec<Member> = (0..size)
            .map(|i| {
                Member::new(
                    format!("m{i}"),
                    dir.join(format!("m{i}")),
                    "http",
                    free_ports(),
                )
            })
            .collect();
        let initial: Vec<String> = members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url()))
            .collect();
        let initial = initial.join(",");
        for member in &mut members {
            member.flags = vec![
                "--initial-cluster".into(),
                initial.clone(),
                "--initial-cluster-state".into(),
                "new".into(),
                "--initial-cluster-token".into(),
                format!("boxfleet-test-cluster-{}-{seq}", std::process::id()),
            ];
        }
        let cluster = EtcdCluster { members, dir };
        for member in &cluster.members {
            if let Err(error) = member.spawn() {
                panic!(
                    "could not start etcd: {error} (install etcd with `apt-get install \
                     etcd-server`, or set ETCD_BIN to an etcd v3 binary)"
                );
            }
        }
        cluster
    }

    /// How many members the cluster was made with.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// Every member's client URL, in member order.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(Member::client_url).collect()
    }

    /// Member `i`'s client URL.
    pub fn endpoint(&self, i: usize) -> String {
        self.members[i].client_url()
    }

    /// The directory holding every member's.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A store over every member, calls bounded by [`STORE_CALL_TIMEOUT`].
    pub async fn store(&self) -> EtcdStore {
        match EtcdStore::connect(&self.endpoints(), STORE_CALL_TIMEOUT).await {
            Ok(store) => store,
            Err(error) => panic!(
                "could not connect to the test etcd cluster: {error}\n{}",
                self.describe_logs()
            ),
        }
    }

    /// Whether member `i`'s process runs.
    pub fn is_running(&self, i: usize) -> bool {
        self.members[i].pid().is_some()
    }

    /// SIGKILLs member `i` (its data stays, for [`EtcdCluster::restart`]).
    pub fn kill(&self, i: usize) {
        self.members[i].kill();
    }

    /// Starts a killed member again on its ports and data, and waits until it listens (it
    /// answers reads only once the cluster has a quorum: see [`EtcdCluster::wait_quorum`]).
    pub fn restart(&self, i: usize) {
        let member = &self.members[i];
        member.kill();
        if let Err(error) = member.spawn() {
            panic!("could not restart etcd member {}: {error}", member.name);
        }
        let deadline = Instant::now() + ETCD_UP_WITHIN;
        while !listening(member.client_port) {
            if let Some(status) = member.exited() {
                panic!(
                    "etcd member {} exited with {status}\n{}",
                    member.name,
                    member.describe_log()
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "etcd member {} did not listen within {ETCD_UP_WITHIN:?}\n{}",
                    member.name,
                    member.describe_log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The index of the member that leads now, asked of the running members; `None` when
    /// none of them knows of a leader that runs.
    pub async fn leader(&self) -> Option<usize> {
        let mut ids = Vec::new();
        let mut leaders = Vec::new();
        for (i, member) in self.members.iter().enumerate() {
            if member.pid().is_none() {
                continue;
            }
            if let Some((id, leader)) = status_of(member).await {
                ids.push((i, id));
                if leader != 0 {
                    leaders.push(leader);
                }
            }
        }
        ids.into_iter()
            .find(|(_, id)| leaders.contains(id))
            .map(|(i, _)| i)
    }

    /// Waits until the cluster serves a linearizable read (a quorum and a leader), bounded by
    /// `within`; `Err` says what the last try met.
    pub async fn wait_quorum(&self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        let mut store = None;
        let mut last = String::new();
        loop {
            // connecting reads once, so it fails while there is no quorum: try again each round
            if store.is_none() {
                match EtcdStore::connect(&self.endpoints(), Duration::from_secs(2)).await {
                    Ok(connected) => store = Some(connected),
                    Err(error) => last = error.to_string(),
                }
            }
            if let Some(store) = &store {
                match boxfleet_cluster::Store::get(store, "/boxfleet-tests/probe").await {
                    Ok(_) => return Ok(()),
                    Err(error) => last = error.to_string(),
                }
            }
            if Instant::now() >= deadline {
                return Err(format!("no quorum within {within:?} (last: {last})"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until every running member answers a read on its own.
    async fn wait_all_answer(&self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        for member in &self.members {
            loop {
                if let Some(status) = member.exited() {
                    return Err(format!("etcd member {} exited with {status}", member.name));
                }
                let answered = match EtcdStore::connect(
                    &[member.client_url()],
                    Duration::from_secs(2),
                )
                .await
                {
                    Ok(_) => Ok(()),
                    Err(error) => Err(error.to_string()),
                };
                match answered {
                    Ok(()) => break,
                    Err(error) if Instant::now() >= deadline => {
                        return Err(format!(
                            "member {} did not answer within {within:?} (last: {error})",
                            member.name
                        ));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        }
        Ok(())
    }

    /// Every member's log tail.
    pub fn describe_logs(&self) -> String {
        self.members
            .iter()
            .map(Member::describe_log)
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn stop_and_remove(&self, keep: bool) {
        for member in &self.members {
            member.kill();
        }
        if keep {
            eprintln!(
                "boxfleet-tests: kept the etcd cluster's directory {}",
                self.dir.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        self.stop_and_remove(std::thread::panicking());
    }
}

/// The member's own id and the leader it knows of (0: none), asked of it.
async fn status_of(member: &Member) -> Option<(u64, u64)> {
    let bound = Duration::from_secs(1);
    let mut client = tokio::time::timeout(
        bound,
        etcd_client::Client::connect([member.client_url()], None),
    )
    .await
    .ok()?
    .ok()?;
    let status = tokio::time::timeout(bound, client.status())
        .await
        .ok()?
        .ok()?;
    Some((status.header()?.member_id(), status.leader()))
}
