//! What a benchmark reads off a running node from outside: its process's memory, and its
//! Prometheus metrics (`/metrics`, which answers a fleet credential).

/// A size line of `/proc/{pid}/status` (`VmRSS:`, `RssAnon:`), in bytes; 0 when unreadable.
pub fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// The CPU seconds process `pid` has used so far, user and system (`/proc/{pid}/stat`); 0 when
/// it cannot be read.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // the fields after the command's closing parenthesis: state is the first, utime the 12th
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks = |at: usize| {
        fields
            .get(at)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf reads a constant of the system and touches no memory of ours
    #[allow(unsafe_code)]
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) / per_second
}

/// The node's metrics as exposed, read with `token`.
pub async fn scrape(http_url: &str, token: &str) -> String {
    reqwest::Client::new()
        .get(format!("{http_url}/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .expect("GET /metrics")
        .text()
        .await
        .expect("the metrics' body")
}

/// The sum of every sample of the family `name` (all its label sets), or 0 when absent.
pub fn family_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            // the family's own samples: `name{labels} v` or `name v`, not `name_suffix`
            let value = match rest.as_bytes().first()? {
                b'{' => rest.split_once("} ")?.1,
                b' ' => &rest[1..],
                _ => return None,
            };
            value.trim().parse::<f64>().ok()
        })
        .sum()
}

/// The value of the one sample `series` (its name and labels as exposed), or 0 when absent.
pub fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_sums_its_label_sets_and_nothing_else() {
        let text = "# HELP x\nboxfleet_polls_total{outcome=\"running\"} 3\nboxfleet_polls_total{outcome=\"done\"} 2\nboxfleet_polls_total_x 9\nboxfleet_runs 4\n";
        assert_eq!(family_sum(text, "boxfleet_polls_total"), 5.0);
        assert_eq!(family_sum(text, "boxfleet_runs"), 4.0);
        assert_eq!(sample(text, "boxfleet_polls_total{outcome=\"done\"}"), 2.0);
    }
}
