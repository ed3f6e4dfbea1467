//! A TCP proxy a test controls, to cut one node off from etcd and let it back.
//!
//! Cutting drops every open connection and refuses (accepts and closes) new ones; restoring
//! lets new connections through again. Nothing else about the traffic changes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A proxy from a loopback port to `target`.
#[derive(Debug)]
pub struct TcpProxy {
    pub addr: SocketAddr,
    open: Arc<AtomicBool>,
    /// bumped on every cut: each connection ends when it changes
    cuts: watch::Sender<u64>,
    accept: tokio::task::JoinHandle<()>,
}

impl TcpProxy {
    /// Starts proxying a fresh loopback port to `target` (`host:port`).
    pub async fn start(target: &str) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let open = Arc::new(AtomicBool::new(true));
        let (cuts, _) = watch::channel(0u64);
        let accept = {
            let (open, cuts, target) = (open.clone(), cuts.clone(), target.to_owned());
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    if !open.load(Ordering::SeqCst) {
                        drop(client);
                        continue;
                    }
                    let mut cut = cuts.subscribe();
                    let target = target.clone();
                    tokio::spawn(async move {
                        let Ok(mut upstream) = TcpStream::connect(&target).await else {
                            return;
                        };
                        let mut client = client;
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
                            _ = cut.changed() => {}
                        }
                    });
                }
            })
        };
        TcpProxy {
            addr,
            open,
            cuts,
            accept,
        }
    }

    /// `http://addr`, for an etcd endpoint.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every connection through the proxy and refuses new ones.
    pub fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}
