//! The node's HTTP listener and what it serves a box (DESIGN §14; the spec's "The tool bridge"
//! and "Per-run OTel"): `node.http`.
//!
//! ```yaml
//! node:
//!   http:
//!     listen: 127.0.0.1:7480         # default: the gRPC listener's host, its port + 80 (an
//!                                    #   ephemeral port beside an ephemeral one); off: none
//!     mcp_bridge_url: listener       # BOXFLEET_MCP_BRIDGE_URL: this listener as a box reaches it
//!     otel_receiver_url: listener    # BOXFLEET_SANDBOX_OTEL_RECEIVER_URL: the same, for telemetry
//!     otlp_upstream:                 # where the receiver forwards; absent: accept and drop
//!       endpoint: https://otlp.example.com
//!       headers: { Authorization: "Bearer ${OTLP_INGEST_TOKEN}" }
//! ```
//!
//! The bridge and the receiver are mounted only when their URL is set (in the file, or by the
//! variable of the same name in the node's environment); `listener` means this listener's own
//! address as bound, which a box on this host reaches (`direct`). A box elsewhere (a container
//! on its own network, an E2B VM) needs the address it reaches the node at.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Deserialize;

use crate::Error;
use crate::expand::expand;

/// `node.http` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSection {
    /// `HOST:PORT`, or `off`; default: the gRPC listener's host, its port + 80
    pub listen: Option<String>,
    /// the tool bridge's base URL as a box reaches this node; unset: no bridge
    pub mcp_bridge_url: Option<String>,
    /// the OTLP receiver's base URL as a box reaches this node; unset: no receiver
    pub otel_receiver_url: Option<String>,
    /// where the receiver forwards what a box exports
    pub otlp_upstream: Option<UpstreamSection>,
}

/// `node.http.otlp_upstream`.
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSection {
    /// the collector's OTLP/HTTP base URL (`/v1/{signal}` is added)
    pub endpoint: String,
    /// headers added outside the box (the ingest credential), `${VAR}`-resolved at load
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

impl std::fmt::Debug for UpstreamSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamSection")
            .field("endpoint", &self.endpoint)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Where a box reaches an endpoint of this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoxUrl {
    /// this listener's own address, as bound (`http(s)://{addr}`)
    Listener,
    /// a base URL as written (`http(s)://host[:port][/prefix]`)
    Url(String),
}

/// The OTLP receiver's upstream, resolved.
#[derive(Clone, PartialEq, Eq)]
pub struct Upstream {
    pub endpoint: String,
    pub headers: BTreeMap<String, String>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("endpoint", &self.endpoint)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// `node.http`, validated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpConfig {
    /// `None`: no listener
    pub listen: Option<SocketAddr>,
    pub bridge_url: Option<BoxUrl>,
    pub receiver_url: Option<BoxUrl>,
    pub upstream: Option<Upstream>,
}

/// How far the HTTP listener's default port is from the gRPC listener's.
pub const PORT_OFFSET: u16 = 80;

impl HttpSection {
    /// Validates the section; `grpc` is the gRPC listener (the default address is beside it),
    /// `env` the node's environment (the URLs' variables, the upstream's `${VAR}`s).
    pub fn validate(
        self,
        grpc: SocketAddr,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<HttpConfig, Error> {
        let HttpSection {
            listen,
            mcp_bridge_url,
            otel_receiver_url,
            otlp_upstream,
        } = self;
        let listen = match listen.as_deref().map(str::trim) {
            Some("off") => None,
            Some(text) if !text.is_empty() => Some(text.parse().map_err(|_| Error::Invalid {
                field: "node.http.listen",
                problem: format!("{text:?} is not an address"),
                remedy: "write it as HOST:PORT (e.g. 127.0.0.1:7480), or off",
            })?),
            // an ephemeral gRPC port takes an ephemeral HTTP one
            _ if grpc.port() == 0 => Some(SocketAddr::new(grpc.ip(), 0)),
            _ => Some(SocketAddr::new(
                grpc.ip(),
                grpc.port().checked_add(PORT_OFFSET).ok_or(Error::Invalid {
                    field: "node.http.listen",
                    problem: format!(
                        "the gRPC port {} leaves no room for the default",
                        grpc.port()
                    ),
                    remedy: "set node.http.listen",
                })?,
            )),
        };
        let bridge_url = box_url(
            "node.http.mcp_bridge_url",
            mcp_bridge_url.or_else(|| env("BOXFLEET_MCP_BRIDGE_URL")),
        )?;
        let receiver_url = box_url(
            "node.http.otel_receiver_url",
            otel_receiver_url.or_else(|| env("BOXFLEET_SANDBOX_OTEL_RECEIVER_URL")),
        )?;
        if listen.is_none() && (bridge_url.is_some() || receiver_url.is_some()) {
            return Err(Error::Invalid {
                field: "node.http.listen",
                problem: "the listener is off, and the tool bridge or the OTLP receiver is set: a box would be given an endpoint nothing serves".into(),
                remedy: "turn the listener on, or unset mcp_bridge_url and otel_receiver_url",
            });
        }
        let upstream = otlp_upstream.map(|u| upstream(u, env)).transpose()?;
        Ok(HttpConfig {
            listen,
            bridge_url,
            receiver_url,
            upstream,
        })
    }
}

fn box_url(field: &'static str, value: Option<String>) -> Result<Option<BoxUrl>, Error> {
    let Some(value) = value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if value == "listener" {
        return Ok(Some(BoxUrl::Listener));
    }
    if !(value.starts_with("http://") || value.starts_with("https://")) {
        return Err(Error::Invalid {
            field,
            problem: format!("{value:?} is not an http(s) URL"),
            remedy: "write the base URL a box reaches this node's HTTP listener at (e.g. http://10.0.0.5:7480), or `listener`",
        });
    }
    Ok(Some(BoxUrl::Url(value.trim_end_matches('/').to_owned())))
}

fn upstream(
    section: UpstreamSection,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Upstream, Error> {
    let endpoint = section.endpoint.trim().trim_end_matches('/').to_owned();
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(Error::Invalid {
            field: "node.http.otlp_upstream.endpoint",
            problem: format!("{endpoint:?} is not an http(s) URL"),
            remedy: "write the collector's OTLP/HTTP base URL (e.g. https://otlp.example.com); /v1/{signal} is added",
        });
    }
    let mut headers = BTreeMap::new();
    for (name, value) in section.headers {
        let value = expand(&value, env).map_err(|problem| Error::Located {
            field: format!("node.http.otlp_upstream.headers.{name}"),
            problem,
            remedy: "export the variable in the node's environment, or write the value",
        })?;
        headers.insert(name, value);
    }
    Ok(Upstream { endpoint, headers })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "OTLP_TOKEN" => Some("secret".into()),
            "BOXFLEET_MCP_BRIDGE_URL" => Some("http://10.0.0.5:7480/".into()),
            _ => None,
        }
    }

    const GRPC: &str = "127.0.0.1:7400";

    #[test]
    fn the_listener_defaults_beside_the_grpc_one_and_urls_come_from_the_environment() {
        let config = HttpSection::default()
            .validate(GRPC.parse().expect("addr"), &env)
            .expect("valid");
        assert_eq!(config.listen, Some("127.0.0.1:7480".parse().expect("addr")));
        assert_eq!(
            config.bridge_url,
            Some(BoxUrl::Url("http://10.0.0.5:7480".into()))
        );
        assert_eq!(config.receiver_url, None);
    }

    #[test]
    fn an_upstream_resolves_its_headers_and_a_bad_url_is_named() {
        let section: HttpSection = serde_yaml::from_str(
            "otel_receiver_url: listener\notlp_upstream: { endpoint: 'https://otlp.example.com/', headers: { Authorization: 'Bearer ${OTLP_TOKEN}' } }\n",
        )
        .expect("parses");
        let config = section
            .validate(GRPC.parse().expect("addr"), &env)
            .expect("valid");
        assert_eq!(config.receiver_url, Some(BoxUrl::Listener));
        let upstream = config.upstream.expect("upstream");
        assert_eq!(upstream.endpoint, "https://otlp.example.com");
        assert_eq!(upstream.headers["Authorization"], "Bearer secret");
        let bad: HttpSection =
            serde_yaml::from_str("mcp_bridge_url: 10.0.0.5:7480\n").expect("parses");
        let error = bad
            .validate(GRPC.parse().expect("addr"), &|_| None)
            .expect_err("refused");
        assert!(
            error.to_string().contains("node.http.mcp_bridge_url"),
            "{error}"
        );
        let off: HttpSection =
            serde_yaml::from_str("listen: off\nmcp_bridge_url: listener\n").expect("parses");
        assert!(
            off.validate(GRPC.parse().expect("addr"), &|_| None)
                .is_err()
        );
    }
}
