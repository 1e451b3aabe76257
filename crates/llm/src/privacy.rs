//! The privacy guard: patient text reaches only loopback endpoints unless
//! the user allowed remote ones. Host names other than `localhost` count as
//! remote (they are not resolved: a name can point anywhere).

use crate::error::LlmError;

/// Whether `url` (e.g. `http://127.0.0.1:8080/v1`) names a loopback host.
pub fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map(|(_, h)| h).unwrap_or(authority);
    let host = if let Some(bracketed) = host_port.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Refuses a request that carries patient text to a non-loopback `url`
/// unless `allow_remote`.
pub fn check_destination(url: &str, contains_patient_text: bool, allow_remote: bool) -> Result<(), LlmError> {
    if contains_patient_text && !allow_remote && !is_loopback_url(url) {
        return Err(LlmError::PrivacyRefused { endpoint: url.to_string() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, loopback: bool) {
        assert_eq!(is_loopback_url(url), loopback, "{url}");
    }

    #[test]
    fn loopback_hosts() {
        check("http://127.0.0.1:8080/v1", true);
        check("http://127.3.2.1/v1", true);
        check("http://localhost:11434/v1", true);
        check("http://LOCALHOST/v1", true);
        check("http://[::1]:8000/v1", true);
        check("http://user:pw@127.0.0.1:1/v1", true);
    }

    #[test]
    fn remote_hosts() {
        check("https://api.openai.com/v1", false);
        check("http://10.0.0.5:8000/v1", false);
        check("http://localhost.evil.example/v1", false);
        check("http://127.0.0.1.nip.io/v1", false);
        check("http://[2001:db8::1]:80/", false);
        check("http://0.0.0.0:8000/v1", false);
    }

    #[test]
    fn guard_lets_non_patient_text_out_and_honours_opt_in() {
        assert!(check_destination("https://api.openai.com/v1", false, false).is_ok());
        assert!(check_destination("https://api.openai.com/v1", true, true).is_ok());
        let err = check_destination("https://api.openai.com/v1", true, false).unwrap_err();
        assert!(matches!(err, LlmError::PrivacyRefused { .. }));
        let message = err.to_string();
        assert!(message.contains("https://api.openai.com/v1"), "names the endpoint: {message}");
        assert!(message.contains("allow_remote = true in [llm]"), "says how to allow it: {message}");
        assert!(!message.contains("--"), "a library error cites no command-line flag: {message}");
    }
}
