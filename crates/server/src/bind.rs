//! Where the server may listen: a loopback address always; any other only
//! with TLS configured (`--tls-cert`/`--tls-key`) or the explicit opt-in
//! `insecure_remote` (plain HTTP would send passwords and patient text in
//! the clear).

use std::net::SocketAddr;

/// Why the server will not listen on an address.
#[derive(Debug)]
pub struct BindError(pub String);

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BindError {}

/// Parses `text` (an address with a port, e.g. `127.0.0.1:8080` or
/// `[::1]:8080`) and refuses a non-loopback address unless the server
/// speaks TLS (`tls`) or the opt-in is given.
pub fn check_bind(text: &str, tls: bool, insecure_remote: bool) -> Result<SocketAddr, BindError> {
    let addr: SocketAddr = text.trim().parse().map_err(|_| {
        BindError(format!("bind address {text:?} is not an IP address with a port, e.g. 127.0.0.1:8080"))
    })?;
    if !addr.ip().is_loopback() && !tls && !insecure_remote {
        return Err(BindError(format!(
            "refusing to listen on {addr}: it is not a loopback address and no TLS is configured, so logins and \
             patient text would cross the network in the clear; give --tls-cert and --tls-key, or serve on \
             127.0.0.1, or pass --insecure-remote if the network is trusted"
        )));
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::check_bind;

    #[test]
    fn loopback_is_allowed_and_anything_else_needs_tls_or_the_opt_in() {
        assert!(check_bind("127.0.0.1:8080", false, false).is_ok());
        assert!(check_bind("[::1]:0", false, false).is_ok());
        let refused = check_bind("0.0.0.0:8080", false, false).unwrap_err();
        assert!(refused.0.contains("not a loopback address"), "{}", refused.0);
        assert!(check_bind("192.168.1.5:8080", false, false).is_err());
        assert!(check_bind("0.0.0.0:8080", true, false).is_ok());
        assert!(check_bind("0.0.0.0:8080", false, true).is_ok());
        assert!(check_bind("localhost", true, false).unwrap_err().0.contains("not an IP address"));
    }
}
