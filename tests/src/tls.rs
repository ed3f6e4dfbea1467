//! Certificates for the tests' TLS fleets, made fresh in a directory: a CA, and one node
//! certificate it signs for `127.0.0.1` and `localhost`, used by every node of the fleet (as
//! server and as client of its peers) — what an operator's internal CA would issue.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// The files a TLS node is started with.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// A CA and a node certificate it signed, written under `dir`.
    pub fn make(dir: &Path) -> TlsFiles {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "boxfleet test fleet CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("ca key"))
            .expect("self-signed CA");
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .expect("node params");
        params
            .distinguished_name
            .push(DnType::CommonName, "boxfleet test node");
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().expect("node key");
        let cert = params.signed_by(&key, &ca).expect("node certificate");
        let files = TlsFiles {
            ca: dir.join("ca.pem"),
            cert: dir.join("node.pem"),
            key: dir.join("node.key"),
        };
        std::fs::write(&files.ca, ca.pem()).expect("write ca");
        std::fs::write(&files.cert, cert.pem()).expect("write cert");
        std::fs::write(&files.key, key.serialize_pem()).expect("write key");
        files
    }

    /// The node flags that serve these files (mutual TLS between nodes).
    pub fn node_args(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.cert.display().to_string(),
            "--tls-key".into(),
            self.key.display().to_string(),
            "--tls-ca".into(),
            self.ca.display().to_string(),
        ]
    }
}
