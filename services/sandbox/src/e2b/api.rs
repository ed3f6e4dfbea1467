//! E2B's control plane (`https://api.{domain}`, header `X-API-Key`): create, read, connect,
//! re-time, pause, kill and list boxes. Every request — sending it and reading its whole answer
//! — is bounded by the control budget (60 s by default): minting a VM is a real allocation, and
//! a call that cannot answer inside its budget is answered as unreachable rather than waited on.
//!
//! How an answer reads: 2xx is the operation's own; 401/403 is the API key
//! ([`BoxError::Failed`], naming it); 404 is left to the caller (gone, for every call on one
//! box); 5xx, 429, a timeout or a connection that failed are [`BoxError::Unreachable`] with the
//! status and an excerpt of the body; any other 4xx is [`BoxError::Failed`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use boxfleet_actors::ports::BoxError;
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

/// How much of an error body a message quotes.
const EXCERPT_CHARS: usize = 300;

/// The API key: sent as `X-API-Key`, never shown.
#[derive(Clone)]
pub(crate) struct ApiKey(pub(crate) String);

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// The box's envd access token: kept in memory on the handle only, sent as `X-Access-Token`,
/// never shown, written or logged.
#[derive(Clone)]
pub(crate) struct AccessToken(pub(crate) String);

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(<redacted>)")
    }
}

/// What the control plane says of one box (create, connect and get answer alike).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SandboxInfo {
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(default)]
    pub envd_version: Option<String>,
    #[serde(default)]
    pub envd_access_token: Option<String>,
    #[serde(default)]
    pub domain: Option<String>,
    /// `running` or `paused` (get and list only)
    #[serde(default)]
    pub state: Option<String>,
}

impl fmt::Debug for SandboxInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxInfo")
            .field("sandbox_id", &self.sandbox_id)
            .field("envd_version", &self.envd_version)
            .field("domain", &self.domain)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// An answer the control plane gave.
pub(crate) struct Answer {
    pub status: StatusCode,
    pub body: Vec<u8>,
    /// `X-Next-Token`: the cursor of a listing's next page
    pub next_token: Option<String>,
}

impl Answer {
    pub fn excerpt(&self) -> String {
        excerpt(&self.body)
    }
}

pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.chars().count() > EXCERPT_CHARS {
        format!("{}…", text.chars().take(EXCERPT_CHARS).collect::<String>())
    } else {
        text.to_owned()
    }
}

/// The control-plane client.
#[derive(Debug, Clone)]
pub(crate) struct Api {
    http: reqwest::Client,
    base: String,
    key: ApiKey,
    budget: Duration,
    /// the team's plan's box lifetime, in seconds, once E2B has said it (0: not yet)
    lifetime: Arc<AtomicU64>,
}

/// E2B's refusal of a timeout longer than the plan lets a box live ("Timeout cannot be greater
/// than 1 hours", HTTP 400): that lifetime, in seconds.
pub(crate) fn lifetime_in(answer: &Answer) -> Option<u64> {
    if answer.status != StatusCode::BAD_REQUEST {
        return None;
    }
    let text = String::from_utf8_lossy(&answer.body);
    let rest = text.split("cannot be greater than ").nth(1)?;
    let mut words = rest.split_whitespace();
    let count: u64 = words.next()?.parse().ok()?;
    let unit = words
        .next()?
        .trim_matches(|c: char| !c.is_ascii_alphabetic());
    match unit {
        "hours" | "hour" => count.checked_mul(3600),
        "minutes" | "minute" => count.checked_mul(60),
        "seconds" | "second" => Some(count),
        _ => None,
    }
}

impl Api {
    pub fn new(http: reqwest::Client, base: String, key: ApiKey, budget: Duration) -> Self {
        Api {
            http,
            base: base.trim_end_matches('/').to_owned(),
            key,
            budget,
            lifetime: Arc::new(AtomicU64::new(0)),
        }
    }

    /// `timeout` held to the plan's lifetime, once E2B has said it.
    fn capped(&self, timeout: u64) -> u64 {
        match self.lifetime.load(Ordering::Relaxed) {
            0 => timeout,
            lifetime => timeout.min(lifetime),
        }
    }

    /// A call that asks for a box `timeout` seconds (`body` given the timeout): held to the
    /// plan's lifetime, and asked once more within it when E2B refuses it as past the plan's
    /// cap — the lifetime is kept, so no later call asks past it. E2B ends a box at its
    /// lifetime whatever keepalives come; a box timeout past it would otherwise be refused at
    /// every keepalive, and the box end at the create's timeout.
    async fn timed_call(
        &self,
        path: &str,
        timeout: u64,
        body: impl Fn(u64) -> Value,
        what: &str,
    ) -> Result<Answer, BoxError> {
        let asked = self.capped(timeout);
        let answer = self
            .call(Method::POST, path, Some(body(asked)), what)
            .await?;
        match lifetime_in(&answer) {
            Some(lifetime) if lifetime < asked => {
                self.lifetime.store(lifetime, Ordering::Relaxed);
                tracing::warn!(
                    asked,
                    lifetime,
                    "e2b_box_lifetime_capped: E2B's plan lets a box live {lifetime}s; boxes are \
                     timed to that, and a run longer than it ends when E2B ends its box"
                );
                self.call(Method::POST, path, Some(body(lifetime)), what)
                    .await
            }
            _ => Ok(answer),
        }
    }

    /// One request, bounded as a whole by the budget. Transport failures and timeouts are
    /// unreachable; the status is left to [`Api::judge`] and the caller.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        what: &str,
    ) -> Result<Answer, BoxError> {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .header("X-API-Key", &self.key.0);
        match body {
            Some(body) => request = request.json(&body),
            // a POST always says its length: E2B's API sits behind a load balancer that answers
            // a POST with neither Content-Length nor a chunked body 411 (both SDKs send one)
            None if method == Method::POST => {
                request = request
                    .header(reqwest::header::CONTENT_LENGTH, "0")
                    .body(Vec::<u8>::new());
            }
            None => {}
        }
        let exchange = async {
            let response = request.send().await?;
            let status = response.status();
            let next_token = response
                .headers()
                .get("x-next-token")
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>(Answer {
                status,
                body: body.to_vec(),
                next_token,
            })
        };
        match tokio::time::timeout(self.budget, exchange).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(error)) => Err(BoxError::Unreachable(format!(
                "{what}: the E2B control plane at {} could not be reached: {}",
                self.base,
                error.without_url()
            ))),
            Err(_) => Err(BoxError::Unreachable(format!(
                "{what}: the E2B control plane at {} did not answer within {:.1}s (the control \
                 budget)",
                self.base,
                self.budget.as_secs_f64()
            ))),
        }
    }

    /// The reading every call shares: Ok for 2xx; the key for 401/403; unreachable for 5xx and
    /// 429; failed for any other status (404 included — callers that mean "gone" check first).
    pub fn judge(answer: &Answer, what: &str) -> Result<(), BoxError> {
        let status = answer.status;
        if status.is_success() {
            return Ok(());
        }
        let code = status.as_u16();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(BoxError::Failed(format!(
                "{what}: E2B refused the API key (HTTP {code}: {}); check the e2b backend's \
                 api_key (E2B_API_KEY) — it is missing, revoked or for another team",
                answer.excerpt()
            )));
        }
        if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
            return Err(BoxError::Unreachable(format!(
                "{what}: the E2B control plane answered HTTP {code}: {}",
                answer.excerpt()
            )));
        }
        Err(BoxError::Failed(format!(
            "{what}: the E2B control plane refused it with HTTP {code}: {}",
            answer.excerpt()
        )))
    }

    fn parse(answer: &Answer, what: &str) -> Result<SandboxInfo, BoxError> {
        serde_json::from_slice(&answer.body).map_err(|error| {
            BoxError::Failed(format!(
                "{what}: the E2B control plane's answer is not a sandbox ({error}): {}",
                // the body may carry the access token: name its size, never quote it
                format_args!("{} bytes", answer.body.len())
            ))
        })
    }

    /// `POST /sandboxes`: a secured box of `template` living `timeout` seconds.
    pub async fn create(
        &self,
        template: &str,
        timeout: u64,
        metadata: Value,
        env: Value,
    ) -> Result<SandboxInfo, BoxError> {
        let what = format!("create a box from template {template:?}");
        let body = |timeout: u64| {
            json!({
                "templateID": template,
                "timeout": timeout,
                "secure": true,
                "metadata": metadata.clone(),
                "envVars": env.clone(),
            })
        };
        let answer = self.timed_call("/sandboxes", timeout, body, &what).await?;
        Self::judge(&answer, &what)?;
        Self::parse(&answer, &what)
    }

    /// `GET /sandboxes/{id}`: `None` when the box is gone (404).
    pub async fn get(&self, sandbox_id: &str) -> Result<Option<SandboxInfo>, BoxError> {
        let what = format!("read box {sandbox_id}");
        let answer = self
            .call(
                Method::GET,
                &format!("/sandboxes/{sandbox_id}"),
                None,
                &what,
            )
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        Self::judge(&answer, &what)?;
        Self::parse(&answer, &what).map(Some)
    }

    /// `POST /sandboxes/{id}/connect`: reaches the box, resuming it when paused (200: it was
    /// running; 201: it was resumed). `None` when the box is gone.
    pub async fn connect(
        &self,
        sandbox_id: &str,
        timeout: u64,
    ) -> Result<Option<(SandboxInfo, bool)>, BoxError> {
        let what = format!("connect to box {sandbox_id}");
        let answer = self
            .timed_call(
                &format!("/sandboxes/{sandbox_id}/connect"),
                timeout,
                |timeout| json!({ "timeout": timeout }),
                &what,
            )
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        Self::judge(&answer, &what)?;
        let resumed = answer.status == StatusCode::CREATED;
        Self::parse(&answer, &what).map(|info| Some((info, resumed)))
    }

    /// `POST /sandboxes/{id}/timeout`: the box lives `timeout` seconds from now. `false` only
    /// when the box is gone: E2B re-times running boxes alone, so it answers 404 for a paused
    /// box too (which keeps until it is resumed or killed) — a 404 is asked of `GET` before it
    /// is read as gone — and 409 while the box is pausing or resuming (re-timed at the next
    /// keepalive).
    pub async fn set_timeout(&self, sandbox_id: &str, timeout: u64) -> Result<bool, BoxError> {
        let what = format!("re-time box {sandbox_id}");
        let answer = self
            .timed_call(
                &format!("/sandboxes/{sandbox_id}/timeout"),
                timeout,
                |timeout| json!({ "timeout": timeout }),
                &what,
            )
            .await?;
        match answer.status {
            StatusCode::NOT_FOUND => Ok(self.get(sandbox_id).await?.is_some()),
            StatusCode::CONFLICT => Ok(true),
            _ => Self::judge(&answer, &what).map(|()| true),
        }
    }

    /// `POST /sandboxes/{id}/pause`; 409 (already paused) is success. `false` when gone.
    pub async fn pause(&self, sandbox_id: &str) -> Result<bool, BoxError> {
        let what = format!("pause box {sandbox_id}");
        let answer = self
            .call(
                Method::POST,
                &format!("/sandboxes/{sandbox_id}/pause"),
                None,
                &what,
            )
            .await?;
        match answer.status {
            StatusCode::NOT_FOUND => Ok(false),
            StatusCode::CONFLICT => Ok(true),
            _ => Self::judge(&answer, &what).map(|()| true),
        }
    }

    /// `DELETE /sandboxes/{id}`; 404 and 410 (already gone) are success.
    pub async fn kill(&self, sandbox_id: &str) -> Result<(), BoxError> {
        let what = format!("kill box {sandbox_id}");
        let answer = self
            .call(
                Method::DELETE,
                &format!("/sandboxes/{sandbox_id}"),
                None,
                &what,
            )
            .await?;
        match answer.status {
            StatusCode::NOT_FOUND | StatusCode::GONE => Ok(()),
            _ => Self::judge(&answer, &what),
        }
    }

    /// `GET /v2/sandboxes?metadata=…&state=running,paused`: the team's boxes whose metadata
    /// holds every `(key, value)` of `labels` (the query E2B's SDKs send: the pairs
    /// form-encoded into the one `metadata` parameter, the states comma-joined), every page.
    pub async fn list_labelled(
        &self,
        labels: &[(&str, &str)],
    ) -> Result<Vec<SandboxInfo>, BoxError> {
        let metadata = form_encoded(labels);
        self.list_pages(
            "list boxes by label",
            &[("metadata", metadata.as_str()), ("state", "running,paused")],
        )
        .await
    }

    /// `GET /v2/sandboxes`: the team's boxes, running and paused, every page.
    pub async fn list(&self) -> Result<Vec<SandboxInfo>, BoxError> {
        self.list_pages("list boxes", &[("state", "running,paused")])
            .await
    }

    /// Every page of `GET /v2/sandboxes?{query}`: E2B answers [`LIST_PAGE`] boxes a page at
    /// most and names the next page's cursor in `X-Next-Token` (sent back as `nextToken`),
    /// none on the last. A cursor that repeats, or more than [`MAX_LIST_PAGES`] pages, is
    /// refused rather than followed for ever.
    async fn list_pages(
        &self,
        what: &str,
        query: &[(&str, &str)],
    ) -> Result<Vec<SandboxInfo>, BoxError> {
        let limit = LIST_PAGE.to_string();
        let mut boxes = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_LIST_PAGES {
            let mut pairs: Vec<(&str, &str)> = query.to_vec();
            pairs.push(("limit", &limit));
            if let Some(token) = &cursor {
                pairs.push(("nextToken", token));
            }
            let answer = self
                .call(
                    Method::GET,
                    &format!("/v2/sandboxes?{}", form_encoded(&pairs)),
                    None,
                    what,
                )
                .await?;
            Self::judge(&answer, what)?;
            let page: Vec<SandboxInfo> = serde_json::from_slice(&answer.body).map_err(|error| {
                BoxError::Failed(format!(
                    "{what}: the E2B control plane's answer is not a list of sandboxes: {error}"
                ))
            })?;
            boxes.extend(page);
            let next = answer.next_token.filter(|token| !token.is_empty());
            match next {
                None => return Ok(boxes),
                Some(token) if cursor.as_deref() == Some(token.as_str()) => {
                    return Err(BoxError::Failed(format!(
                        "{what}: the E2B control plane named the same page twice ({token:?})"
                    )));
                }
                Some(token) => cursor = Some(token),
            }
        }
        Err(BoxError::Failed(format!(
            "{what}: more than {MAX_LIST_PAGES} pages of boxes ({} read); not followed further",
            boxes.len()
        )))
    }
}

/// The most boxes one page of `GET /v2/sandboxes` holds (E2B's `limit` bound).
pub(crate) const LIST_PAGE: usize = 100;
/// The most pages a listing follows.
const MAX_LIST_PAGES: usize = 1_000;

/// `pairs` form-encoded (`k=v&k2=v2`), as a query string.
fn form_encoded(pairs: &[(&str, &str)]) -> String {
    let mut url = reqwest::Url::parse("http://form.invalid/").expect("a literal URL");
    url.query_pairs_mut().extend_pairs(pairs);
    url.query().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: &str) -> Answer {
        Answer {
            status: StatusCode::BAD_REQUEST,
            body: body.as_bytes().to_vec(),
            next_token: None,
        }
    }

    #[test]
    fn the_plans_lifetime_is_read_from_e2bs_refusal() {
        let said = |body: &str| lifetime_in(&refused(body));
        assert_eq!(
            said(r#"{"code":400,"message":"Timeout cannot be greater than 1 hours"}"#),
            Some(3600)
        );
        assert_eq!(
            said("Timeout cannot be greater than 24 hours"),
            Some(86_400)
        );
        assert_eq!(said("Timeout cannot be greater than 90 seconds"), Some(90));
        assert_eq!(said("templateID is required"), None);
        let mut other = refused("Timeout cannot be greater than 1 hours");
        other.status = StatusCode::CONFLICT;
        assert_eq!(lifetime_in(&other), None);
    }
}
