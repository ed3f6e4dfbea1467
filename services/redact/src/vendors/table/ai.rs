//! AI and machine-learning APIs (Anthropic's and OpenAI's keys are read by tokens.rs).

use super::row;
use crate::vendors::Rule;

pub(super) const ROWS: &[Rule] = &[
    // Hugging Face docs: user access tokens `hf_` and 34 letters; organisation tokens `api_org_`
    row(
        "Hugging Face",
        "huggingface_token",
        &["hf_"],
        r"hf_[A-Za-z]{34}",
    ),
    row(
        "Hugging Face",
        "huggingface_org_token",
        &["api_org_"],
        r"api_org_[A-Za-z]{34}",
    ),
    // Groq: API keys `gsk_` and 52 letters and digits
    row("Groq", "groq_api_key", &["gsk_"], r"gsk_[A-Za-z0-9]{52}"),
    // Replicate: API tokens `r8_` and 37 base64url (40 in all)
    row(
        "Replicate",
        "replicate_api_token",
        &["r8_"],
        r"r8_[A-Za-z0-9_-]{37}",
    ),
    // Perplexity: API keys `pplx-` and 48 letters and digits
    row(
        "Perplexity",
        "perplexity_api_key",
        &["pplx-"],
        r"pplx-[A-Za-z0-9]{48}",
    ),
    // xAI: API keys `xai-` and 80 letters, digits and `_`
    row("xAI", "xai_api_key", &["xai-"], r"xai-[A-Za-z0-9_]{80}"),
    // LangSmith (LangChain): personal tokens `lsv2_pt_` and service keys `lsv2_sk_`, 32 hex,
    // `_`, 10 hex
    row(
        "LangChain",
        "langsmith_api_key",
        &["lsv2_pt_", "lsv2_sk_"],
        r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}",
    ),
    // Pinecone: API keys `pcsk_`, a 5- or 6-character id, `_`, 63 letters and digits
    row(
        "Pinecone",
        "pinecone_api_key",
        &["pcsk_"],
        r"pcsk_[A-Za-z0-9]{5,6}_[A-Za-z0-9]{63}",
    ),
    // ElevenLabs: API keys `sk_` and 48 lower-case hex
    row(
        "ElevenLabs",
        "elevenlabs_api_key",
        &["sk_"],
        r"sk_[a-f0-9]{48}",
    ),
    // Jina AI: API keys `jina_` and 60 letters and digits
    row(
        "Jina AI",
        "jina_api_key",
        &["jina_"],
        r"jina_[A-Za-z0-9]{60}",
    ),
    // Tavily docs: API keys `tvly-` (with `dev-` or `prod-` in newer keys) and 32 letters and
    // digits
    row(
        "Tavily",
        "tavily_api_key",
        &["tvly-"],
        r"tvly-(?:dev-|prod-)?[A-Za-z0-9]{32}",
    ),
    // Firecrawl docs: API keys `fc-` and 32 lower-case hex
    row(
        "Firecrawl",
        "firecrawl_api_key",
        &["fc-"],
        r"fc-[a-f0-9]{32}",
    ),
    // NVIDIA (NGC, build.nvidia.com): API keys `nvapi-` and 64 base64url
    row(
        "NVIDIA",
        "nvidia_api_key",
        &["nvapi-"],
        r"nvapi-[A-Za-z0-9_-]{64}",
    ),
    // Nightfall: API keys `NF-` and 32 letters and digits
    row(
        "Nightfall",
        "nightfall_api_key",
        &["NF-"],
        r"NF-[A-Za-z0-9]{32}",
    ),
    // Weights & Biases: API keys are 40 lower-case hex, read from `WANDB_API_KEY`
    keyed_row!(
        "Weights & Biases",
        "wandb_api_key",
        ["WANDB_API_KEY"],
        r"[a-f0-9]{40}"
    ),
    // AssemblyAI: API keys are 32 lower-case hex
    keyed_row!(
        "AssemblyAI",
        "assemblyai_api_key",
        ["ASSEMBLYAI_API_KEY"],
        r"[a-f0-9]{32}"
    ),
    // Deepgram: API keys are 40 lower-case hex
    keyed_row!(
        "Deepgram",
        "deepgram_api_key",
        ["DEEPGRAM_API_KEY"],
        r"[a-f0-9]{40}"
    ),
    // Cohere: API keys are 40 letters and digits, read from `CO_API_KEY`
    keyed_row!(
        "Cohere",
        "cohere_api_key",
        ["CO_API_KEY", "COHERE_API_KEY"],
        r"[A-Za-z0-9]{40}"
    ),
    // Mistral AI: API keys are 32 letters and digits
    keyed_row!(
        "Mistral AI",
        "mistral_api_key",
        ["MISTRAL_API_KEY"],
        r"[A-Za-z0-9]{32}"
    ),
    // Together AI: API keys, 64 hex (older) or `tgp_v1_` and 43 base64url
    keyed_row!(
        "Together AI",
        "together_api_key",
        ["TOGETHER_API_KEY"],
        r"tgp_v1_[A-Za-z0-9_-]{43}|[a-f0-9]{64}"
    ),
];
