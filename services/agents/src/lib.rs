//! boxfleet's coding-agent runners (DESIGN §10).
