//! The node's side of the trust boundary (DESIGN §13): its keyring and credentials, the check
//! every call passes before it reaches a service, the audit line of every call that writes,
//! and the TLS its listener serves and its calls to other nodes use.
//!
//! - Every Runs, Engine, Ops and Fleet call carries `authorization: Bearer <credential>`; the
//!   interceptor ([`Trust::interceptor`]) verifies it and puts the caller's [`Principal`] on
//!   the request; each handler then asks [`authorize`] for its own call and seats. gRPC health
//!   and reflection stay open.
//! - A call a node forwards to the seat's holder goes over the Fleet service under the node's
//!   own credential (role `node`), with the caller's credential beside it
//!   ([`CALLER_HEADER`]); the holder verifies both, and acts for the caller.
//! - A node given no keys makes its keyring in its data dir on first start, and writes an
//!   admin credential there ([`ADMIN_TOKEN_FILE`], 0600) for the CLI on the same machine.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use boxfleet_auth::{Call, Denied, Keyring, Principal, Role};
use boxfleet_config::auth::{KeySource, TlsSection};
use tonic::metadata::MetadataMap;
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};
use tonic::{Request, Status};
use tracing::info;

/// The admin credential a node writes in its data dir.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";
/// How long the admin credential a node writes is valid.
const ADMIN_TTL: Duration = Duration::from_secs(365 * 24 * 3600);
/// How long a node's own credential (for its calls to other nodes) is valid; it is minted
/// again well before it runs out.
const NODE_TTL: Duration = Duration::from_secs(3600);
/// The metadata a forwarding node carries the caller's credential in.
pub const CALLER_HEADER: &str = "x-boxfleet-caller";

/// What the node trusts, and how it proves itself to its peers.
#[derive(Debug)]
pub struct Trust {
    keyring: Keyring,
    node: String,
    /// this node's own credential and when it was minted
    node_credential: Mutex<(String, chrono::DateTime<chrono::Utc>)>,
    /// the TLS the listener serves, when configured
    server_tls: Option<ServerTlsConfig>,
    /// the TLS the node dials its peers with, when configured
    client_tls: Option<ClientTlsConfig>,
    /// the node's keyring was made now, in this file
    pub made_keyring: Option<PathBuf>,
    /// the admin credential file the node wrote, when it wrote one
    pub admin_file: Option<PathBuf>,
}

impl Trust {
    /// The node's keyring (made in `data_dir` when its config gives none) and TLS.
    pub fn start(
        node: &str,
        keys: &KeySource,
        tls: Option<&TlsSection>,
        data_dir: &Path,
    ) -> anyhow::Result<Trust> {
        let (keyring, made_keyring) = match keys {
            KeySource::File(path) => {
                let (ring, made) = Keyring::load_or_create(path)
                    .with_context(|| format!("the keyring {}", path.display()))?;
                (ring, made.then(|| path.clone()))
            }
            KeySource::Keys { keys, signing_key } => {
                let keys = keys
                    .iter()
                    .map(|key| {
                        boxfleet_auth::keyring::Key::from_text(&key.id, &key.secret, key.retired)
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .context("auth.keys")?;
                (
                    Keyring::new(keys, signing_key.as_deref()).context("auth.keys")?,
                    None,
                )
            }
        };
        let admin_file = write_admin_credential(&keyring, data_dir)?;
        let (server_tls, client_tls) = match tls {
            Some(tls) => {
                let (server, client) = tls_configs(tls)?;
                (Some(server), Some(client))
            }
            None => (None, None),
        };
        let now = chrono::Utc::now();
        let credential = keyring.issue(node, Role::Node, &[], NODE_TTL, now);
        Ok(Trust {
            keyring,
            node: node.to_owned(),
            node_credential: Mutex::new((credential, now)),
            server_tls,
            client_tls,
            made_keyring,
            admin_file,
        })
    }

    /// The TLS the listener serves.
    pub fn server_tls(&self) -> Option<ServerTlsConfig> {
        self.server_tls.clone()
    }

    /// The TLS calls to other nodes use (`None`: they are plain HTTP/2).
    pub fn client_tls(&self) -> Option<ClientTlsConfig> {
        self.client_tls.clone()
    }

    /// Whether this node's peers are dialled (and its listener served) over TLS.
    pub fn tls(&self) -> bool {
        self.server_tls.is_some()
    }

    /// Mints a per-run token for `grant` (the tool bridge's or the OTLP receiver's audience),
    /// signed with the fleet's signing key and naming it.
    pub fn mint_run_token(&self, grant: &boxfleet_auth::run_token::RunGrant) -> String {
        boxfleet_auth::run_token::mint(&self.keyring, grant)
    }

    /// Verifies a per-run token for audience `aud`: signed by a key of the fleet's ring that is
    /// not retired, for this audience, not expired.
    pub fn verify_run_token(
        &self,
        token: &str,
        aud: &str,
    ) -> Result<boxfleet_auth::run_token::RunGrant, boxfleet_auth::KeyringError> {
        boxfleet_auth::run_token::verify(&self.keyring, token, aud, chrono::Utc::now())
    }

    /// Verifies a bearer credential.
    pub fn verify(&self, token: &str) -> Result<Principal, Denied> {
        self.keyring
            .verify(token)
            .map_err(|error| Denied::Unauthenticated(error.to_string()))
    }

    /// The caller a request's `authorization` names.
    pub fn caller(&self, metadata: &MetadataMap) -> Result<Principal, Denied> {
        let token = bearer(metadata, "authorization")
            .ok_or_else(|| Denied::Unauthenticated("the call carries no credential".into()))?;
        self.verify(token)
    }

    /// The interceptor every service but health and reflection is served behind: the caller's
    /// credential verified, and its principal put on the request.
    pub fn interceptor(self: &Arc<Self>) -> impl tonic::service::Interceptor + Clone + use<> {
        let trust = self.clone();
        move |mut request: Request<()>| {
            let principal = trust.caller(request.metadata()).map_err(denied)?;
            request.extensions_mut().insert(principal);
            Ok(request)
        }
    }

    /// This node's own credential, minted again when half its life is gone.
    pub fn node_credential(&self) -> String {
        let mut held = self
            .node_credential
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let now = chrono::Utc::now();
        if (now - held.1).to_std().unwrap_or_default() > NODE_TTL / 2 {
            *held = (
                self.keyring
                    .issue(&self.node, Role::Node, &[], NODE_TTL, now),
                now,
            );
        }
        held.0.clone()
    }
}

/// Adds one credential to every call a client makes.
#[derive(Debug, Clone)]
pub struct BearerToken(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl BearerToken {
    pub fn new(token: &str) -> anyhow::Result<BearerToken> {
        Ok(BearerToken(
            format!("Bearer {}", token.trim())
                .parse()
                .context("a credential is not a header value")?,
        ))
    }
}

impl tonic::service::Interceptor for BearerToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

/// The credential in `name` (`Bearer <token>`).
pub fn bearer<'m>(metadata: &'m MetadataMap, name: &str) -> Option<&'m str> {
    let value = metadata.get(name)?.to_str().ok()?;
    value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .map(str::trim)
        .filter(|token| !token.is_empty())
}

/// A refusal as a status.
pub fn denied(refusal: Denied) -> Status {
    match refusal {
        Denied::Unauthenticated(_) => Status::unauthenticated(refusal.to_string()),
        Denied::PermissionDenied(_) => Status::permission_denied(refusal.to_string()),
    }
}

/// The principal the interceptor put on a request.
pub fn principal_of<T>(request: &Request<T>) -> Result<Principal, Status> {
    request
        .extensions()
        .get::<Principal>()
        .cloned()
        .ok_or_else(|| Status::unauthenticated("unauthenticated: the call was not checked"))
}

/// Whether `principal` may make `call`; a call that writes is logged with who made it.
pub fn authorize(principal: &Principal, call: &Call<'_>, ids: &str) -> Result<(), Status> {
    boxfleet_auth::authorize(principal, call).map_err(|refusal| {
        info!(
            subject = %principal.subject,
            role = %principal.role,
            rpc = call.name(),
            ids,
            %refusal,
            "api_call_refused"
        );
        denied(refusal)
    })?;
    if call.mutates() {
        info!(
            subject = %principal.subject,
            role = %principal.role,
            rpc = call.name(),
            ids,
            "api_call"
        );
    }
    Ok(())
}

/// Writes the admin credential to `{data_dir}/admin.token` (0600) unless one there still
/// verifies; returns the path when it wrote one.
fn write_admin_credential(keyring: &Keyring, data_dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    let path = data_dir.join(ADMIN_TOKEN_FILE);
    if let Ok(text) = std::fs::read_to_string(&path)
        && keyring
            .verify(text.trim())
            .is_ok_and(|principal| principal.role == Role::Admin)
    {
        return Ok(None);
    }
    let token = keyring.issue("admin", Role::Admin, &[], ADMIN_TTL, chrono::Utc::now());
    boxfleet_auth::keyring::write_private(&path, format!("{token}\n").as_bytes())
        .context("write the admin credential")?;
    Ok(Some(path))
}

/// The listener's TLS and the peers' from one `node.tls`.
fn tls_configs(tls: &TlsSection) -> anyhow::Result<(ServerTlsConfig, ClientTlsConfig)> {
    let read = |path: &Path, what: &str| {
        std::fs::read(path).with_context(|| format!("read node.tls.{what} {}", path.display()))
    };
    let identity = Identity::from_pem(read(&tls.cert, "cert")?, read(&tls.key, "key")?);
    let mut server = ServerTlsConfig::new().identity(identity.clone());
    let mut client = ClientTlsConfig::new();
    if let Some(ca) = &tls.ca {
        let ca = Certificate::from_pem(read(ca, "ca")?);
        // a client certificate is asked for, not required: the CLI presents none; the Fleet
        // service requires one (mutual TLS between nodes)
        server = server.client_ca_root(ca.clone()).client_auth_optional(true);
        client = client.ca_certificate(ca).identity(identity);
    }
    Ok((server, client))
}
