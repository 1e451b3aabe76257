//! The server's own TLS (rustls with the ring provider): a certificate
//! chain and its private key read from PEM files once at start (replacing
//! them needs a restart), and a listener that completes each handshake on
//! a task of its own before axum sees the connection, so a slow or
//! plain-HTTP client holds up no one else.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// A certificate or key file that cannot be used: the message names the
/// file and what is wrong with it.
#[derive(Debug)]
pub struct TlsError(pub String);

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

/// A handshake that has not finished in this long is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads the certificate chain (`cert`, PEM, the server's certificate
/// first) and its private key (`key`, PEM: PKCS#8, PKCS#1 or SEC1) and
/// builds the TLS configuration (TLS 1.2 and 1.3, HTTP/1.1).
pub fn load(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let cert_bytes = read(cert, "--tls-cert")?;
    let chain = CertificateDer::pem_slice_iter(&cert_bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError(format!("--tls-cert {}: not a readable PEM certificate file: {e}", cert.display())))?;
    if chain.is_empty() {
        return Err(TlsError(format!(
            "--tls-cert {}: holds no certificate (expected a PEM block starting -----BEGIN CERTIFICATE-----)",
            cert.display()
        )));
    }
    let key_bytes = read(key, "--tls-key")?;
    let private_key = PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => TlsError(format!(
            "--tls-key {}: holds no private key (expected a PEM block starting -----BEGIN PRIVATE KEY-----, \
             -----BEGIN RSA PRIVATE KEY----- or -----BEGIN EC PRIVATE KEY-----)",
            key.display()
        )),
        e => TlsError(format!("--tls-key {}: not a readable PEM private key: {e}", key.display())),
    })?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(format!("TLS setup failed: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .map_err(|e| {
            TlsError(format!(
                "--tls-cert {} with --tls-key {}: cannot be used together: {e} (is the key the certificate's own, \
                 and the server's certificate first in the file?)",
                cert.display(),
                key.display()
            ))
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn read(path: &Path, flag: &str) -> Result<Vec<u8>, TlsError> {
    let bytes = std::fs::read(path).map_err(|e| TlsError(format!("{flag} {}: cannot read it: {e}", path.display())))?;
    if bytes.is_empty() {
        return Err(TlsError(format!("{flag} {}: the file is empty", path.display())));
    }
    Ok(bytes)
}

/// Accepts TCP connections and hands on those whose TLS handshake
/// succeeded; a failed handshake (plain HTTP, an untrusted client giving
/// up) is logged with the client's address and dropped.
pub struct TlsListener {
    handshaken: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Must be called inside the tokio runtime: it spawns the accept loop.
    pub fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, handshaken) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors and the like: wait, as axum's own listener does.
                        eprintln!("evident serve: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let handed = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = handed.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => eprintln!("evident serve: TLS handshake with {peer} failed: {e}"),
                        Err(_) => eprintln!("evident serve: TLS handshake with {peer} timed out"),
                    }
                });
                if tx.is_closed() {
                    return;
                }
            }
        });
        Ok(TlsListener { handshaken, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.handshaken.recv().await {
            Some(accepted) => accepted,
            // The accept loop ends only when this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
