//! Samples of the rows in `src/vendors/table/ai.rs`.

use super::{Sample, keyed, whole};

pub(super) const SAMPLES: &[Sample] = &[
    Sample {
        kind: "huggingface_token",
        positive: |g| whole(format!("hf_{}", g.letters(34))),
        lookalike: |g| format!("hf_{}", g.letters(20)),
    },
    Sample {
        kind: "huggingface_org_token",
        positive: |g| whole(format!("api_org_{}", g.letters(34))),
        lookalike: |_| "api_org_settings_page".to_owned(),
    },
    Sample {
        kind: "groq_api_key",
        positive: |g| whole(format!("gsk_{}", g.alnum(52))),
        lookalike: |g| format!("gsk_{}", g.alnum(20)),
    },
    Sample {
        kind: "replicate_api_token",
        positive: |g| whole(format!("r8_{}", g.alnum(37))),
        lookalike: |g| format!("r8_{}", g.alnum(12)),
    },
    Sample {
        kind: "perplexity_api_key",
        positive: |g| whole(format!("pplx-{}", g.alnum(48))),
        lookalike: |g| format!("pplx-{}", g.alnum(20)),
    },
    Sample {
        kind: "xai_api_key",
        positive: |g| whole(format!("xai-{}", g.alnum(80))),
        lookalike: |_| "xai-grok-sdk".to_owned(),
    },
    Sample {
        kind: "langsmith_api_key",
        positive: |g| whole(format!("lsv2_pt_{}_{}", g.hex(32), g.hex(10))),
        lookalike: |g| format!("lsv2_pt_{}", g.hex(32)),
    },
    Sample {
        kind: "pinecone_api_key",
        positive: |g| whole(format!("pcsk_{}_{}", g.alnum(6), g.alnum(63))),
        lookalike: |g| format!("pcsk_{}", g.alnum(20)),
    },
    Sample {
        kind: "elevenlabs_api_key",
        positive: |g| whole(format!("sk_{}", g.hex(48))),
        lookalike: |g| format!("sk_{}", g.hex(24)),
    },
    Sample {
        kind: "jina_api_key",
        positive: |g| whole(format!("jina_{}", g.alnum(60))),
        lookalike: |g| format!("jina_{}", g.alnum(20)),
    },
    Sample {
        kind: "tavily_api_key",
        positive: |g| whole(format!("tvly-dev-{}", g.alnum(32))),
        lookalike: |g| format!("tvly-{}", g.alnum(12)),
    },
    Sample {
        kind: "firecrawl_api_key",
        positive: |g| whole(format!("fc-{}", g.hex(32))),
        lookalike: |g| format!("fc-{}", g.hex(12)),
    },
    Sample {
        kind: "nvidia_api_key",
        positive: |g| whole(format!("nvapi-{}", g.b64url(64))),
        lookalike: |g| format!("nvapi-{}", g.alnum(20)),
    },
    Sample {
        kind: "nightfall_api_key",
        positive: |g| whole(format!("NF-{}", g.alnum(32))),
        lookalike: |g| format!("NF-{}", g.alnum(12)),
    },
    Sample {
        kind: "wandb_api_key",
        positive: |g| keyed("WANDB_API_KEY", g.hex(40)),
        lookalike: |g| format!("WANDB_API_KEY={}", g.hex(12)),
    },
    Sample {
        kind: "assemblyai_api_key",
        positive: |g| keyed("ASSEMBLYAI_API_KEY", g.hex(32)),
        lookalike: |g| format!("ASSEMBLYAI_API_KEY={}", g.hex(12)),
    },
    Sample {
        kind: "deepgram_api_key",
        positive: |g| keyed("DEEPGRAM_API_KEY", g.hex(40)),
        lookalike: |g| format!("DEEPGRAM_API_KEY={}", g.hex(12)),
    },
    Sample {
        kind: "cohere_api_key",
        positive: |g| keyed("CO_API_KEY", g.alnum(40)),
        lookalike: |g| format!("CO_API_KEY={}", g.alnum(12)),
    },
    Sample {
        kind: "mistral_api_key",
        positive: |g| keyed("MISTRAL_API_KEY", g.alnum(32)),
        lookalike: |g| format!("MISTRAL_API_KEY={}", g.alnum(12)),
    },
    Sample {
        kind: "together_api_key",
        positive: |g| keyed("TOGETHER_API_KEY", format!("tgp_v1_{}", g.b64url(43))),
        lookalike: |g| format!("TOGETHER_API_KEY={}", g.hex(12)),
    },
];
