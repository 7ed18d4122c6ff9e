//! TLS with client certificates for the fleet's gRPC (worker sessions and the admin API).
//!
//! Both ends verify each other against the fleet's CA bundle. Certificates, keys and the bundle
//! are files that are read again when they change ([`reload::Reloading`]), so a rotation needs no
//! restart: tonic's static TLS settings cannot do that, so the server hands tonic a stream of
//! connections it accepted itself ([`server::incoming`]) and the client dials through its own
//! connector ([`client::connect`]). Plaintext is only ever used when `--insecure` asks for it
//! ([`cli`]).

pub mod cli;
pub mod client;
mod error;
#[cfg(feature = "generate")]
pub mod generate;
pub mod identity;
mod pem_files;
pub mod reload;
pub mod server;

pub use error::TlsError;
pub use identity::PeerInfo;
pub use pem_files::TlsFiles;
