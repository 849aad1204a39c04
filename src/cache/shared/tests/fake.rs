//! One scriptable fake Redis for the shared tier's tests: a reply per script and per command
//! given as closures, the scripts run recorded in order.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::cache::shared::remote::{self, Remote, RemoteError, Reply};

type EvalReply = Box<dyn Fn(&'static str, &[Vec<u8>]) -> Result<Reply, RemoteError> + Send + Sync>;
type CommandReply = Box<dyn Fn(&[Vec<u8>]) -> Result<Reply, RemoteError> + Send + Sync>;

/// A [`Remote`] answering `eval` with `eval(script name, keys)` and `command` with
/// `command(args)`. By default scripts and commands answer `Nil` and `subscribe` succeeds.
pub(super) struct Fake {
    eval: EvalReply,
    command: CommandReply,
    /// Every answer comes after an hour (a Redis that never answers in time).
    hang: bool,
    /// `subscribe` fails as before the first connection.
    unconnected: bool,
    /// The name of every script run, in order.
    pub(super) ran: std::sync::Mutex<Vec<&'static str>>,
}

impl Fake {
    pub(super) fn new() -> Fake {
        Fake {
            eval: Box::new(|_, _| Ok(Reply::Nil)),
            command: Box::new(|_| Ok(Reply::Nil)),
            hang: false,
            unconnected: false,
            ran: Default::default(),
        }
    }

    pub(super) fn eval(
        mut self,
        reply: impl Fn(&'static str, &[Vec<u8>]) -> Result<Reply, RemoteError> + Send + Sync + 'static,
    ) -> Fake {
        self.eval = Box::new(reply);
        self
    }

    pub(super) fn command(
        mut self,
        reply: impl Fn(&[Vec<u8>]) -> Result<Reply, RemoteError> + Send + Sync + 'static,
    ) -> Fake {
        self.command = Box::new(reply);
        self
    }

    /// Every operation, script or command, answers `reply`.
    pub(super) fn always(
        self,
        reply: impl Fn() -> Result<Reply, RemoteError> + Send + Sync + 'static,
    ) -> Fake {
        let reply = Arc::new(reply);
        let again = reply.clone();
        self.eval(move |_, _| reply()).command(move |_| again())
    }

    pub(super) fn hanging(mut self, hang: bool) -> Fake {
        self.hang = hang;
        self
    }

    pub(super) fn unconnected(mut self) -> Fake {
        self.unconnected = true;
        self
    }

    fn answer<'a>(&self, reply: Result<Reply, RemoteError>) -> remote::RemoteFuture<'a, Reply> {
        let hang = self.hang;
        Box::pin(async move {
            if hang {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            reply
        })
    }
}

impl Remote for Fake {
    fn eval<'a>(
        &'a self,
        script: &'static remote::Script,
        keys: Vec<Vec<u8>>,
        _: Vec<Vec<u8>>,
    ) -> remote::RemoteFuture<'a, Reply> {
        self.ran.lock().unwrap().push(script.name);
        self.answer((self.eval)(script.name, &keys))
    }
    fn command<'a>(&'a self, args: Vec<Vec<u8>>) -> remote::RemoteFuture<'a, Reply> {
        self.answer((self.command)(&args))
    }
    fn subscribe<'a>(&'a self, _: Vec<u8>) -> remote::RemoteFuture<'a, ()> {
        let unconnected = self.unconnected;
        Box::pin(async move {
            if unconnected {
                Err(RemoteError::NotConnected)
            } else {
                Ok(())
            }
        })
    }
}

/// Redis's answer while a cluster has no master for a slot.
pub(super) fn cluster_down() -> RemoteError {
    RemoteError::Redis("CLUSTERDOWN".into())
}

/// A `lookup` script's answer that finds `record` (the copy's metadata).
pub(super) fn found(record: &Bytes) -> Reply {
    Reply::Array(vec![
        Reply::Data(record.clone()),
        Reply::Nil,
        Reply::Data(Bytes::from_static(b"hit")),
        Reply::Nil,
    ])
}
