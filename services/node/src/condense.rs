//! The seats' auxiliary models, as the lifecycle's [`Condenser`]: a piece a box wrote past its
//! bound is sent to the entry `Company::auxiliary_entry` resolves for the seat
//! (`role.llm_auxiliary` → `llm` → `default`) with an instruction that says what to keep, and
//! what the model answers comes back. Two wires: Anthropic's Messages API (`POST
//! {base_url}/v1/messages`, `x-api-key`, `anthropic-version: 2023-06-01`) and OpenAI's chat
//! completions (`POST {base_url}/chat/completions`, a bearer key) for `openai` and
//! `openai-compatible` entries. Each call is bounded by [`CALL_BOUND`].

use std::time::Duration;

use async_trait::async_trait;
use boxfleet_actors::ports::{Condensed, Condenser, Overlong};
use boxfleet_config::live::LiveCompany;
use boxfleet_config::providers::{LlmEntry, Wire};
use serde_json::{Value, json};

/// How long one condensation may take.
pub const CALL_BOUND: Duration = Duration::from_secs(90);
/// The most a condensation may answer, in tokens.
const MAX_OUTPUT_TOKENS: usize = 8192;

/// Condenses through the company's `providers.llm` entries.
#[derive(Debug)]
pub struct LlmCondenser {
    /// the company in force: a reload's entries are the next condensation's
    company: LiveCompany,
    http: reqwest::Client,
}

impl LlmCondenser {
    pub fn new(company: LiveCompany) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder().timeout(CALL_BOUND).build()?;
        Ok(Self { company, http })
    }
}

/// What the model is told to keep, by piece.
fn instruction(piece: Overlong, max_bytes: usize) -> String {
    let what = match piece {
        Overlong::Report => {
            "a coding agent's findings report, for the engine that resumes its work. Keep every \
             finding, decision, changed file, branch, pull request, command run and open \
             question; drop repetition, pasted logs and filler"
        }
        Overlong::Failure => {
            "the text of a failed coding job, for the engine that resumes its work. Keep the exit \
             status, the coding CLI's own error, every piece that could not be read and the \
             lines that name what broke; drop repeated log lines"
        }
        Overlong::Question => {
            "a question a coding agent asks a person. Keep the question itself, every option it \
             offers and what it ruled out, so the person can answer it; drop the rest"
        }
    };
    format!(
        "Condense {what}. Answer with the condensed text alone, in under {max_bytes} bytes, in \
         the text's own language. Never invent anything the text does not say."
    )
}

#[async_trait]
impl Condenser for LlmCondenser {
    async fn condense(
        &self,
        seat: &str,
        piece: Overlong,
        text: &str,
        max_bytes: usize,
    ) -> Result<Condensed, String> {
        let company = self.company.get();
        let (name, entry) = company.auxiliary_entry(seat).ok_or_else(|| {
            format!("seat {seat:?} has no auxiliary model: no API entry with a key resolves (role.llm_auxiliary → llm → default)")
        })?;
        let system = instruction(piece, max_bytes);
        let max_tokens = (max_bytes / 4).clamp(256, MAX_OUTPUT_TOKENS);
        let answer = match entry.provider {
            Wire::Anthropic => self.anthropic(entry, &system, text, max_tokens).await,
            Wire::Openai | Wire::OpenaiCompatible => {
                self.openai(entry, &system, text, max_tokens).await
            }
            Wire::ClaudeCode | Wire::Opencode => {
                Err("a cli-agent entry condenses nothing".to_owned())
            }
        }
        .map_err(|why| format!("providers.llm.{name} ({}): {why}", entry.model))?;
        Ok(Condensed {
            text: answer,
            model: entry.model.clone(),
        })
    }
}

impl LlmCondenser {
    async fn anthropic(
        &self,
        entry: &LlmEntry,
        system: &str,
        text: &str,
        max_tokens: usize,
    ) -> Result<String, String> {
        let base = base_url(entry, "https://api.anthropic.com");
        let body = json!({
            "model": entry.model,
            "max_tokens": max_tokens,
            "system": system,
            "messages": [{ "role": "user", "content": text }],
        });
        let reply = self
            .http
            .post(format!("{base}/v1/messages"))
            .header("x-api-key", entry.key().unwrap_or_default())
            .header("anthropic-version", "2023-06-01")
            .json(&body)
            .send()
            .await;
        let reply = answered(reply).await?;
        let blocks = reply["content"].as_array().cloned().unwrap_or_default();
        Ok(blocks
            .iter()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"))
    }

    async fn openai(
        &self,
        entry: &LlmEntry,
        system: &str,
        text: &str,
        max_tokens: usize,
    ) -> Result<String, String> {
        let base = base_url(entry, "https://api.openai.com/v1");
        let body = json!({
            "model": entry.model,
            "max_tokens": max_tokens,
            "messages": [
                { "role": "system", "content": system },
                { "role": "user", "content": text },
            ],
        });
        let reply = self
            .http
            .post(format!("{base}/chat/completions"))
            .bearer_auth(entry.key().unwrap_or_default())
            .json(&body)
            .send()
            .await;
        let reply = answered(reply).await?;
        Ok(reply["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }
}

/// The entry's `base_url` without a trailing `/`, else the vendor's own.
fn base_url<'a>(entry: &'a LlmEntry, vendor: &'a str) -> &'a str {
    entry
        .base_url
        .as_deref()
        .filter(|url| !url.is_empty())
        .unwrap_or(vendor)
        .trim_end_matches('/')
}

/// The reply's JSON, or why there is none (the status and the start of its body).
async fn answered(reply: Result<reqwest::Response, reqwest::Error>) -> Result<Value, String> {
    let reply = reply.map_err(|error| format!("the call failed: {error}"))?;
    let status = reply.status();
    let body = reply
        .text()
        .await
        .map_err(|error| format!("the reply could not be read: {error}"))?;
    if !status.is_success() {
        let start: String = body.chars().take(300).collect();
        return Err(format!("answered {status}: {start}"));
    }
    serde_json::from_str(&body).map_err(|error| format!("the reply is not JSON: {error}"))
}
