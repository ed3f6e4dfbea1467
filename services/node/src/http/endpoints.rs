//! What a job is given to call its node back on (the spec's "The tool bridge" and "Per-run
//! OTel"): each endpoint's URL with a per-run token in its path — its own audience, so a
//! bridge token is never a telemetry token — and the variables a box reads them from.
//!
//! - the tool bridge, when the node mounts one: `BOXFLEET_MCP_BRIDGE_URL`, and the `boxfleet`
//!   MCP server (Streamable HTTP) rendered into the agent's config;
//! - the OTLP receiver, when the node mounts one: `OTEL_EXPORTER_OTLP_ENDPOINT` (and
//!   `BOXFLEET_SANDBOX_OTEL_RECEIVER_URL`), `OTEL_EXPORTER_OTLP_HEADERS` set empty (an image's
//!   own value would otherwise be the credential the exporter presents), the protocol,
//!   `OTEL_RESOURCE_ATTRIBUTES` (`boxfleet.turn_id`, `boxfleet.agent_handle`) and
//!   `TRACEPARENT`; Claude Code's telemetry switches for that runner alone.
//!
//! A token expires ([`TOKEN_TTL`]: a run is never stopped on a clock, so the bound is long);
//! the bridge also admits a call only while the run it names is on that job (a box that
//! outlived its run keeps no working key).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use boxfleet_actors::ports::{JobEndpoints, JobIdentity, McpTransport, RenderedMcp, RunEndpoints};
use boxfleet_auth::run_token::RunGrant;

use crate::trust::Trust;

/// The bridge's audience.
pub const BRIDGE_AUDIENCE: &str = "mcp";
/// The receiver's audience.
pub const OTLP_AUDIENCE: &str = "otlp";
/// The MCP server name the bridge is rendered under.
pub const BRIDGE_SERVER: &str = "boxfleet";
/// How long a per-run token admits its run.
pub const TOKEN_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// The node's endpoints, as boxes reach them.
#[derive(Debug)]
pub struct BoxEndpoints {
    pub trust: Arc<Trust>,
    /// the bridge's base URL (`{base}/mcp/{token}`); `None`: no bridge
    pub bridge: Option<String>,
    /// the receiver's base URL (`{base}/otlp/{token}`); `None`: no receiver
    pub receiver: Option<String>,
}

impl BoxEndpoints {
    fn token(&self, audience: &str, job: &JobIdentity) -> String {
        let exp = chrono::Utc::now().timestamp() + TOKEN_TTL.as_secs() as i64;
        self.trust.mint_run_token(&RunGrant {
            aud: audience.to_owned(),
            turn_id: job.turn_id.clone(),
            launch_id: job.launch_id.clone(),
            exp,
        })
    }
}

impl RunEndpoints for BoxEndpoints {
    fn for_job(&self, job: &JobIdentity) -> JobEndpoints {
        let mut given = JobEndpoints::default();
        if let Some(base) = &self.bridge {
            let url = format!("{base}/mcp/{}", self.token(BRIDGE_AUDIENCE, job));
            given
                .env
                .insert("BOXFLEET_MCP_BRIDGE_URL".to_owned(), url.clone());
            given.mcp.push(RenderedMcp {
                name: BRIDGE_SERVER.to_owned(),
                transport: McpTransport::Http {
                    url,
                    headers: BTreeMap::new(),
                },
            });
        }
        if let Some(base) = &self.receiver {
            let endpoint = format!("{base}/otlp/{}", self.token(OTLP_AUDIENCE, job));
            given.env.extend(telemetry_env(&endpoint, job));
        }
        given
    }
}

/// The run environment's telemetry: where to export, with no credential of its own, under
/// the run's resource attributes and trace.
fn telemetry_env(endpoint: &str, job: &JobIdentity) -> BTreeMap<String, String> {
    let mut env = BTreeMap::from([
        (
            "BOXFLEET_SANDBOX_OTEL_RECEIVER_URL".to_owned(),
            endpoint.to_owned(),
        ),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(),
            endpoint.to_owned(),
        ),
        ("OTEL_EXPORTER_OTLP_HEADERS".to_owned(), String::new()),
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL".to_owned(),
            "http/protobuf".to_owned(),
        ),
        (
            "OTEL_RESOURCE_ATTRIBUTES".to_owned(),
            format!(
                "boxfleet.turn_id={},boxfleet.agent_handle={}",
                job.turn_id, job.seat
            ),
        ),
        ("TRACEPARENT".to_owned(), traceparent(job)),
    ]);
    if job.runner == "claude-code" {
        for (name, value) in [
            ("CLAUDE_CODE_ENABLE_TELEMETRY", "1"),
            ("OTEL_METRICS_EXPORTER", "otlp"),
            ("OTEL_LOGS_EXPORTER", "otlp"),
        ] {
            env.insert(name.to_owned(), value.to_owned());
        }
    }
    env
}

/// The job's W3C trace context: the turn's own when the launch carried a valid one (the job's
/// spans nest under the turn), else the one derived from the turn — the same parent the
/// node's own spans of the run have ([`boxfleet_actors::spans`]).
fn traceparent(job: &JobIdentity) -> String {
    boxfleet_actors::spans::traceparent(&job.turn_id, job.trace.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use boxfleet_actors::spans::valid_traceparent;

    fn job(runner: &str, trace: Option<&str>) -> JobIdentity {
        JobIdentity {
            seat: "eng".into(),
            turn_id: "turn-1".into(),
            launch_id: "launch-1".into(),
            runner: runner.into(),
            trace: trace.map(str::to_owned),
        }
    }

    #[test]
    fn the_telemetry_environment_carries_no_credential_and_claude_codes_switches_for_it_alone() {
        let env = telemetry_env("http://n:7480/otlp/tok", &job("claude-code", None));
        assert_eq!(env["OTEL_EXPORTER_OTLP_HEADERS"], "");
        assert_eq!(env["OTEL_EXPORTER_OTLP_ENDPOINT"], "http://n:7480/otlp/tok");
        assert_eq!(
            env["OTEL_RESOURCE_ATTRIBUTES"],
            "boxfleet.turn_id=turn-1,boxfleet.agent_handle=eng"
        );
        assert_eq!(env["CLAUDE_CODE_ENABLE_TELEMETRY"], "1");
        assert!(
            valid_traceparent(&env["TRACEPARENT"]),
            "{}",
            env["TRACEPARENT"]
        );
        let plain = telemetry_env("http://n:7480/otlp/tok", &job("command", None));
        assert!(!plain.contains_key("CLAUDE_CODE_ENABLE_TELEMETRY"));
    }

    #[test]
    fn a_launchs_own_trace_is_kept_and_a_bad_one_replaced() {
        let turn = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(traceparent(&job("command", Some(turn))), turn);
        let made = traceparent(&job("command", Some("not a trace")));
        assert!(valid_traceparent(&made) && made != turn, "{made}");
        assert_eq!(
            made,
            traceparent(&job("command", None)),
            "derived from the turn"
        );
    }
}
