//! Where the server may listen: a loopback address always; any other only
//! with the explicit opt-in `insecure_remote` (this build has no TLS, so a
//! remote bind would send passwords and patient text in the clear; put
//! the server behind a TLS proxy on the same host instead).

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
/// `[::1]:8080`) and refuses a non-loopback address without the opt-in.
pub fn check_bind(text: &str, insecure_remote: bool) -> Result<SocketAddr, BindError> {
    let addr: SocketAddr = text.trim().parse().map_err(|_| {
        BindError(format!("bind address {text:?} is not an IP address with a port, e.g. 127.0.0.1:8080"))
    })?;
    if !addr.ip().is_loopback() && !insecure_remote {
        return Err(BindError(format!(
            "refusing to listen on {addr}: it is not a loopback address, and this server has no TLS, so logins and \
             patient text would cross the network in the clear; serve on 127.0.0.1 behind a TLS proxy, or pass the \
             insecure-remote opt-in if the network is trusted"
        )));
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::check_bind;

    #[test]
    fn loopback_is_allowed_and_anything_else_needs_the_opt_in() {
        assert!(check_bind("127.0.0.1:8080", false).is_ok());
        assert!(check_bind("[::1]:0", false).is_ok());
        let refused = check_bind("0.0.0.0:8080", false).unwrap_err();
        assert!(refused.0.contains("not a loopback address"), "{}", refused.0);
        assert!(check_bind("192.168.1.5:8080", false).is_err());
        assert!(check_bind("0.0.0.0:8080", true).is_ok());
        assert!(check_bind("localhost", false).unwrap_err().0.contains("not an IP address"));
    }
}
