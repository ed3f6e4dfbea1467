//! `${VAR}` references in the company document ([`expand`]): each is replaced by the
//! variable's value from the node's environment — at load for the engine's own settings, at
//! launch for a run's environment ([`runenv`](crate::runenv)) — and an unset one is named
//! ([`unset_references`]). What is expanded where, and which keys may resolve to nothing, is
//! [`Company::expand_env`](crate::company::Company::expand_env)'s.

/// Replaces every `${VAR}` in `text` with the variable's value from `lookup`. An unset
/// variable is an error naming it.
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("{text:?} opens ${{ without closing it"));
        };
        let name = &after[..end];
        match lookup(name) {
            Some(value) => out.push_str(&value),
            None => return Err(format!("${{{name}}} is not set in the node's environment")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The variables `text` references that `lookup` does not answer, in order, each once.
pub fn unset_references(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut unset: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        if lookup(name).is_none() && !unset.iter().any(|u| u == name) {
            unset.push(name.to_owned());
        }
        rest = &after[end + 1..];
    }
    unset
}

/// Whether `text` references any variable.
pub fn references_any(text: &str) -> bool {
    text.find("${")
        .is_some_and(|at| text[at + 2..].contains('}'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_expand_and_an_unset_one_is_named() {
        let lookup = |name: &str| (name == "K").then(|| "v".to_owned());
        assert_eq!(expand("a${K}b", &lookup).expect("expands"), "avb");
        let error = expand("${NOPE}", &lookup).expect_err("unset");
        assert!(error.contains("NOPE"));
        assert_eq!(unset_references("${A}/${K}/${A}", &lookup), ["A"]);
        assert!(references_any("x${K}") && !references_any("plain"));
    }
}
