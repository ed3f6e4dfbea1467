//! A **real** MCP server from npm for the tests: `@modelcontextprotocol/server-everything`
//! (the MCP project's reference server: `echo`, `get-sum` and the rest), pinned at
//! [`EVERYTHING_VERSION`] and installed once per target directory ([`crate::npm`]). A box's
//! coding agent spawns it over stdio, as a company's `mcp_servers` entry names it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The npm package.
pub const EVERYTHING_PACKAGE: &str = "@modelcontextprotocol/server-everything";
/// The version the tests install (and were verified against).
pub const EVERYTHING_VERSION: &str = "2026.8.31";
/// Overrides the install: the path of an `mcp-server-everything` to use as is.
pub const EVERYTHING_ENV: &str = "BOXFLEET_MCP_EVERYTHING";

/// The server's program (`mcp-server-everything`; pass `stdio` to serve on stdin/stdout).
pub fn server_everything() -> PathBuf {
    static SERVER: OnceLock<PathBuf> = OnceLock::new();
    SERVER
        .get_or_init(|| match std::env::var_os(EVERYTHING_ENV) {
            Some(path) if !path.is_empty() => PathBuf::from(path),
            _ => crate::npm::installed(&crate::npm::Package {
                name: EVERYTHING_PACKAGE,
                version: EVERYTHING_VERSION,
                bin: "mcp-server-everything",
                cache: "mcp-servers",
                check: installed_version,
                override_env: EVERYTHING_ENV,
            }),
        })
        .clone()
}

/// The installed package's version, read from its `package.json` (the server itself only
/// serves: it has no `--version`).
fn installed_version(bin: &Path) -> Result<String, String> {
    let modules = bin
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{} is not under node_modules/.bin", bin.display()))?;
    let manifest = modules.join(EVERYTHING_PACKAGE).join("package.json");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("read {}: {e}", manifest.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", manifest.display()))?;
    json["version"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{} names no version", manifest.display()))
}
